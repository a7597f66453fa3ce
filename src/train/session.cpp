// The canonical optimizer step:
//   batch = loader.next(); split into micro-batches of m = batch_size / accumulate rows (a
//   short last batch: ceil(rows / m) of them, the last one shorter);
//   for each: forward (row_offset = its first row), S = loss summed over its samples (batch
//   rule), backward of S / divisor (divisor = batch size x target size, the same for every
//   micro-batch); the micro-batches' parameter gradients and their S are combined by the
//   pairwise tree; loss = S_total / divisor; [clip]; optimizer step with lr = schedule(step).
// A micro-batch of a power-of-two number of 32-sample blocks is a complete subtree of the
// batch's canonical tree, so accumulate = k gives the bits of accumulate = 1 (contract T5).
#include "train/session.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bitgrad/autograd.hpp"
#include "io/format.hpp"
#include "kernels/kernels.hpp"
#include "kernels/tensor_ops.hpp"
#include "train/memory.hpp"
#include "train/trainer.hpp"

namespace bitgrad::train {
namespace {

// Sets this thread's order perturbation for a scope.
struct PerturbScope {
  PerturbScope(const std::optional<std::uint64_t>& p, std::int64_t step) {
    kern::set_perturbation(p.has_value(), p.value_or(0));
    kern::perturb_step(static_cast<std::uint64_t>(step));
  }
  ~PerturbScope() { kern::set_perturbation(false); }
};

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, const optim::NamedTensors& params) {
  if (c.optimizer.type == OptimizerKind::sgd) {
    optim::SgdOptions o;
    o.momentum = c.optimizer.momentum;
    o.nesterov = c.optimizer.nesterov;
    o.weight_decay = c.optimizer.weight_decay;
    return std::make_unique<optim::Sgd>(params, o);
  }
  optim::AdamOptions o;
  o.beta1 = c.optimizer.beta1;
  o.beta2 = c.optimizer.beta2;
  o.eps = c.optimizer.eps;
  o.weight_decay = c.optimizer.weight_decay;
  o.decoupled = c.optimizer.type == OptimizerKind::adamw;
  o.decay_matrices_only = c.optimizer.decay_matrices_only;
  return std::make_unique<optim::Adam>(params, o);
}

}  // namespace

// dynamic loss scaling starts at 2^16 (numerics.md §25)
constexpr int kInitialScaleLog2 = 16;

bool whole_subtree(std::int64_t rows) {
  if (rows % kern::kBatchBlock) return false;
  const std::int64_t blocks = rows / kern::kBatchBlock;
  return (blocks & (blocks - 1)) == 0;
}

bool has_tied_weights(const Config& c) {
  for (const LayerSpec& l : c.model.layers)
    if (l.type == LayerKind::tied_head) return true;
  return false;
}

bool has_batch_norm(const Config& c) {
  for (const LayerSpec& l : c.model.layers)
    if (l.type == LayerKind::batchnorm) return true;
  return false;
}

namespace {

// What a run holds at its peak, roughly, refused up front when the machine lacks it: an
// `samples = 1e12` would otherwise allocate until it fails, after the run directory exists.
void check_memory(const Config& c, const data::Dataset& train, const data::Dataset* test, const nn::Sequential& model, int workers) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  // the epoch's sample order (int64), the next epoch's beside it
  const double order = 16.0 * static_cast<double>(train.size());
  // parameters, gradients, micro-batch accumulation and up to two optimizer slots, in the dtype
  double params = 0;
  for (const Tensor& p : model.parameters()) params += static_cast<double>(p.numel()) * static_cast<double>(dtype_size(p.dtype()));
  params *= 5;
  // each layer's output for a batch, kept for the backward pass and met by its gradient
  const std::int64_t batch = std::max(c.train.batch_size, c.eval.batch_size);
  Shape s = train.sample_shape();
  std::vector<std::int64_t> dims{batch};
  for (std::int64_t d : s.vec()) dims.push_back(d);
  Shape cur(dims);
  double acts = 3.0 * static_cast<double>(cur.numel()) * 4;
  for (const auto& [name, m] : model.children()) {
    cur = m->output_shape(cur);
    acts += 3.0 * static_cast<double>(cur.numel()) * 8;  // f32 or f64, a value, a saved copy and a gradient
  }
  // batches the loader holds ahead (inputs and targets, f32)
  const double ahead = static_cast<double>(2 * workers + 2) * static_cast<double>(c.train.batch_size) *
                       static_cast<double>(s.numel() + train.target_shape().numel() + 1) * 4;
  const double total = order + params + acts + ahead + (test ? 8.0 * static_cast<double>(test->size()) : 0.0);
  require_memory(total, "train: this run",
                 io::strprintf("sample order of %lld samples %.3g GiB, parameters with their gradients and optimizer state %.3g GiB, "
                               "activations of a batch %.3g GiB",
                               static_cast<long long>(train.size()), order / gib, params / gib, (acts + ahead) / gib));
}

}  // namespace

Session::Session(const Config& c, std::shared_ptr<data::Dataset> tr, std::shared_ptr<data::Dataset> te, int workers,
                 std::optional<std::uint64_t> p, dist::Comm* comm, DType param_dtype)
    : cfg_(c), train_ds_(std::move(tr)), test_ds_(std::move(te)), perturb_(p), comm_(comm && comm->size() > 1 ? comm : nullptr),
      reducer_(std::make_unique<TreeGradReducer>(comm_)), param_dtype_(param_dtype) {
  BITGRAD_CHECK(cfg_.train.batch_size % cfg_.train.accumulate == 0, "train", "batch size ", cfg_.train.batch_size, " is not divisible by accumulate ",
                cfg_.train.accumulate);
  if (const std::string why = dist::layout_problem(cfg_.train.batch_size, cfg_.train.accumulate, world()); !why.empty())
    throw dist::CollectiveError("train: cannot train on " + std::to_string(world()) + " ranks: " + why);
  if (world() > 1 && has_tied_weights(cfg_))
    throw dist::CollectiveError("train: cannot train on " + std::to_string(world()) + " ranks: the model ties weights (tie_weights = true), "
                                "whose gradients on several ranks would not be those of one process (contract T6); untie them or use one process");
  // batchnorm normalises by the statistics of the batch it sees: a micro-batch or a rank's shard
  // would give other statistics than the whole batch, so other bits (T5, T6); refused, never silent
  if (has_batch_norm(cfg_) && cfg_.train.accumulate > 1)
    throw Error("train: accumulate = " + std::to_string(cfg_.train.accumulate) +
                " with a batchnorm layer is not supported: its statistics would be those of each micro-batch, not of the optimizer "
                "batch (contract T5); use accumulate = 1");
  if (has_batch_norm(cfg_) && world() > 1)
    throw dist::CollectiveError("train: cannot train on " + std::to_string(world()) +
                                " ranks: the model has a batchnorm layer, whose statistics would be those of each rank's shard, not of "
                                "the whole batch (contract T6; SyncBatchNorm is not implemented yet); use one process");
  model_ = build_model(cfg_, *train_ds_);
  if (param_dtype_ != DType::f32) model_->cast_parameters(param_dtype_);
  params_ = model_->named_parameters();
  check_memory(cfg_, *train_ds_, test_ds_.get(), *model_, workers);  // before the loader takes any
  data::LoaderOptions lo;
  lo.batch_size = cfg_.train.batch_size;
  lo.shuffle = cfg_.train.shuffle;
  lo.drop_last = cfg_.train.drop_last;
  lo.workers = workers;
  lo.seed = cfg_.seed;
  lo.augment.crop_padding = cfg_.data.crop_padding;
  lo.augment.hflip = cfg_.data.hflip;
  lo.world = world();
  lo.rank = rank();
  lo.leaf_rows = dist::step_layout(cfg_.train.batch_size, cfg_.train.batch_size, cfg_.train.accumulate, 1).leaf_rows;
  loader_ = std::make_unique<data::DataLoader>(train_ds_, lo);
  batches_per_epoch_ = loader_->batches_per_epoch();
  opt_ = make_optimizer(cfg_, params_);
  planned_ = cfg_.train.steps > 0 ? cfg_.train.steps : cfg_.train.epochs * batches_per_epoch_;
  sched_.kind = cfg_.schedule.type;
  sched_.lr = cfg_.optimizer.lr;
  sched_.gamma = cfg_.schedule.gamma;
  sched_.step_size = cfg_.schedule.step_size;
  sched_.total_steps = planned_;
  sched_.min_lr = cfg_.schedule.min_lr;
  sched_.warmup_steps = cfg_.schedule.warmup_steps;
  divisor_ = cfg_.train.loss == LossKind::mse ? train_ds_->target_shape().numel() : 1;
  dynamic_scale_ = cfg_.train.loss_scale == 0;
  if (dynamic_scale_) scale_log2_ = kInitialScaleLog2;
  else {
    int ex = 0;
    std::frexp(cfg_.train.loss_scale, &ex);  // a power of two (the configuration checks it)
    scale_log2_ = ex - 1;
  }
}

nn::Context Session::context(bool training, std::int64_t step, std::int64_t first_row) const {
  nn::Context c;
  c.training = training;
  c.seed = cfg_.seed;
  c.step = static_cast<std::uint64_t>(step);
  c.row_offset = first_row;
  c.precision = cfg_.train.precision;
  c.stochastic = cfg_.train.stochastic_rounding;
  c.f32_masks = param_dtype_ != DType::f32;
  return c;
}

bool Session::unscale_gradients(std::int64_t step) {
  if (!dynamic_scale_ && scale_log2_ == 0 && cfg_.train.precision != Precision::fp16) return true;
  NoGradGuard ng;
  // the first parameter, in registration order, whose gradient holds a NaN or an infinity
  for (const auto& [name, p] : params_) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor c = kern::contiguous(g);
    bool finite = true;
    BITGRAD_DISPATCH_FLOAT(c.dtype(), "loss scaling", T, [&] {
      const T* v = c.data<T>();
      const std::int64_t n = c.numel();
      T z = 0;  // x - x is 0 for a finite x, NaN for NaN and +-inf
      for (std::int64_t i = 0; i < n; ++i) z += v[i] - v[i];
      finite = z == 0;
    });
    if (finite) continue;
    if (!dynamic_scale_)
      throw Error(io::strprintf("train: %s overflow at step %lld: the gradient of parameter '%s' is not finite (loss scale 2^%d); use "
                                "[train] loss_scale = \"dynamic\" or a smaller scale, and --detect-anomaly to name the first op whose "
                                "result is not finite",
                                precision_name(cfg_.train.precision), static_cast<long long>(step + 1), name.c_str(), scale_log2_));
    --scale_log2_;
    scale_good_ = 0;
    return false;
  }
  if (scale_log2_ != 0) {
    // 2^-k is exact, and so is every product but one that falls among the subnormals
    const double inv = std::ldexp(1.0, -scale_log2_);
    for (const auto& [name, p] : params_) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      Tensor c = g.is_contiguous() ? g : g.contiguous_copy();
      BITGRAD_DISPATCH_FLOAT(c.dtype(), "loss scaling", T, [&] {
        T* v = c.mutable_data<T>();
        const T f = static_cast<T>(inv);
        const std::int64_t n = c.numel();
        for (std::int64_t i = 0; i < n; ++i) v[i] *= f;
      });
      if (!g.is_contiguous()) g.copy_from(c);
    }
  }
  if (dynamic_scale_ && ++scale_good_ == cfg_.train.loss_scale_interval) {
    ++scale_log2_;
    scale_good_ = 0;
  }
  return true;
}

void Session::set_segment(std::int64_t accumulate, std::optional<std::uint64_t> perturb) {
  cfg_.train.accumulate = accumulate;
  perturb_ = perturb;
}

Session::StepOut Session::step(std::int64_t s) {
  PerturbScope ps(perturb_, s);
  opt_->zero_grad();
  StepOut r;
  r.batch = loader_->next();
  r.lr = sched_.at(s);
  const Tensor bx = r.batch.x, by = r.batch.y;  // this rank's shard
  const std::int64_t B = r.batch.rows;         // the whole batch, over every rank
  // this rank's nodes of the batch tree, each in pieces of at most the micro-batch size (the
  // short last batch of an epoch gets fewer, its last one shorter): each whole piece stays an
  // aligned subtree of the batch rule
  const dist::StepLayout layout = dist::step_layout(B, cfg_.train.batch_size, cfg_.train.accumulate, world());
  const dist::Range mine = layout.rows_of(rank());
  BITGRAD_CHECK(mine.begin == r.batch.first && mine.size() == bx.shape()[0], "train", "the loader's shard [", r.batch.first, ", ",
                r.batch.first + bx.shape()[0], ") is not the layout's [", mine.begin, ", ", mine.end, ")");
  if (comm_) gather_batch_on_root(layout, r.batch);  // rank 0's step record names the whole batch
  const bool xent = cfg_.train.loss == LossKind::cross_entropy;
  reducer_->begin(params_, layout, rank());
  for (const dist::Range& node : layout.nodes[static_cast<std::size_t>(rank())]) {
    const std::int64_t n1 = layout.row_of(node.end);
    for (std::int64_t r0 = layout.row_of(node.begin); r0 < n1; r0 += layout.piece_rows) {
      const std::int64_t r1 = std::min(n1, r0 + layout.piece_rows);
      const nn::Context ctx = context(true, s, r0);
      const bool whole = r0 == mine.begin && r1 == mine.end;
      Tensor x = whole ? bx : slice(bx, 0, r0 - mine.begin, r1 - mine.begin);
      Tensor y = whole ? by : slice(by, 0, r0 - mine.begin, r1 - mine.begin);
      if (param_dtype_ != DType::f32) {  // the shadow: the same inputs, widened exactly
        if (x.dtype() == DType::f32) x = x.cast(param_dtype_);
        if (y.dtype() == DType::f32) y = y.cast(param_dtype_);
      }
      Tensor out = model_->forward(x, ctx);
      Tensor S = xent ? cross_entropy(out, y, Reduction::sum) : mse_loss(reshape(out, y.shape()), y, Reduction::sum);
      const float loss_sum = static_cast<float>(S.item());
      Tensor L = div(S, static_cast<double>(B * divisor_));
      if (scale_log2_ != 0) L = mul(L, std::ldexp(1.0, scale_log2_));  // exact: a power of two
      L.backward();
      reducer_->add(params_, loss_sum);
    }
  }
  r.loss = reducer_->finish(params_) / static_cast<float>(B * divisor_);
  r.stop_signal = reducer_->stop_signal();
  r.loss_scale = std::ldexp(1.0, scale_log2_);
  if (!unscale_gradients(s)) {  // every rank holds the same gradients, so every rank skips
    r.skipped = true;
    if (before_update_) before_update_();
    return r;
  }
  if (cfg_.train.clip_grad_norm > 0) r.grad_norm = optim::clip_grad_norm(model_->parameters(), cfg_.train.clip_grad_norm);
  if (before_update_) before_update_();
  opt_->step(r.lr);
  return r;
}

// The other ranks' shards of the batch to rank 0 (bytes only), so that what rank 0 reports of
// a step (the step trace's input fingerprint) is the whole batch, as in one process.
void Session::gather_batch_on_root(const dist::StepLayout& layout, data::Batch& b) const {
  dist::Comm& comm = *comm_;
  auto row_bytes = [](const Tensor& t) -> std::int64_t {
    return t.shape()[0] > 0 ? t.numel() / t.shape()[0] * static_cast<std::int64_t>(dtype_size(t.dtype())) : 0;
  };
  auto raw = [](const Tensor& t) -> char* {  // the first byte of a contiguous batch tensor
    switch (t.dtype()) {
      case DType::i64: return reinterpret_cast<char*>(const_cast<std::int64_t*>(t.data<std::int64_t>()));
      case DType::f64: return reinterpret_cast<char*>(const_cast<double*>(t.data<double>()));
      case DType::f32: return reinterpret_cast<char*>(const_cast<float*>(t.data<float>()));
      default: throw Error(std::string("train: cannot gather a batch tensor of dtype ") + dtype_name(t.dtype()));
    }
  };
  std::vector<dist::Comm::Message> sends, recvs;
  Tensor x = b.x, y = b.y;
  if (comm.root()) {
    Shape xs = b.x.shape(), ys = b.y.shape();
    xs[0] = layout.rows;
    ys[0] = layout.rows;
    x = Tensor::empty(xs, b.x.dtype());
    y = Tensor::empty(ys, b.y.dtype());
    const std::int64_t xrow = x.numel() / layout.rows * static_cast<std::int64_t>(dtype_size(x.dtype())),
                       yrow = y.numel() / layout.rows * static_cast<std::int64_t>(dtype_size(y.dtype()));
    for (int r = 0; r < comm.size(); ++r) {
      const dist::Range rows = layout.rows_of(r);
      if (rows.size() == 0) continue;
      if (r == 0) {
        std::memcpy(raw(x), raw(b.x), static_cast<std::size_t>(rows.size() * xrow));
        std::memcpy(raw(y), raw(b.y), static_cast<std::size_t>(rows.size() * yrow));
        continue;
      }
      recvs.push_back({r, raw(x) + rows.begin * xrow, rows.size() * xrow});
      recvs.push_back({r, raw(y) + rows.begin * yrow, rows.size() * yrow});
    }
  } else if (b.x.shape()[0] > 0) {
    sends.push_back({0, raw(b.x), b.x.shape()[0] * row_bytes(b.x)});
    sends.push_back({0, raw(b.y), b.y.shape()[0] * row_bytes(b.y)});
  }
  comm.exchange(sends, recvs, "the batch's inputs to rank 0");
  if (comm.root()) {
    b.x = x;
    b.y = y;
    b.first = 0;
  }
}

Tensor Session::predict(const Tensor& x) const {
  NoGradGuard ng;
  return model_->forward(x, context(false, 0, 0));
}

Eval Session::evaluate() const {
  NoGradGuard ng;
  PerturbScope ps(perturb_, -1);
  const data::Dataset& ds = *test_ds_;
  data::LoaderOptions lo;
  lo.batch_size = std::min<std::int64_t>(cfg_.eval.batch_size, ds.size());
  lo.shuffle = false;
  lo.drop_last = false;
  data::DataLoader l(test_ds_, lo);
  std::int64_t correct = 0, total = 0, positions = 0;
  double loss_sum = 0;
  const bool cls = ds.num_classes() > 0;
  for (std::int64_t i = 0; i < l.batches_per_epoch(); ++i) {
    data::Batch batch = l.next();
    Tensor out = model_->forward(batch.x, context(false, 0, 0));
    const std::int64_t n = batch.x.shape()[0];
    if (cls) {
      loss_sum += cross_entropy(out, batch.y, Reduction::sum).item();
      Tensor pred = argmax(out, out.ndim() - 1);  // [N], or [N, T] for sequences
      const std::int64_t* pp = pred.data<std::int64_t>();
      const std::int64_t* y = batch.y.data<std::int64_t>();
      for (std::int64_t j = 0; j < pred.numel(); ++j) correct += pp[j] == y[j];
      positions += pred.numel();
    } else {
      loss_sum += mse_loss(reshape(out, batch.y.shape()), batch.y, Reduction::sum).item();
    }
    total += n;
  }
  Eval e;
  e.loss = loss_sum / static_cast<double>(total * (cls ? 1 : ds.target_shape().numel()));
  if (cls) e.accuracy = static_cast<double>(correct) / static_cast<double>(positions);
  return e;
}

optim::NamedTensors Session::model_state() const {
  optim::NamedTensors all = params_;
  for (auto& b : model_->named_buffers()) all.push_back(b);
  return all;
}

void Session::restore(const Checkpoint& ck, const std::string& where) {
  const optim::NamedTensors state = model_state();
  BITGRAD_CHECK(ck.params.size() == state.size(), "resume", where, " holds ", ck.params.size(), " tensors, the model has ",
                state.size(), " (", params_.size(), " parameters and ", state.size() - params_.size(), " buffers)");
  NoGradGuard ng;
  for (std::size_t i = 0; i < state.size(); ++i) {
    BITGRAD_CHECK(ck.params[i].first == state[i].first && ck.params[i].second.shape() == state[i].second.shape() &&
                      ck.params[i].second.dtype() == state[i].second.dtype(),
                  "resume", "checkpoint parameter '", ck.params[i].first, "' ", ck.params[i].second.shape().str(), " does not match model parameter '",
                  state[i].first, "' ", state[i].second.shape().str());
    Tensor p = state[i].second;
    p.copy_from(ck.params[i].second);
  }
  opt_->load_state(ck.optimizer, ck.info.opt_steps);
  if (dynamic_scale_ && ck.info.dynamic_scale) {
    scale_log2_ = ck.info.loss_scale_log2;
    scale_good_ = ck.info.loss_scale_good;
  }
  loader_->seek(ck.info.epoch, ck.info.index);
}

Digest128 Session::fingerprint() const {
  Fingerprint fp;
  for (const auto& [name, p] : params_) fp.add(p);
  for (const auto& [name, s] : opt_->state()) fp.add(s);
  const std::int64_t st = opt_->steps();
  fp.add_bytes(&st, sizeof st);
  if (dynamic_scale_) {  // the loss scale's state decides the steps to come
    const std::int64_t ls[2] = {scale_log2_, scale_good_};
    fp.add_bytes(ls, sizeof ls);
  }
  for (const auto& [name, b] : model_->named_buffers()) fp.add(b);  // running statistics (none: as before)
  return fp.digest();
}

CheckpointInfo Session::checkpoint_info(std::int64_t step, const std::string& config_hash) const {
  CheckpointInfo info;
  info.step = step;
  info.epoch = loader_->epoch();
  info.index = loader_->index();
  info.opt_steps = opt_->steps();
  info.config_hash = config_hash;
  info.accumulate = cfg_.train.accumulate;
  info.world = world();
  info.hosts = hosts_;
  info.precision = cfg_.train.precision;
  info.dynamic_scale = dynamic_scale_;
  info.loss_scale_log2 = scale_log2_;
  info.loss_scale_good = scale_good_;
  return info;
}

}  // namespace bitgrad::train
