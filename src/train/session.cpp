// A session built from a configuration: its parts (session_parts.hpp) and their accessors. The
// step is in step.cpp, evaluation in evaluate.cpp, checkpoints and the fingerprint in
// session_checkpoint.cpp.
#include "bitgrad/session.hpp"

#include "bitgrad/onnx.hpp"
#include "train/memory.hpp"
#include "train/session_parts.hpp"
#include "train/step_loss.hpp"

namespace bitgrad::train {

bool whole_subtree(std::int64_t rows) {
  if (rows % kern::kBatchBlock) return false;
  const std::int64_t blocks = rows / kern::kBatchBlock;
  return (blocks & (blocks - 1)) == 0;
}

bool has_batch_norm(const Config& c) {
  if (!c.model.onnx.empty()) return onnx::uses_op(c.model.onnx, "BatchNormalization");  // an imported graph's
  for (const LayerSpec& l : c.model.layers)
    if (l.type == LayerKind::batchnorm || l.type == LayerKind::resblock) return true;  // a resblock holds batch norms
  return false;
}

bool has_batch_norm(const nn::Module& model) { return model.uses_batch_statistics(); }

namespace {

const onnx::GraphModule* imported_graph(const nn::Module& model) {
  if (const auto* g = dynamic_cast<const onnx::GraphModule*>(&model)) return g;
  for (const auto& [name, child] : model.children())
    if (const onnx::GraphModule* g = child ? imported_graph(*child) : nullptr) return g;
  return nullptr;
}

// Where an imported graph's samples go decides what the run can promise (numerics.md §42): a
// node that mixes samples (or batch statistics the graph cannot take per block) leaves the whole
// batch in one forward and backward, so micro-batches and ranks are refused naming it.
void check_graph_samples(const onnx::SampleAnalysis& a, const Config& cfg, int world) {
  using Mode = onnx::SampleAnalysis::Mode;
  const std::string model = cfg.file + ": [model] onnx = " + cfg.model.onnx;
  const bool whole = a.mode == Mode::mixes_samples || (a.mode == Mode::per_block && a.batch_statistics);
  if (!whole || (cfg.train.accumulate == 1 && world == 1)) return;
  const std::string why = a.mode == Mode::mixes_samples
                              ? a.node + " mixes the samples: " + a.why
                              : a.node + " keeps the samples apart only per 32-sample block (" + a.why +
                                    "), and the graph's BatchNormalization needs the whole batch's statistics in one forward";
  const std::string what = world > 1 ? std::to_string(world) + " ranks" : "accumulate = " + std::to_string(cfg.train.accumulate);
  const std::string msg = "train: " + what + " cannot give the whole batch's bits for " + model + ": " + why +
                          " (contracts T5, T6; numerics.md §42); train with accumulate = 1 in one process";
  if (world > 1) throw dist::CollectiveError(msg);
  throw Error(msg);
}

}  // namespace

Session::Session(const Config& c, std::shared_ptr<data::Dataset> tr, std::shared_ptr<data::Dataset> te, int workers,
                 std::optional<std::uint64_t> perturb, dist::Comm* comm, DType param_dtype)
    : p_(std::make_unique<Parts>(c, std::move(tr), std::move(te), perturb, comm && comm->size() > 1 ? comm : nullptr, param_dtype)) {
  Parts& p = *p_;
  const Config& cfg = p.cfg;
  BITGRAD_CHECK(cfg.train.batch_size % cfg.train.accumulate == 0, "train", "batch size ", cfg.train.batch_size, " is not divisible by accumulate ",
                cfg.train.accumulate);
  if (const std::string why = dist::layout_problem(cfg.train.batch_size, cfg.train.accumulate, world()); !why.empty())
    throw dist::CollectiveError("train: cannot train on " + std::to_string(world()) + " ranks: " + why);
  p.state.build_model(cfg, *p.train_ds, p.param_dtype);
  // batchnorm normalises every sample by the statistics of the whole optimizer batch (numerics
  // §31): a micro-batch's forward would need them before the later micro-batches have run, and
  // its backward the whole batch's gradient sums likewise; refused, never silent (T5). Ranks
  // exchange the statistics, each holding one node of the batch's tree (§20), so T6 holds.
  const bool bn = has_batch_norm(*p.state.model);
  if (bn && cfg.train.accumulate > 1)
    throw Error("train: accumulate = " + std::to_string(cfg.train.accumulate) +
                " with a batchnorm layer is not supported: batch norm normalises every sample by the statistics of the whole "
                "optimizer batch of " + std::to_string(cfg.train.batch_size) + ", which a micro-batch's forward would need before the "
                "later micro-batches have run (and its backward the whole batch's gradient sums likewise), so each micro-batch would "
                "get its own statistics and other bits (contract T5, numerics.md §31); use accumulate = 1, on several ranks "
                "(mpirun) if one process lacks the memory: the ranks exchange the statistics and give the bits of one process");
  p.sharding = bn && world() > 1 ? dist::Sharding::whole_nodes : dist::Sharding::even;
  if (const onnx::GraphModule* g = imported_graph(*p.state.model)) {  // before the first step
    p.samples = g->samples_of_batches(p.train_ds->sample_shape());  // analysed by build_onnx_model: cached
    check_graph_samples(*p.samples, cfg, world());
    p.per_block = p.samples->mode == onnx::SampleAnalysis::Mode::per_block && !p.samples->batch_statistics;
  }
  check_run_memory(cfg, *p.train_ds, p.test_ds.get(), *p.state.model, workers);  // before the loader takes any
  data::LoaderOptions lo;
  lo.batch_size = cfg.train.batch_size;
  lo.shuffle = cfg.train.shuffle;
  lo.drop_last = cfg.train.drop_last;
  lo.workers = workers;
  lo.seed = cfg.seed;
  lo.augment.crop_padding = cfg.data.crop_padding;
  lo.augment.hflip = cfg.data.hflip;
  lo.world = world();
  lo.rank = rank();
  lo.leaf_rows = dist::step_layout(cfg.train.batch_size, cfg.train.batch_size, cfg.train.accumulate, 1).leaf_rows;
  if (p.sharding != dist::Sharding::even) {
    const std::int64_t batch = cfg.train.batch_size, acc = cfg.train.accumulate;
    const int w = world(), r = rank();
    const dist::Sharding sh = p.sharding;
    lo.shard_of = [batch, acc, w, r, sh](std::int64_t rows) {
      const dist::Range mine = dist::step_layout(rows, batch, acc, w, sh).rows_of(r);
      return std::pair<std::int64_t, std::int64_t>{mine.begin, mine.end};
    };
  }
  p.loader = std::make_unique<data::DataLoader>(p.train_ds, lo);
  p.batches_per_epoch = p.loader->batches_per_epoch();
  p.planned = cfg.train.steps > 0 ? cfg.train.steps : cfg.train.epochs * p.batches_per_epoch;
  p.state.build_optimizer(cfg, p.planned);
  // the values per sample a loss averages over: every target value, but §9's cross_entropy of
  // every run before the loss options averages a window's tokens itself (numerics.md §21)
  p.divisor = cfg.train.loss != LossKind::cross_entropy || cross_entropy_options(cfg.train) ? p.train_ds->target_shape().numel() : 1;
}

Session::~Session() = default;

nn::Context Session::context(bool training, std::int64_t step, std::int64_t first_row) const {
  nn::Context c;
  c.training = training;
  c.seed = p_->cfg.seed;
  c.step = static_cast<std::uint64_t>(step);
  c.row_offset = first_row;
  c.precision = p_->cfg.train.precision;
  c.stochastic = p_->cfg.train.stochastic_rounding;
  c.f32_masks = p_->param_dtype != DType::f32;
  return c;
}

const Config& Session::config() const { return p_->cfg; }
const data::Dataset& Session::train_data() const { return *p_->train_ds; }
const data::Dataset* Session::test_data() const { return p_->test_ds.get(); }
std::shared_ptr<data::Dataset> Session::train_data_ptr() const { return p_->train_ds; }
std::shared_ptr<data::Dataset> Session::test_data_ptr() const { return p_->test_ds; }
const nn::Sequential& Session::model() const { return *p_->state.model; }
std::shared_ptr<nn::Sequential> Session::model_ptr() const { return p_->state.model; }
const optim::NamedTensors& Session::params() const { return p_->state.params; }
optim::NamedTensors Session::model_state() const { return p_->state.state(); }
const optim::Optimizer& Session::optimizer() const { return *p_->state.optimizer; }
const optim::Schedule& Session::schedule() const { return p_->state.schedule; }
const data::DataLoader& Session::loader() const { return *p_->loader; }
std::int64_t Session::batches_per_epoch() const { return p_->batches_per_epoch; }
std::int64_t Session::planned_steps() const { return p_->planned; }
int Session::world() const { return p_->comm ? p_->comm->size() : 1; }
int Session::rank() const { return p_->comm ? p_->comm->rank() : 0; }
dist::Comm* Session::comm() const { return p_->comm; }
const onnx::SampleAnalysis* Session::graph_samples() const { return p_->samples ? &*p_->samples : nullptr; }
bool Session::per_block() const { return p_->per_block; }
const std::vector<std::string>& Session::hosts() const { return p_->hosts; }
void Session::set_hosts(std::vector<std::string> h) { p_->hosts = std::move(h); }
void Session::set_before_update(std::function<void()> f) { p_->before_update = std::move(f); }

void Session::set_segment(std::int64_t accumulate, std::optional<std::uint64_t> perturb) {
  p_->cfg.train.accumulate = accumulate;
  if (p_->samples) check_graph_samples(*p_->samples, p_->cfg, world());
  p_->perturb = perturb;
}

}  // namespace bitgrad::train
