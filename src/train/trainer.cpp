// The step loop. One optimizer step:
//   batch = loader.next(); split into `accumulate` micro-batches of m rows;
//   for each: forward (row_offset = its first row), S = loss summed over its samples (batch
//   rule), backward of S / divisor (divisor = batch size x target size, the same for every
//   micro-batch); the micro-batches' parameter gradients and their S are combined by the
//   pairwise tree; loss = S_total / divisor; [clip]; optimizer step with lr = schedule(step).
// A micro-batch of a power-of-two number of 32-sample blocks is a complete subtree of the
// batch's canonical tree, so accumulate = k gives the bits of accumulate = 1 (contract T5).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <ostream>
#include <sstream>

#include "bitgrad/autograd.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/optim.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/train.hpp"
#include "bitgrad/version.hpp"
#include "kernels/kernels.hpp"
#include "kernels/tensor_ops.hpp"
#include "train/checkpoint.hpp"

namespace bitgrad::train {
namespace {

using Clock = std::chrono::steady_clock;

// Per-parameter pairwise trees of micro-batch gradients.
struct GradTree {
  std::vector<Tensor> val;
  std::vector<int> level;
  void push(Tensor g) {
    int l = 0;
    while (!val.empty() && level.back() == l) {
      g = kern::add_same_shape(val.back(), g);
      val.pop_back();
      level.pop_back();
      ++l;
    }
    val.push_back(std::move(g));
    level.push_back(l);
  }
  Tensor total() const {
    if (val.empty()) return Tensor();
    Tensor r = val.back();
    for (std::size_t i = val.size() - 1; i-- > 0;) r = kern::add_same_shape(val[i], r);
    return r;
  }
};

bool t5_holds(std::int64_t micro) {
  if (micro % kern::kBatchBlock) return false;
  const std::int64_t blocks = micro / kern::kBatchBlock;
  return (blocks & (blocks - 1)) == 0;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const optim::NamedTensors& params) {
  if (c.optimizer == "sgd") {
    optim::SgdOptions o;
    o.momentum = c.momentum;
    o.nesterov = c.nesterov;
    o.weight_decay = c.weight_decay;
    return std::make_unique<optim::Sgd>(params, o);
  }
  optim::AdamOptions o;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.weight_decay = c.weight_decay;
  o.decoupled = c.optimizer == "adamw";
  return std::make_unique<optim::Adam>(params, o);
}

optim::Schedule make_schedule(const Config& c, std::int64_t planned) {
  optim::Schedule s;
  s.kind = c.schedule == "step" ? optim::Schedule::Kind::step
                                : (c.schedule == "cosine" ? optim::Schedule::Kind::cosine : optim::Schedule::Kind::constant);
  s.lr = c.lr;
  s.gamma = c.gamma;
  s.step_size = c.step_size;
  s.total_steps = planned;
  s.min_lr = c.min_lr;
  s.warmup_steps = c.warmup_steps;
  return s;
}

struct Eval {
  double accuracy = -1, loss = 0;
};

Eval evaluate(nn::Module& model, const data::Dataset& ds, const Config& c) {
  NoGradGuard ng;
  data::LoaderOptions lo;
  lo.batch_size = std::min<std::int64_t>(c.eval_batch_size, ds.size());
  lo.shuffle = false;
  lo.drop_last = false;
  data::DataLoader loader(std::shared_ptr<const data::Dataset>(&ds, [](const data::Dataset*) {}), lo);
  nn::Context ctx;
  std::int64_t correct = 0, total = 0;
  double loss_sum = 0;
  const bool cls = ds.num_classes() > 0;
  for (std::int64_t b = 0; b < loader.batches_per_epoch(); ++b) {
    data::Batch batch = loader.next();
    Tensor out = model.forward(batch.x, ctx);
    const std::int64_t n = batch.x.shape()[0];
    if (cls) {
      loss_sum += cross_entropy(out, batch.y, Reduction::sum).item();
      Tensor pred = argmax(out, 1);
      const std::int64_t* p = pred.data<std::int64_t>();
      const std::int64_t* y = batch.y.data<std::int64_t>();
      for (std::int64_t i = 0; i < n; ++i) correct += p[i] == y[i];
    } else {
      loss_sum += mse_loss(reshape(out, batch.y.shape()), batch.y, Reduction::sum).item();
    }
    total += n;
  }
  Eval e;
  e.loss = loss_sum / static_cast<double>(total * (cls ? 1 : ds.target_shape().numel()));
  if (cls) e.accuracy = static_cast<double>(correct) / static_cast<double>(total);
  return e;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string auto_run_dir(const std::string& config_path) {
  std::string stem = config_path;
  if (auto p = stem.find_last_of('/'); p != std::string::npos) stem = stem.substr(p + 1);
  if (auto p = stem.rfind(".toml"); p != std::string::npos) stem = stem.substr(0, p);
  if (stem.empty()) stem = "run";
  for (int k = 1;; ++k) {
    const std::string d = "runs/" + stem + (k == 1 ? "" : "-" + std::to_string(k));
    if (!io::exists(d)) return d;
  }
}

bool dir_is_empty(const std::string& d) {
  return !io::exists(d + "/config.toml") && !io::exists(d + "/metrics.jsonl") && !io::exists(d + "/checkpoints");
}

}  // namespace

RunResult run(Config cfg, const RunOptions& opt, std::ostream& out) {
  // ---- settings and checks: nothing is written before all of them pass ----
  if (opt.seed) cfg.seed = *opt.seed;
  if (opt.accumulate > 0) cfg.accumulate = opt.accumulate;
  if (opt.threads > 0) cfg.threads = opt.threads;
  if (opt.workers >= 0) cfg.workers = opt.workers;
  BITGRAD_CHECK(cfg.batch_size % cfg.accumulate == 0, "train", "batch size ", cfg.batch_size, " is not divisible by accumulate ",
                cfg.accumulate);
  check_fp_environment();
  if (cfg.threads > 0) set_num_threads(cfg.threads);
  auto train_ds = train_dataset(cfg);
  auto test_ds = test_dataset(cfg);
  data::LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.shuffle = cfg.shuffle;
  lo.drop_last = cfg.drop_last;
  lo.workers = cfg.workers;
  lo.seed = cfg.seed;
  lo.augment.crop_padding = cfg.crop_padding;
  lo.augment.hflip = cfg.hflip;
  data::DataLoader loader(train_ds, lo);
  const std::int64_t bpe = loader.batches_per_epoch();
  auto model = build_model(cfg, *train_ds);
  const optim::NamedTensors params = model->named_parameters();
  auto opt_ = make_optimizer(cfg, params);
  const std::int64_t planned = cfg.steps > 0 ? cfg.steps : cfg.epochs * bpe;
  const optim::Schedule sched = make_schedule(cfg, planned);
  const std::int64_t stop = opt.steps >= 0 ? opt.steps : (opt.epochs >= 0 ? opt.epochs * bpe : planned);
  const std::string hash = config_hash(cfg);

  std::int64_t start = 0;
  std::string dir;
  if (!opt.resume.empty()) {
    dir = opt.resume;
    Checkpoint ck = load_latest_checkpoint(dir);
    if (ck.info.config_hash != hash)
      throw Error("resume: the configuration differs from the one " + dir + " was trained with (config hash " + hash + ", checkpoint " +
                  ck.info.config_hash + "); compare with " + dir + "/config.toml");
    BITGRAD_CHECK(ck.params.size() == params.size(), "resume", dir, "/checkpoints/", ck.name, " holds ", ck.params.size(),
                  " parameters, the model has ", params.size());
    NoGradGuard ng;
    for (std::size_t i = 0; i < params.size(); ++i) {
      BITGRAD_CHECK(ck.params[i].first == params[i].first && ck.params[i].second.shape() == params[i].second.shape(), "resume",
                    "checkpoint parameter '", ck.params[i].first, "' ", ck.params[i].second.shape().str(), " does not match model parameter '",
                    params[i].first, "' ", params[i].second.shape().str());
      Tensor p = params[i].second;
      p.copy_from(ck.params[i].second);
    }
    opt_->load_state(ck.optimizer, ck.info.opt_steps);
    start = ck.info.step;
    loader.seek(ck.info.epoch, ck.info.index);
    // the metrics of steps after the checkpoint are re-done
    if (io::exists(dir + "/metrics.jsonl")) {
      std::istringstream in(io::read_file(dir + "/metrics.jsonl"));
      std::string line, kept;
      while (std::getline(in, line)) {
        auto at = line.find("\"step\": ");
        const long long s = at == std::string::npos ? 0 : std::atoll(line.c_str() + at + 8);
        if (s <= start) kept += line + "\n";
      }
      io::write_file_atomic(dir + "/metrics.jsonl", kept);
    }
  } else {
    dir = opt.out.empty() ? auto_run_dir(cfg.file) : opt.out;
    BITGRAD_CHECK(dir_is_empty(dir), "train", "run directory ", dir, " already holds a run; choose another --out or continue it with --resume ",
                  dir);
    io::make_dirs(dir);
    io::write_file_atomic(dir + "/config.toml", resolved_toml(cfg));
  }
  std::ofstream metrics(dir + "/metrics.jsonl", std::ios::app);
  if (!metrics) throw Error("train: cannot write " + dir + "/metrics.jsonl");

  // ---- header ----
  const std::int64_t micro = cfg.batch_size / cfg.accumulate;
  out << "bitgrad " << kVersion << " train " << cfg.file << " (numerics " << kNumericsVersion << ", config " << hash.substr(0, 12) << ")\n";
  out << "data      " << train_ds->describe() << "; test: " << (test_ds ? test_ds->describe() : std::string("none")) << "\n";
  out << "model     " << model->describe() << "\n";
  out << "optimizer " << opt_->describe() << ", lr " << sched.describe() << "\n";
  out << "batch     " << cfg.batch_size << " (" << bpe << " per epoch)";
  if (cfg.accumulate > 1) out << ", " << cfg.accumulate << " micro-batches of " << micro;
  out << "; threads " << num_threads() << ", loader workers " << cfg.workers << ", " << isa_name(active_isa()) << "\n";
  out << "run       " << dir << (start > 0 ? " (resumed at step " + std::to_string(start) + ")" : std::string()) << "\n";
  if (cfg.accumulate > 1 && !t5_holds(micro))
    out << "note      micro-batches of " << micro << " samples are not a power-of-two number of " << kern::kBatchBlock
        << "-sample blocks: results may differ from accumulate = 1 (contract T5 does not hold for this configuration)\n";
  out.flush();

  const bool bar = opt.progress == 1 || (opt.progress < 0 && ::isatty(STDOUT_FILENO) && &out == &std::cout);
  const std::int64_t log_every = cfg.log_every > 0 ? cfg.log_every : std::max<std::int64_t>(1, bpe / 10);
  const std::int64_t divisor = cfg.loss == "mse" ? train_ds->target_shape().numel() : 1;

  RunResult res;
  res.out_dir = dir;
  const auto t0 = Clock::now();
  auto last_draw = t0;
  std::int64_t done_here = 0;
  bool evaluated_last = false;
  for (std::int64_t step = start; step < stop; ++step) {
    data::Batch b = loader.next();
    const double lr = sched.at(step);
    const std::int64_t B = b.x.shape()[0];
    const std::int64_t k = (B % cfg.accumulate == 0) ? cfg.accumulate : 1;
    const std::int64_t mb = B / k;
    std::vector<GradTree> trees(params.size());
    kern::PairwiseStack<float> loss_tree;  // the micro-batches' loss sums, tree as for the gradients
    for (std::int64_t m = 0; m < k; ++m) {
      nn::Context ctx{true, cfg.seed, static_cast<std::uint64_t>(step), m * mb};
      Tensor x = k == 1 ? b.x : slice(b.x, 0, m * mb, (m + 1) * mb);
      Tensor y = k == 1 ? b.y : slice(b.y, 0, m * mb, (m + 1) * mb);
      Tensor outp = model->forward(x, ctx);
      Tensor S = cfg.loss == "cross_entropy" ? cross_entropy(outp, y, Reduction::sum) : mse_loss(reshape(outp, y.shape()), y, Reduction::sum);
      loss_tree.push(static_cast<float>(S.item()));
      div(S, static_cast<double>(B * divisor)).backward();
      for (std::size_t i = 0; i < params.size(); ++i) {
        Tensor p = params[i].second;
        Tensor g = p.grad();
        if (g.defined()) trees[i].push(g);
        p.zero_grad();
      }
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i].second;
      Tensor g = trees[i].total();
      if (g.defined()) p.set_grad(g);
    }
    // the step loss in the parameters' dtype: S_total / divisor
    const float loss = loss_tree.total() / static_cast<float>(B * divisor);
    double gnorm = -1;
    if (cfg.clip_grad_norm > 0) gnorm = optim::clip_grad_norm(model->parameters(), cfg.clip_grad_norm);
    opt_->step(lr);
    opt_->zero_grad();
    ++done_here;
    res.last_loss = loss;
    res.steps = step + 1;
    metrics << "{\"step\": " << step + 1 << ", \"epoch\": " << b.epoch << ", \"batch\": " << b.index << ", \"loss\": " << fmt("%.9g", loss)
            << ", \"lr\": " << fmt("%.9g", lr);
    if (gnorm >= 0) metrics << ", \"grad_norm\": " << fmt("%.9g", gnorm);
    metrics << "}\n";

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
                      static_cast<double>(loss), sps, static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
        out << line << std::flush;
      }
    } else if ((step + 1) % log_every == 0 || step + 1 == stop) {
      char line[200];
      std::snprintf(line, sizeof line, "step %lld/%lld  epoch %lld  loss %.6f  lr %.6g  %.0f samples/s\n", static_cast<long long>(step + 1),
                    static_cast<long long>(stop), static_cast<long long>(b.epoch + 1), static_cast<double>(loss), lr, sps);
      out << line << std::flush;
    }
    evaluated_last = false;
    const bool epoch_end = b.index == bpe - 1;
    if (epoch_end && cfg.eval_each_epoch && test_ds) {
      if (bar) out << "\n";
      Eval e = evaluate(*model, *test_ds, cfg);
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
    if (opt.checkpoint_every > 0 && (step + 1) % opt.checkpoint_every == 0 && step + 1 < stop)
      save_checkpoint(dir, params, opt_->state(), {step + 1, loader.epoch(), loader.index(), opt_->steps(), hash});
  }
  if (bar && !evaluated_last) out << "\n";
  if (start < stop || opt.resume.empty())
    save_checkpoint(dir, params, opt_->state(), {std::max(start, stop), loader.epoch(), loader.index(), opt_->steps(), hash});

  Fingerprint fp;
  for (const auto& [name, p] : params) fp.add(p);
  for (const auto& [name, s] : opt_->state()) fp.add(s);
  const std::int64_t st = opt_->steps();
  fp.add_bytes(&st, sizeof st);
  res.fingerprint = fp.digest();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  out << "trained " << res.steps << " steps in " << fmt("%.1f", secs) << " s; run directory " << dir << "\n";
  out << "fingerprint " << res.fingerprint.hex() << "\n";
  out.flush();
  return res;
}

}  // namespace bitgrad::train
