// `bitgrad train`: a session stepped to the stop point, with the run directory (resolved
// configuration, manifest, metrics, traces, checkpoints), progress output, evaluation at each
// epoch's end, anomaly detection and resume.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bitgrad/autograd.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/repro.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"
#include "train/session.hpp"
#include "train/step_tracer.hpp"

namespace bitgrad::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string auto_run_dir(const std::string& config_path) {
  const std::string stem = config_stem(config_path);
  for (int k = 1;; ++k) {
    std::string d = "runs/";
    d.append(stem);
    if (k > 1) d.append("-").append(std::to_string(k));
    if (!io::exists(d)) return d;
  }
}

bool holds_a_run(const std::string& d) {
  return io::exists(d + "/config.toml") || io::exists(d + "/metrics.jsonl") || io::exists(d + "/checkpoints");
}

// What the op hook does: the op trace and / or anomaly detection.
struct HookState {
  repro::OpTrace* trace = nullptr;
  bool anomaly = false;
  std::int64_t step = 0;
};

bool all_finite(const Tensor& t, std::int64_t& at) {
  if (!is_floating(t.dtype())) return true;
  Tensor c = t.is_contiguous() ? t : t.contiguous_copy();
  bool ok = true;
  at = -1;
  BITGRAD_DISPATCH_FLOAT(c.dtype(), "detect_anomaly", T, [&] {
    const T* p = c.data<T>();
    for (std::int64_t i = 0; i < c.numel(); ++i)
      if (!std::isfinite(p[i])) {
        ok = false;
        at = i;
        return;
      }
  });
  return ok;
}

void on_op(void* ctx, const autograd::OpEvent& e) {
  auto* h = static_cast<HookState*>(ctx);
  if (h->trace) h->trace->record(e.op, e.value, e.site.file, e.site.line, e.label, e.backward, e.input);
  std::int64_t at;
  if (h->anomaly && !all_finite(e.value, at)) {
    std::ostringstream os;
    os << "anomaly at step " << h->step << ": " << (e.backward ? "the gradient of input " + std::to_string(e.input) + " of '" : "the output of '")
       << e.op << "'" << (e.label.empty() ? "" : " (label " + e.label + ")") << ", called at " << repro::site_string(e.site.file, e.site.line)
       << ", holds a non-finite value at element " << at << " of " << e.value.shape().str();
    throw Error(os.str());
  }
}

struct HookInstall {
  HookInstall(HookState* s, bool on) : on_(on) {
    if (on) autograd::set_op_hook(&on_op, s);
  }
  ~HookInstall() {
    if (on_) autograd::set_op_hook(nullptr, nullptr);
  }
  bool on_;
};

void grad_stats_line(std::ostream& m, std::int64_t step, const optim::NamedTensors& params) {
  m << "{\"step\": " << step << ", \"grad_stats\": {";
  bool first = true;
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor c = g.contiguous_copy().cast(DType::f64);
    const double* v = c.data<double>();
    double sq = 0, sum = 0, mx = 0;
    for (std::int64_t i = 0; i < c.numel(); ++i) {
      sq += v[i] * v[i];
      sum += v[i];
      mx = std::max(mx, std::fabs(v[i]));
    }
    m << (first ? "" : ", ") << "\"" << name << "\": {\"norm\": " << fmt("%.9g", std::sqrt(sq)) << ", \"mean\": "
      << fmt("%.9g", sum / static_cast<double>(c.numel())) << ", \"max_abs\": " << fmt("%.9g", mx) << "}";
    first = false;
  }
  m << "}}\n";
}

}  // namespace

RunResult run(Config cfg, const RunOptions& opt, std::ostream& out) {
  // ---- settings and checks: nothing is written before all of them pass ----
  if (opt.seed) cfg.seed = *opt.seed;
  if (opt.accumulate > 0) cfg.accumulate = opt.accumulate;
  if (opt.threads > 0) cfg.threads = opt.threads;
  if (opt.workers >= 0) cfg.workers = opt.workers;
  BITGRAD_CHECK(opt.trace == "none" || opt.trace == "steps" || opt.trace == "ops", "train", "--trace must be none, steps or ops, got '",
                opt.trace, "'");
  check_fp_environment();
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  Session ses(cfg, train_dataset(cfg), test_dataset(cfg), cfg.workers, opt.perturb_order);
  const std::int64_t bpe = ses.bpe;
  const std::int64_t stop = opt.steps >= 0 ? opt.steps : (opt.epochs >= 0 ? opt.epochs * bpe : ses.planned);
  const std::string hash = config_hash(cfg);

  std::int64_t start = 0;
  std::string dir;
  std::optional<Checkpoint> ck;
  if (!opt.resume.empty()) {
    dir = opt.resume;
    ck = load_latest_checkpoint(dir);
    if (ck->info.config_hash != hash)
      throw Error("resume: the configuration differs from the one " + dir + " was trained with (config hash " + hash + ", checkpoint " +
                  ck->info.config_hash + "); compare with " + dir + "/config.toml");
    ses.restore(*ck, dir + "/checkpoints/" + ck->name);
    start = ck->info.step;
  } else {
    dir = opt.out.empty() ? auto_run_dir(cfg.file) : opt.out;
    BITGRAD_CHECK(!holds_a_run(dir), "train", "run directory ", dir, " already holds a run; choose another --out or continue it with --resume ",
                  dir);
  }
  // the manifest (built before anything is written: for a resumed run it keeps the replaced
  // manifest's description in its history)
  std::string manifest;
  {
    repro::RunInfo info;
    info.command = opt.command;
    info.config_file = cfg.file;
    info.config_hash = hash;
    info.seed = cfg.seed;
    info.threads = num_threads();
    info.workers = cfg.workers;
    info.accumulate = cfg.accumulate;
    info.perturbed = opt.perturb_order.has_value();
    info.perturb_seed = opt.perturb_order.value_or(0);
    info.trace = opt.trace;
    info.model = ses.model->describe();
    for (const auto& [n, p] : ses.params) info.params.emplace_back(n, p.shape().str());
    info.data_files = data_files(cfg);
    info.resumed_at_step = start;
    const std::string previous = ck && io::exists(dir + "/manifest.json") ? io::read_file(dir + "/manifest.json") : std::string();
    manifest = repro::run_manifest_json(info, previous);
  }
  if (ck) {
    // the metrics and traces of steps after the checkpoint are re-done
    for (const char* f : {"/metrics.jsonl", "/trace.jsonl", "/ops.jsonl"}) {
      if (!io::exists(dir + f)) continue;
      std::istringstream in(io::read_file(dir + f));
      std::string line, kept;
      while (std::getline(in, line)) {
        auto at = line.find("\"step\": ");
        const long long s = at == std::string::npos ? 0 : std::atoll(line.c_str() + at + 8);
        if (s <= start) kept += line + "\n";
      }
      io::write_file_atomic(dir + f, kept);
    }
  } else {
    io::make_dirs(dir);
    io::write_file_atomic(dir + "/config.toml", resolved_toml(cfg));
  }
  io::write_file_atomic(dir + "/manifest.json", manifest);
  if (start == 0 && opt.resume.empty())
    save_checkpoint(dir, ses.params, ses.opt->state(), {0, 0, 0, 0, hash});  // diff replays from here
  std::ofstream metrics(dir + "/metrics.jsonl", std::ios::app);
  if (!metrics) throw Error("train: cannot write " + dir + "/metrics.jsonl");
  std::unique_ptr<StepTracer> trace;
  std::unique_ptr<repro::OpTrace> op_trace;
  if (opt.trace != "none") {
    trace = std::make_unique<StepTracer>(dir + "/trace.jsonl", true);
    ses.before_update = [&trace] { trace->wait(); };
  }
  if (opt.trace == "ops") op_trace = std::make_unique<repro::OpTrace>(dir + "/ops.jsonl", true);
  HookState hook;
  hook.trace = op_trace.get();
  hook.anomaly = opt.detect_anomaly;
  HookInstall install(&hook, op_trace || opt.detect_anomaly);

  // ---- header ----
  const std::int64_t micro = cfg.batch_size / cfg.accumulate;
  out << "bitgrad " << kVersion << " train " << cfg.file << " (numerics " << kNumericsVersion << ", config " << hash.substr(0, 12) << ")\n";
  out << "data      " << ses.train_ds->describe() << "; test: " << (ses.test_ds ? ses.test_ds->describe() : std::string("none")) << "\n";
  out << "model     " << ses.model->describe() << "\n";
  out << "optimizer " << ses.opt->describe() << ", lr " << ses.sched.describe() << "\n";
  out << "batch     " << cfg.batch_size << " (" << bpe << " per epoch)";
  if (cfg.accumulate > 1) out << ", " << cfg.accumulate << " micro-batches of " << micro;
  out << "; threads " << num_threads() << ", loader workers " << cfg.workers << ", " << isa_name(active_isa()) << "\n";
  out << "run       " << dir << (start > 0 ? " (resumed at step " + std::to_string(start) + ")" : std::string());
  if (opt.trace != "none") out << ", trace " << opt.trace;
  if (opt.detect_anomaly) out << ", anomaly detection";
  out << "\n";
  if (opt.perturb_order)
    out << "note      --perturb-order " << *opt.perturb_order
        << ": every reduction runs in a seeded random order; the results are not the canonical ones\n";
  if (stop > ses.planned && cfg.schedule == "cosine")
    out << "note      training to step " << stop << ", past the configuration's plan of " << ses.planned
        << " steps: the cosine schedule stays at its final learning rate " << fmt("%.6g", ses.sched.at(ses.planned)) << "\n";
  if (cfg.accumulate > 1 && !t5_holds(micro))
    out << "note      micro-batches of " << micro << " samples are not a power-of-two number of 32-sample blocks: results may differ "
        << "from accumulate = 1 (contract T5 does not hold for this configuration)\n";
  out.flush();

  const bool bar = opt.progress == 1 || (opt.progress < 0 && ::isatty(STDOUT_FILENO) && &out == &std::cout);
  const std::int64_t log_every = cfg.log_every > 0 ? cfg.log_every : std::max<std::int64_t>(1, bpe / 10);

  RunResult res;
  res.out_dir = dir;
  const auto t0 = Clock::now();
  auto last_draw = t0;
  std::int64_t done_here = 0;
  bool evaluated_last = false;
  for (std::int64_t step = start; step < stop; ++step) {
    hook.step = step + 1;
    if (op_trace) op_trace->begin_step(step + 1);
    Session::StepOut so = ses.step(step);
    const data::Batch& b = so.batch;
    ++done_here;
    res.last_loss = so.loss;
    res.steps = step + 1;
    if (trace) trace->submit(step, ses, so);
    if (op_trace) op_trace->flush();
    metrics << "{\"step\": " << step + 1 << ", \"epoch\": " << b.epoch << ", \"batch\": " << b.index << ", \"loss\": " << fmt("%.9g", so.loss)
            << ", \"lr\": " << fmt("%.9g", so.lr);
    if (so.grad_norm >= 0) metrics << ", \"grad_norm\": " << fmt("%.9g", so.grad_norm);
    metrics << "}\n";
    if (opt.grad_stats_every > 0 && (step + 1) % opt.grad_stats_every == 0) grad_stats_line(metrics, step + 1, ses.params);

    const auto now = Clock::now();
    const double el = std::chrono::duration<double>(now - t0).count();
    const double sps = el > 0 ? static_cast<double>(done_here * cfg.batch_size) / el : 0;
    const double eta = sps > 0 ? static_cast<double>((stop - step - 1) * cfg.batch_size) / sps : 0;
    if (bar) {
      if (std::chrono::duration<double>(now - last_draw).count() > 0.1 || step + 1 == stop) {
        last_draw = now;
        char line[200];
        std::snprintf(line, sizeof line, "\repoch %lld  step %lld/%lld  loss %.4f  %.0f samples/s  ETA %d:%02d   ",
                      static_cast<long long>(b.epoch + 1), static_cast<long long>(step + 1), static_cast<long long>(stop),
                      static_cast<double>(so.loss), sps, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
        out << line << std::flush;
      }
    } else if ((step + 1) % log_every == 0 || step + 1 == stop) {
      char line[200];
      std::snprintf(line, sizeof line, "step %lld/%lld  epoch %lld  loss %.6f  lr %.6g  %.0f samples/s\n", static_cast<long long>(step + 1),
                    static_cast<long long>(stop), static_cast<long long>(b.epoch + 1), static_cast<double>(so.loss), so.lr, sps);
      out << line << std::flush;
    }
    evaluated_last = false;
    if (b.index == bpe - 1 && cfg.eval_each_epoch && ses.test_ds) {
      if (bar) out << "\n";
      Eval e = ses.evaluate();
      evaluated_last = true;
      res.test_loss.push_back(e.loss);
      metrics << "{\"step\": " << step + 1 << ", \"epoch\": " << b.epoch << ", \"test_loss\": " << fmt("%.9g", e.loss);
      if (e.accuracy >= 0) {
        res.test_accuracy.push_back(e.accuracy);
        metrics << ", \"test_accuracy\": " << fmt("%.6f", e.accuracy);
        out << "epoch " << b.epoch + 1 << "  test accuracy " << fmt("%.2f%%", 100 * e.accuracy) << "  test loss " << fmt("%.6f", e.loss) << "\n";
      } else {
        out << "epoch " << b.epoch + 1 << "  test mse " << fmt("%.9g", e.loss) << "\n";
      }
      metrics << "}\n";
    }
    metrics.flush();
    if (opt.checkpoint_every > 0 && (step + 1) % opt.checkpoint_every == 0 && step + 1 < stop) {
      if (trace) trace->wait();  // the trace reaches the checkpoint before it exists
      save_checkpoint(dir, ses.params, ses.opt->state(), {step + 1, ses.loader->epoch(), ses.loader->index(), ses.opt->steps(), hash});
    }
  }
  if (bar && !evaluated_last) out << "\n";
  if (trace) trace->wait();
  if (start < stop)
    save_checkpoint(dir, ses.params, ses.opt->state(), {stop, ses.loader->epoch(), ses.loader->index(), ses.opt->steps(), hash});

  res.fingerprint = ses.fingerprint();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  out << "trained " << res.steps << " steps in " << fmt("%.1f", secs) << " s; run directory " << dir << "\n";
  out << "fingerprint " << res.fingerprint.hex() << "\n";
  out.flush();
  return res;
}

}  // namespace bitgrad::train
