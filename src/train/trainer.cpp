// train::run: a session stepped to the stop point, with the run directory (resolved
// configuration, metrics, checkpoints), progress output, evaluation at each epoch's end and
// resume. The instruments watch through RunObserver (train/trainer.hpp).
#include "train/trainer.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <streambuf>

#include "bitgrad/onnx.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"
#include "dist/plan.hpp"
#include "io/format.hpp"
#include "train/dist_sync.hpp"

namespace bitgrad::train {
namespace {

using Clock = std::chrono::steady_clock;
using io::strprintf;

// Progress on the terminal: a bar redrawn at most every 0.1 s, or a log line every
// `log_every` steps.
class Progress {
 public:
  Progress(const Config& cfg, const RunOptions& opt, std::ostream& out, std::int64_t stop, std::int64_t batches_per_epoch)
      : out_(out), stop_(stop), batch_size_(cfg.train.batch_size) {
    bar_ = opt.progress == 1 || (opt.progress < 0 && ::isatty(STDOUT_FILENO) && &out == &std::cout);
    log_every_ = cfg.train.log_every > 0 ? cfg.train.log_every : std::max<std::int64_t>(1, batches_per_epoch / 10);
  }
  void step(std::int64_t step, const Session::StepOut& step_out) {
    ++done_;
    if (stop_requested()) return;  // once a stop is asked for, only the stop's own lines follow
    const auto now = Clock::now();
    const double elapsed = seconds();
    const double sps = elapsed > 0 ? static_cast<double>(done_ * batch_size_) / elapsed : 0;
    const std::int64_t epoch = step_out.batch.epoch + 1;
    if (bar_) {
      if (std::chrono::duration<double>(now - last_draw_).count() <= 0.1 && step != stop_) return;
      last_draw_ = now;
      const double eta = sps > 0 ? static_cast<double>((stop_ - step) * batch_size_) / sps : 0;
      out_ << strprintf("\repoch %lld  step %lld/%lld  loss %.4f  %.0f samples/s  ETA %d:%02d   ", static_cast<long long>(epoch),
                        static_cast<long long>(step), static_cast<long long>(stop_), static_cast<double>(step_out.loss), sps,
                        static_cast<int>(eta) / 60, static_cast<int>(eta) % 60)
           << std::flush;
    } else if (step % log_every_ == 0 || step == stop_) {
      out_ << strprintf("step %lld/%lld  epoch %lld  loss %.6f  lr %.6g  %.0f samples/s\n", static_cast<long long>(step),
                        static_cast<long long>(stop_), static_cast<long long>(epoch), static_cast<double>(step_out.loss), step_out.lr, sps)
           << std::flush;
    }
    line_open_ = bar_;
  }
  void end_line() {  // before other output
    if (line_open_) out_ << "\n";
    line_open_ = false;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

 private:
  std::ostream& out_;
  std::int64_t stop_, batch_size_, log_every_ = 1, done_ = 0;
  bool bar_ = false, line_open_ = false;
  Clock::time_point t0_ = Clock::now(), last_draw_ = t0_;
};

void print_header(const Session& session, const RunOptions& opt, const std::string& dir, std::int64_t start, std::int64_t stop,
                  const std::string& hash, const std::vector<RunObserver*>& observers, const std::vector<std::string>& hosts,
                  std::ostream& out) {
  const Config& cfg = session.config();
  const std::int64_t micro = cfg.train.batch_size / cfg.train.accumulate;
  out << "bitgrad " << kVersion << " train " << cfg.file << " (numerics " << kNumericsVersion << ", config " << hash.substr(0, 12) << ")\n";
  out << "data      " << session.train_data().describe() << "; test: " << (session.test_data() ? session.test_data()->describe() : std::string("none"))
      << "\n";
  out << "model     " << session.model().describe() << "\n";
  if (const onnx::SampleAnalysis* a = session.graph_samples()) {  // where an imported graph's samples go (numerics §42)
    using Mode = onnx::SampleAnalysis::Mode;
    if (a->mode == Mode::batch_rule)
      out << "samples   on axis 0 wherever they meet the parameters: every gradient sums them by the batch rule\n";
    else if (session.per_block())
      out << "samples   per 32-sample block: " << a->node << ": " << a->why << "; each block runs as its own forward and backward, combined by "
          << "the batch's tree, so micro-batches and ranks keep the bits (numerics.md §42)\n";
    else
      out << "note      " << a->node << (a->mode == Mode::mixes_samples ? " mixes the samples: " : " with batch statistics: ") << a->why
          << "; the batch runs whole, and micro-batches and ranks are refused (numerics.md §42)\n";
  }
  out << "optimizer " << session.optimizer().describe() << ", lr " << session.schedule().describe() << "\n";
  if (cfg.train.precision != Precision::fp32)
    out << "precision " << precision_name(cfg.train.precision) << " matmul operands and results, f32 master weights, rounding "
        << (cfg.train.stochastic_rounding ? "stochastic" : "to nearest") << ", loss scale "
        << (cfg.train.loss_scale == 0 ? "dynamic" : strprintf("%g", cfg.train.loss_scale)) << "\n";
  out << "batch     " << cfg.train.batch_size << " (" << session.batches_per_epoch() << " per epoch)";
  if (cfg.train.accumulate > 1) out << ", " << cfg.train.accumulate << " micro-batches of " << micro;
  out << "; threads " << num_threads() << ", loader workers " << cfg.run.workers << ", " << isa_name(active_isa()) << "\n";
  if (session.world() > 1) {
    const bool bn = has_batch_norm(session.model());  // one node of the batch's tree per rank (numerics §20)
    const dist::StepLayout l = dist::step_layout(cfg.train.batch_size, cfg.train.batch_size, cfg.train.accumulate, session.world(),
                                                 bn ? dist::Sharding::whole_nodes : dist::Sharding::even);
    std::int64_t lo = l.leaves, hi = 0;
    for (const dist::Range& s : l.shards) lo = std::min(lo, s.size()), hi = std::max(hi, s.size());
    std::string on;
    for (std::size_t r = 0; r < hosts.size() && r < 8; ++r) on += (r ? ", " : "") + hosts[r];
    if (hosts.size() > 8) on += ", ...";
    out << "ranks     " << session.world() << " (MPI, on " << on << "); a batch is " << l.leaves << " "
        << (l.leaf_rows == dist::kBlockRows ? "blocks of 32 samples" : "micro-batches of " + std::to_string(l.leaf_rows) + " samples") << ", "
        << (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)) << " per rank"
        << (bn ? " (one node of the batch's tree each: batch norm's statistics are exchanged)" : "") << "; rank 0 writes the run\n";
  }
  out << "run       " << dir << (start > 0 ? " (resumed at step " + std::to_string(start) + ")" : std::string());
  for (const RunObserver* o : observers) out << o->describe();
  out << "\n";
  if (opt.perturb_order)
    out << "note      --perturb-order " << *opt.perturb_order
        << ": every reduction runs in a seeded random order; the results are not the canonical ones\n";
  if (stop > session.planned_steps() && cfg.schedule.type == optim::Schedule::Kind::cosine)
    out << "note      training to step " << stop << ", past the configuration's plan of " << session.planned_steps()
        << " steps: the cosine schedule stays at its final learning rate " << strprintf("%.6g", session.schedule().at(session.planned_steps()))
        << "\n";
  if (cfg.train.accumulate > 1 && !whole_subtree(micro))
    out << "note      micro-batches of " << micro << " samples are not a power-of-two number of 32-sample blocks: results may differ "
        << "from accumulate = 1 (contract T5 does not hold for this configuration)\n";
  out.flush();
}

store::Json step_metrics(std::int64_t step, const Session::StepOut& step_out) {
  store::Json m = {{"step", step}, {"epoch", step_out.batch.epoch}, {"batch", step_out.batch.index}, {"loss", step_out.loss}, {"lr", step_out.lr}};
  if (step_out.grad_norm >= 0) m["grad_norm"] = step_out.grad_norm;
  if (step_out.loss_scale != 1) m["loss_scale"] = step_out.loss_scale;
  if (step_out.skipped) m["skipped"] = true;  // a non-finite gradient: no update (dynamic loss scaling)
  return m;
}

// Norm, mean and largest magnitude of each parameter's gradient (in f64, in element order).
store::Json grad_stats(std::int64_t step, const optim::NamedTensors& params) {
  store::Json stats = store::Json::object();
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
    stats[name] = {{"norm", std::sqrt(sq)}, {"mean", sum / static_cast<double>(c.numel())}, {"max_abs", mx}};
  }
  return {{"step", step}, {"grad_stats", stats}};
}

// The test set at an epoch's end (every > 0: after step `step` of every N): a metrics record and
// a line of output. A text model's loss is per token, and also in bits.
void evaluate_at(const Session& session, std::int64_t step, std::int64_t epoch, bool periodic, store::JsonLinesWriter& metrics, RunResult& res,
                 std::ostream& out) {
  const Eval e = session.evaluate();
  res.test_loss.push_back(e.loss);
  store::Json m = {{"step", step}, {"epoch", epoch}, {"test_loss", e.loss}};
  const std::string when = periodic ? "step " + std::to_string(step) : "epoch " + std::to_string(epoch + 1);
  const bool text = session.config().data.dataset == DatasetKind::text;
  if (text) {
    const double bits = e.loss / 0.69314718055994530942;  // nats to bits
    m["test_bits_per_token"] = bits;
    out << when << "  validation loss " << strprintf("%.4f", e.loss) << "  " << strprintf("%.4f", bits)
        << (session.config().data.text_bytes ? " bits per byte" : " bits per character") << "\n";
  } else if (e.accuracy >= 0) {
    res.test_accuracy.push_back(e.accuracy);
    m["test_accuracy"] = e.accuracy;
    out << when << "  test accuracy " << strprintf("%.2f%%", 100 * e.accuracy) << "  test loss " << strprintf("%.6f", e.loss) << "\n";
  } else {
    const LossKind k = session.config().train.loss;
    out << when << "  test " << (k == LossKind::mse ? std::string("mse") : std::string(to_string(k)) + " loss") << " " << strprintf("%.9g", e.loss) << "\n";
  }
  metrics.write(m);
}

// A run continued with another accumulate is the same run only when both splits keep T5.
void check_resumed_accumulate(std::int64_t before, const Config& cfg, const std::string& dir) {
  if (before <= 0 || before == cfg.train.accumulate) return;
  auto keeps_t5 = [&](std::int64_t k) { return k == 1 || whole_subtree(cfg.train.batch_size / k); };
  if (keeps_t5(before) && keeps_t5(cfg.train.accumulate)) return;
  throw Error("resume: " + dir + " was trained with accumulate " + std::to_string(before) + "; accumulate " + std::to_string(cfg.train.accumulate) +
              " gives other bits (micro-batches of " + std::to_string(cfg.train.batch_size / (keeps_t5(before) ? cfg.train.accumulate : before)) +
              " samples are not a power-of-two number of 32-sample blocks, contract T5), so the continued run would not be the same run; "
              "resume with --accumulate " + std::to_string(before));
}

// A run that stopped before its first checkpoint is started again only with its own
// configuration (config.toml's second line names its hash).
void check_unborn_config(const store::RunDir& dir, const std::string& hash) {
  std::string had;
  if (dir.has("config.toml")) {
    const std::string text = io::read_file(dir.config_path());
    const std::string tag = "# config hash ";
    if (const std::size_t at = text.find(tag); at != std::string::npos) had = text.substr(at + tag.size(), hash.size());
  }
  if (had != hash)
    throw Error("resume: " + dir.path() + " stopped before its first checkpoint, and the configuration differs from the one it was started with (config hash " +
                hash + ", " + dir.config_path() + (had.empty() ? " is missing or damaged" : " has " + had) + ")");
}

volatile std::sig_atomic_t g_stop = 0;

// Output of the ranks other than 0.
struct NullBuf : std::streambuf {
  int overflow(int c) override { return c; }
};
struct NullStream : std::ostream {
  NullStream() : std::ostream(&buf) {}
  NullBuf buf;
};

}  // namespace

void request_stop(int signal_number) { g_stop = signal_number > 0 ? signal_number : 1; }
int stop_requested() { return g_stop; }
void clear_stop_request() { g_stop = 0; }

RunResult run(Config cfg, const RunOptions& opt, std::ostream& out) { return run(std::move(cfg), opt, out, {}); }

RunResult run(Config cfg, const RunOptions& opt, std::ostream& out_arg, const std::vector<RunObserver*>& observers) {
  // data parallel when launched by mpirun: every rank trains, rank 0 alone writes and prints
  dist::Comm* comm = dist::Comm::launched_by_mpirun() ? &dist::Comm::world() : nullptr;
  if (comm && comm->size() == 1) comm = nullptr;
  if (comm && opt.dist_timeout > 0) comm->set_timeout(opt.dist_timeout);
  const bool root = !comm || comm->root();
  NullStream null_out;
  std::ostream& out = root ? out_arg : null_out;

  // settings and checks: nothing is written before all of them pass (on every rank)
  // the run's own execution context: its thread count and the caller's code path, so that runs
  // in one process (threads, a server) do not share a pool or a setting
  std::optional<ExecContext> context;
  std::optional<ExecScope> in_context;
  std::optional<Session> session_slot;
  std::optional<store::RunDir> dir_slot;
  std::optional<store::Checkpoint> ck;
  std::int64_t stop = 0;
  std::string hash;
  bool fresh = opt.resume.empty();
  std::vector<std::string> hosts{dist::host_name()};
  StartInfo start_info;
  try {
    if (opt.seed) cfg.seed = *opt.seed;
    if (opt.accumulate > 0) cfg.train.accumulate = opt.accumulate;
    if (opt.threads > 0) cfg.run.threads = opt.threads;
    if (opt.workers >= 0) cfg.run.workers = opt.workers;
    check_fp_environment();
    context.emplace(cfg.run.threads > 0 ? cfg.run.threads : num_threads(), active_isa());
    in_context.emplace(*context);
    session_slot.emplace(cfg, train_dataset(cfg), test_dataset(cfg), cfg.run.workers, opt.perturb_order, comm);
    Session& session = *session_slot;
    stop = opt.steps >= 0 ? opt.steps : (opt.epochs >= 0 ? opt.epochs * session.batches_per_epoch() : session.planned_steps());
    hash = config_hash(cfg);
    if (root) {
      // the run directory: a new one, or the resumed one cut back to its latest checkpoint
      dir_slot.emplace(opt.resume.empty() ? store::RunDir::create(opt.out.empty() ? default_run_dir(cfg.file, "", true) : opt.out)
                                          : store::RunDir::resume(opt.resume));
      store::RunDir& dir = *dir_slot;
      if (!fresh && dir.unborn()) {  // it died before its first checkpoint: nothing to continue, so start it again
        check_unborn_config(dir, hash);
        out << "resume: " << dir.path() << " stopped before its first checkpoint; starting it again from step 0\n";
        dir.clear_records();
        fresh = true;
      }
      if (!fresh) {
        ck.emplace(dir.latest_checkpoint());
        if (ck->info.precision != cfg.train.precision)
          throw Error("resume: " + dir.path() + " was trained in precision " + precision_name(ck->info.precision) + "; the configuration asks for " +
                      precision_name(cfg.train.precision) + ", and a run continued in another precision is not the same run; resume with [train] "
                      "precision = \"" + precision_name(ck->info.precision) + "\" or start a new run");
        if (ck->info.config_hash != hash)
          throw Error("resume: the configuration differs from the one " + dir.path() + " was trained with (config hash " + hash +
                      ", checkpoint " + ck->info.config_hash + "); compare with " + dir.config_path());
        check_resumed_accumulate(ck->info.accumulate, cfg, dir.path());
        const std::int64_t start = ck->info.step;
        if (stop <= start)
          throw Error("resume: " + dir.path() + " has trained " + std::to_string(start) + " steps already; " +
                      (stop == start ? "the run is complete (ask for more with --steps or --epochs)"
                                     : "stopping at step " + std::to_string(stop) + " would train none (ask for more than " +
                                           std::to_string(start) + ")"));
      }
    }
  } catch (const std::exception& e) {  // several ranks: every rank learns of it in agree_to_start
    if (!comm) throw;
    start_info.error = e.what();
  }
  if (comm) {
    if (start_info.error.empty()) {
      start_info.config_hash = hash;
      start_info.stop = stop;
      start_info.perturb = opt.perturb_order;
      start_info.data_files = cfg.data_files();
    }
    hosts = agree_to_start(*comm, start_info);  // throws on every rank when one cannot start
  }
  Session& session = *session_slot;
  session.set_hosts(hosts);

  std::int64_t start = 0;
  if (root && !fresh) {
    store::RunDir& dir = *dir_slot;
    session.restore(*ck, dir.path() + "/checkpoints/" + ck->name);
    start = ck->info.step;
    dir.truncate_after(start, ck->info.records, ck->info.record_digests);
  } else if (root) {
    dir_slot->write_config(resolved_toml(cfg));
  }
  // what inference reads instead of the corpus (src/infer); a run from before it gets it on resume
  if (root && cfg.data.dataset == DatasetKind::text && (fresh || !dir_slot->has("vocabulary.json")))
    dir_slot->write_vocabulary(data::vocabulary_json(*text_corpus(cfg)));
  // a vocabulary changed since the checkpoint (a missing one is written again from the corpus
  // above, and must come out the same) would make sample and serve decode other text
  if (root && !fresh) dir_slot->check_inputs(ck->info.input_digests, ck->name);
  if (comm) start = share_start_state(*comm, session, root && !fresh ? &*ck : nullptr);
  const std::string world_note = comm ? std::to_string(comm->size()) : "1";
  auto info_at = [&](std::int64_t step) {
    store::CheckpointInfo info = session.checkpoint_info(step, hash);
    info.world = session.world();
    info.hosts = hosts;
    if (root) info.input_digests = dir_slot->input_digests();
    return info;
  };
  std::optional<store::JsonLinesWriter> metrics;
  if (root) {
    store::RunDir& dir = *dir_slot;
    for (RunObserver* o : observers) o->begin(&dir, session, start);
    if (fresh) dir.save_checkpoint(session.model_state(), session.optimizer().state(), info_at(0));  // diff replays from here
    metrics.emplace(dir.metrics());
  } else {
    for (RunObserver* o : observers) o->begin(nullptr, session, start);
  }
  session.set_before_update([&observers] {
    for (RunObserver* o : observers) o->before_update();
  });
  auto checkpoint = [&](std::int64_t step) {
    if (!root) return;
    store::RunDir& dir = *dir_slot;
    for (RunObserver* o : observers) o->sync();  // the traces reach the disk before the checkpoint exists
    metrics->flush();
    dir.sync_records();
    store::CheckpointInfo info = info_at(step);
    info.records = dir.record_sizes();
    info.record_digests = dir.record_digests();
    dir.save_checkpoint(session.model_state(), session.optimizer().state(), info);
  };
  auto replicas = [&](std::int64_t step) {
    if (comm) check_replicas(*comm, session, step, hosts);
  };
  print_header(session, opt, root ? dir_slot->path() : std::string(), start, stop, hash, observers, hosts, out);
  replicas(start);  // the ranks start from the same state

  Progress progress(cfg, opt, out, stop, session.batches_per_epoch());
  RunResult res;
  res.out_dir = root ? dir_slot->path() : std::string();
  for (std::int64_t step = start + 1; step <= stop; ++step) {  // steps count from 1 in every file
    for (RunObserver* o : observers) o->begin_step(step);
    const Session::StepOut step_out = session.step(step - 1);
    res.last_loss = step_out.loss;
    res.steps = step;
    for (RunObserver* o : observers) o->end_step(step, session, step_out);
    if (metrics) {
      store::Json m = step_metrics(step, step_out);
      for (RunObserver* o : observers) o->add_metrics(step, m);
      metrics->write(m);
      if (opt.grad_stats_every > 0 && step % opt.grad_stats_every == 0) metrics->write(grad_stats(step, session.params()));
    }
    progress.step(step, step_out);
    if (session.test_data() && root) {
      if (cfg.eval.every > 0 && step % cfg.eval.every == 0) {
        progress.end_line();
        evaluate_at(session, step, step_out.batch.epoch, true, *metrics, res, out);
      } else if (step_out.batch.index == session.batches_per_epoch() - 1 && cfg.eval.each_epoch) {
        progress.end_line();
        evaluate_at(session, step, step_out.batch.epoch, false, *metrics, res, out);
      }
    }
    if (metrics) metrics->flush();
    const bool epoch_end = step_out.batch.index == session.batches_per_epoch() - 1;
    // several ranks stop at the step they agreed on; one process at the step the signal came in
    if (const int sig = comm ? step_out.stop_signal : stop_requested(); sig != 0 && step < stop) {
      progress.end_line();
      replicas(step);
      checkpoint(step);
      const std::string how = "bitgrad train " + cfg.file + " --resume " + (root ? dir_slot->path() : std::string("RUN_DIR"));
      out << "stopped at step " << step << " of " << stop << " (signal " << sig << "); checkpoint written; continue with: " << how << "\n";
      out.flush();
      throw Interrupted("interrupted at step " + std::to_string(step) + "; continue with: " + how, sig);
    }
    if (opt.replica_check_every > 0 && step % opt.replica_check_every == 0) replicas(step);
    if (step < stop && ((opt.checkpoint_every > 0 && step % opt.checkpoint_every == 0) || (opt.checkpoint_epochs && epoch_end))) checkpoint(step);
  }
  progress.end_line();
  for (RunObserver* o : observers) o->sync();
  replicas(stop);
  if (start < stop) checkpoint(stop);

  res.fingerprint = session.fingerprint();
  out << "trained " << res.steps << " steps in " << strprintf("%.1f", progress.seconds()) << " s; run directory " << res.out_dir << "\n";
  out << "fingerprint " << res.fingerprint.hex() << "\n";
  out.flush();
  return res;
}

}  // namespace bitgrad::train
