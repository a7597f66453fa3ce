// A training session: datasets, loader, model, optimizer and schedule of one configuration,
// and the canonical optimizer step. `bitgrad train`, audit, sensitivity and diff's replay all
// step sessions.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "bitgrad/optim.hpp"
#include "bitgrad/train.hpp"
#include "train/checkpoint.hpp"
#include "train/grad_reducer.hpp"

namespace bitgrad::train {

struct Eval {
  double accuracy = -1, loss = 0;
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
  Eval evaluate() const;
  Tensor predict(const Tensor& x) const;  // evaluation-mode forward
  void restore(const Checkpoint& ck, const std::string& where);
  Digest128 fingerprint() const;  // parameters, optimizer buffers, optimizer step count
  CheckpointInfo checkpoint_info(std::int64_t step, const std::string& config_hash) const;

  // Settings a resumed segment of a run may have changed (diff replays each step with them).
  void set_segment(std::int64_t accumulate, std::optional<std::uint64_t> perturb);
  // Called in step() just before the optimizer changes the parameters (the step tracer waits
  // there for the previous step's record).
  void set_before_update(std::function<void()> f) { before_update_ = std::move(f); }
  void set_reducer(std::unique_ptr<GradReducer> r) { reducer_ = std::move(r); }

  const Config& config() const { return cfg_; }
  const data::Dataset& train_data() const { return *train_ds_; }
  const data::Dataset* test_data() const { return test_ds_.get(); }
  std::shared_ptr<data::Dataset> train_data_ptr() const { return train_ds_; }
  std::shared_ptr<data::Dataset> test_data_ptr() const { return test_ds_; }
  const nn::Sequential& model() const { return *model_; }
  std::shared_ptr<nn::Sequential> model_ptr() const { return model_; }
  const optim::NamedTensors& params() const { return params_; }
  // What a checkpoint's model file holds: the parameters, then the model's buffers (BatchNorm's
  // running statistics; none for most models, whose files stay as they were)
  optim::NamedTensors model_state() const;
  const optim::Optimizer& optimizer() const { return *opt_; }
  const optim::Schedule& schedule() const { return sched_; }
  const data::DataLoader& loader() const { return *loader_; }
  int world() const { return comm_ ? comm_->size() : 1; }
  int rank() const { return comm_ ? comm_->rank() : 0; }
  dist::Comm* comm() const { return comm_; }
  // Each rank's host (set once the ranks have agreed to start).
  const std::vector<std::string>& hosts() const { return hosts_; }
  void set_hosts(std::vector<std::string> h) { hosts_ = std::move(h); }
  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::int64_t planned_steps() const { return planned_; }

 private:
  void gather_batch_on_root(const dist::StepLayout& layout, data::Batch& b) const;
  nn::Context context(bool training, std::int64_t step, std::int64_t first_row) const;
  // Loss scaling (numerics.md §25): false when a gradient is not finite (the step is skipped
  // and a dynamic scale halves; a fixed scale throws naming the tensor); else the gradients
  // are unscaled and a dynamic scale counts the step.
  bool unscale_gradients(std::int64_t step);
  Config cfg_;
  std::shared_ptr<data::Dataset> train_ds_, test_ds_;
  std::unique_ptr<data::DataLoader> loader_;
  std::shared_ptr<nn::Sequential> model_;
  optim::NamedTensors params_;
  std::unique_ptr<optim::Optimizer> opt_;
  optim::Schedule sched_;
  std::int64_t batches_per_epoch_ = 0, planned_ = 0;
  std::int64_t divisor_ = 1;  // values per sample the loss is averaged over (mse: the target size)
  std::optional<std::uint64_t> perturb_;
  std::function<void()> before_update_;
  dist::Comm* comm_ = nullptr;
  std::vector<std::string> hosts_;
  std::unique_ptr<GradReducer> reducer_;
  DType param_dtype_ = DType::f32;
  bool dynamic_scale_ = false;
  int scale_log2_ = 0;             // the loss scale is 2^scale_log2_
  std::int64_t scale_good_ = 0;    // dynamic: steps since the last overflow or growth
};

}  // namespace bitgrad::train
