// A training session: the datasets, loader, model, optimizer and schedule of one configuration,
// and the canonical optimizer step. `bitgrad train` (train::run), audit, sensitivity, diff's
// replay, the float64 shadow and Python's bitgrad.Session all step sessions; after n steps a
// session's fingerprint is that of `bitgrad train CONFIG --steps n`.
//
//   train::Config cfg = train::load_config("examples/fashion_mlp.toml");
//   train::Session s(cfg, train::train_dataset(cfg), train::test_dataset(cfg), /*workers=*/0);
//   for (std::int64_t i = 0; i < 100; ++i) s.step(i);
//   std::cout << s.fingerprint().hex() << " " << s.evaluate().accuracy << "\n";
//
// Its parts live in src/train (docs/architecture.md, "The train room"): the model and
// optimizer state, loss scaling, the step, evaluation, checkpoints and resume.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bitgrad/data.hpp"
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/optim.hpp"
#include "bitgrad/train.hpp"

namespace bitgrad::onnx {
struct SampleAnalysis;
}  // namespace bitgrad::onnx
namespace bitgrad::dist {
class Comm;  // MPI ranks (src/dist/comm.hpp)
}  // namespace bitgrad::dist

// Internal to src/store, for train::run and the instruments: a checkpoint as read from a run
// directory, and what one records (src/store/checkpoint.hpp).
namespace bitgrad::store {
struct Checkpoint;
struct CheckpointInfo;
}  // namespace bitgrad::store

namespace bitgrad::train {

struct Eval {
  double accuracy = -1, loss = 0;  // accuracy: -1 for regression
};

class Session {
 public:
  // perturb: evaluate every reduction of this session in a seeded random order (analysis mode).
  // comm: train data parallel as one rank of these (null: one process); this rank loads and
  // computes only its shard of every batch, and the step's result is the same on every rank.
  // param_dtype f64: the float64 shadow's session (parameters and arithmetic in f64, inputs
  // widened, dropout masks of the f32 run).
  Session(const Config& cfg, std::shared_ptr<data::Dataset> train_ds, std::shared_ptr<data::Dataset> test_ds, int workers,
          std::optional<std::uint64_t> perturb = std::nullopt, dist::Comm* comm = nullptr, DType param_dtype = DType::f32);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  struct StepOut {
    data::Batch batch;
    float loss = 0;
    double lr = 0;
    double grad_norm = -1;
    int stop_signal = 0;  // a stop request every rank agreed on during the step
    double loss_scale = 1;  // the loss scale the step's backward ran with (numerics.md §25)
    bool skipped = false;   // a non-finite gradient under dynamic loss scaling: no update
  };
  // One optimizer step (number `s`, from 0). The step's gradients stay in the parameters'
  // .grad until the next step.
  StepOut step(std::int64_t s);
  Eval evaluate() const;                  // the test set (throws without one)
  Tensor predict(const Tensor& x) const;  // evaluation-mode forward
  Digest128 fingerprint() const;          // parameters, optimizer buffers, optimizer step count

  const Config& config() const;
  const data::Dataset& train_data() const;
  const data::Dataset* test_data() const;  // null: none
  std::shared_ptr<data::Dataset> train_data_ptr() const;
  std::shared_ptr<data::Dataset> test_data_ptr() const;
  const nn::Sequential& model() const;
  std::shared_ptr<nn::Sequential> model_ptr() const;
  const optim::NamedTensors& params() const;
  // What a checkpoint's model file holds: the parameters, then the model's buffers (BatchNorm's
  // running statistics; none for most models, whose files stay as they were)
  optim::NamedTensors model_state() const;
  const optim::Optimizer& optimizer() const;
  const optim::Schedule& schedule() const;
  const data::DataLoader& loader() const;
  std::int64_t batches_per_epoch() const;
  std::int64_t planned_steps() const;
  int world() const;  // data-parallel ranks (1: one process)
  int rank() const;

  // For train::run and the instruments (the types are src/train's):
  // the state of a checkpoint (`where` names it in errors), and the state to write to one
  void restore(const store::Checkpoint& ck, const std::string& where);
  store::CheckpointInfo checkpoint_info(std::int64_t step, const std::string& config_hash) const;
  // Settings a resumed segment of a run may have changed (diff replays each step with them).
  void set_segment(std::int64_t accumulate, std::optional<std::uint64_t> perturb);
  // Called in step() just before the optimizer changes the parameters (the step tracer waits
  // there for the previous step's record).
  void set_before_update(std::function<void()> f);
  dist::Comm* comm() const;
  // An imported graph's samples as followed before the first step (numerics.md §42); null for a
  // layer list. per_block(): every 32-sample block runs as its own forward and backward.
  const onnx::SampleAnalysis* graph_samples() const;
  bool per_block() const;
  // Each rank's host (set once the ranks have agreed to start).
  const std::vector<std::string>& hosts() const;
  void set_hosts(std::vector<std::string> h);

 private:
  struct Parts;  // src/train/session_parts.hpp: what a session holds, by responsibility
  nn::Context context(bool training, std::int64_t step, std::int64_t first_row) const;
  std::unique_ptr<Parts> p_;
};

}  // namespace bitgrad::train
