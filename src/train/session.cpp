// The canonical optimizer step:
//   batch = loader.next(); split into `accumulate` micro-batches of m rows;
//   for each: forward (row_offset = its first row), S = loss summed over its samples (batch
//   rule), backward of S / divisor (divisor = batch size x target size, the same for every
//   micro-batch); the micro-batches' parameter gradients and their S are combined by the
//   pairwise tree; loss = S_total / divisor; [clip]; optimizer step with lr = schedule(step).
// A micro-batch of a power-of-two number of 32-sample blocks is a complete subtree of the
// batch's canonical tree, so accumulate = k gives the bits of accumulate = 1 (contract T5).
#include "train/session.hpp"

#include "bitgrad/autograd.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/repro.hpp"
#include "kernels/kernels.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::train {
namespace {

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

// Sets this thread's order perturbation for a scope.
struct PerturbScope {
  PerturbScope(const std::optional<std::uint64_t>& p, std::int64_t step) {
    kern::set_perturbation(p.has_value(), p.value_or(0));
    kern::perturb_step(static_cast<std::uint64_t>(step));
  }
  ~PerturbScope() { kern::set_perturbation(false); }
};

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

}  // namespace

bool t5_holds(std::int64_t micro) {
  if (micro % kern::kBatchBlock) return false;
  const std::int64_t blocks = micro / kern::kBatchBlock;
  return (blocks & (blocks - 1)) == 0;
}

std::string config_stem(const std::string& path) {
  std::string s = path;
  if (auto p = s.find_last_of('/'); p != std::string::npos) s = s.substr(p + 1);
  if (auto p = s.rfind(".toml"); p != std::string::npos) s = s.substr(0, p);
  return s.empty() ? "run" : s;
}

std::vector<std::string> data_files(const Config& c) {
  if (c.dataset == "fashion-mnist")
    return {c.path + "/train-images-idx3-ubyte.gz", c.path + "/train-labels-idx1-ubyte.gz", c.path + "/t10k-images-idx3-ubyte.gz",
            c.path + "/t10k-labels-idx1-ubyte.gz"};
  if (c.dataset == "csv") {
    std::vector<std::string> v{c.train_csv};
    if (!c.test_csv.empty()) v.push_back(c.test_csv);
    return v;
  }
  return {};
}

Session::Session(const Config& c, std::shared_ptr<data::Dataset> tr, std::shared_ptr<data::Dataset> te, int workers,
                 std::optional<std::uint64_t> p)
    : cfg(c), train_ds(std::move(tr)), test_ds(std::move(te)), perturb(p) {
  BITGRAD_CHECK(cfg.batch_size % cfg.accumulate == 0, "train", "batch size ", cfg.batch_size, " is not divisible by accumulate ",
                cfg.accumulate);
  data::LoaderOptions lo;
  lo.batch_size = cfg.batch_size;
  lo.shuffle = cfg.shuffle;
  lo.drop_last = cfg.drop_last;
  lo.workers = workers;
  lo.seed = cfg.seed;
  lo.augment.crop_padding = cfg.crop_padding;
  lo.augment.hflip = cfg.hflip;
  loader = std::make_unique<data::DataLoader>(train_ds, lo);
  bpe = loader->batches_per_epoch();
  model = build_model(cfg, *train_ds);
  params = model->named_parameters();
  opt = make_optimizer(cfg, params);
  planned = cfg.steps > 0 ? cfg.steps : cfg.epochs * bpe;
  sched.kind = cfg.schedule == "step" ? optim::Schedule::Kind::step
                                      : (cfg.schedule == "cosine" ? optim::Schedule::Kind::cosine : optim::Schedule::Kind::constant);
  sched.lr = cfg.lr;
  sched.gamma = cfg.gamma;
  sched.step_size = cfg.step_size;
  sched.total_steps = planned;
  sched.min_lr = cfg.min_lr;
  sched.warmup_steps = cfg.warmup_steps;
  divisor = cfg.loss == "mse" ? train_ds->target_shape().numel() : 1;
}

Session::StepOut Session::step(std::int64_t s) {
  PerturbScope ps(perturb, s);
  opt->zero_grad();
  StepOut r;
  r.batch = loader->next();
  r.lr = sched.at(s);
  const data::Batch& b = r.batch;
  const std::int64_t B = b.x.shape()[0];
  const std::int64_t k = (B % cfg.accumulate == 0) ? cfg.accumulate : 1;
  const std::int64_t mb = B / k;
  std::vector<GradTree> trees(params.size());
  kern::PairwiseStack<float> loss_tree;  // the micro-batches' loss sums, combined like the gradients
  for (std::int64_t m = 0; m < k; ++m) {
    nn::Context ctx{true, cfg.seed, static_cast<std::uint64_t>(s), m * mb};
    Tensor x = k == 1 ? b.x : slice(b.x, 0, m * mb, (m + 1) * mb);
    Tensor y = k == 1 ? b.y : slice(b.y, 0, m * mb, (m + 1) * mb);
    Tensor out = model->forward(x, ctx);
    Tensor S = cfg.loss == "cross_entropy" ? cross_entropy(out, y, Reduction::sum) : mse_loss(reshape(out, y.shape()), y, Reduction::sum);
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
  r.loss = loss_tree.total() / static_cast<float>(B * divisor);
  if (cfg.clip_grad_norm > 0) r.grad_norm = optim::clip_grad_norm(model->parameters(), cfg.clip_grad_norm);
  if (before_update) before_update();
  opt->step(r.lr);
  return r;
}

Tensor Session::predict(const Tensor& x) const {
  NoGradGuard ng;
  return model->forward(x, nn::Context{});
}

Eval Session::evaluate() const {
  NoGradGuard ng;
  PerturbScope ps(perturb, -1);
  const data::Dataset& ds = *test_ds;
  data::LoaderOptions lo;
  lo.batch_size = std::min<std::int64_t>(cfg.eval_batch_size, ds.size());
  lo.shuffle = false;
  lo.drop_last = false;
  data::DataLoader l(std::shared_ptr<const data::Dataset>(&ds, [](const data::Dataset*) {}), lo);
  std::int64_t correct = 0, total = 0;
  double loss_sum = 0;
  const bool cls = ds.num_classes() > 0;
  for (std::int64_t i = 0; i < l.batches_per_epoch(); ++i) {
    data::Batch batch = l.next();
    Tensor out = model->forward(batch.x, nn::Context{});
    const std::int64_t n = batch.x.shape()[0];
    if (cls) {
      loss_sum += cross_entropy(out, batch.y, Reduction::sum).item();
      Tensor pred = argmax(out, 1);
      const std::int64_t* pp = pred.data<std::int64_t>();
      const std::int64_t* y = batch.y.data<std::int64_t>();
      for (std::int64_t j = 0; j < n; ++j) correct += pp[j] == y[j];
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

void Session::restore(const Checkpoint& ck, const std::string& where) {
  BITGRAD_CHECK(ck.params.size() == params.size(), "resume", where, " holds ", ck.params.size(), " parameters, the model has ", params.size());
  NoGradGuard ng;
  for (std::size_t i = 0; i < params.size(); ++i) {
    BITGRAD_CHECK(ck.params[i].first == params[i].first && ck.params[i].second.shape() == params[i].second.shape(), "resume",
                  "checkpoint parameter '", ck.params[i].first, "' ", ck.params[i].second.shape().str(), " does not match model parameter '",
                  params[i].first, "' ", params[i].second.shape().str());
    Tensor p = params[i].second;
    p.copy_from(ck.params[i].second);
  }
  opt->load_state(ck.optimizer, ck.info.opt_steps);
  loader->seek(ck.info.epoch, ck.info.index);
}

Digest128 Session::fingerprint() const {
  Fingerprint fp;
  for (const auto& [name, p] : params) fp.add(p);
  for (const auto& [name, s] : opt->state()) fp.add(s);
  const std::int64_t st = opt->steps();
  fp.add_bytes(&st, sizeof st);
  return fp.digest();
}

}  // namespace bitgrad::train

namespace bitgrad::train {

void write_study(const std::string& dir, const std::string& kind, const std::string& result_file, const std::string& json,
                 const Config& c, const std::string& command, bool perturbed) {
  io::make_dirs(dir);
  io::write_file_atomic(dir + "/" + result_file, json);
  repro::RunInfo info;
  info.kind = kind;
  info.command = command;
  info.config_file = c.file;
  info.config_hash = config_hash(c);
  info.seed = c.seed;
  info.perturbed = perturbed;
  info.data_files = data_files(c);
  io::write_file_atomic(dir + "/manifest.json", repro::run_manifest_json(info));
}

}  // namespace bitgrad::train
