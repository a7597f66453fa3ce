// Optimizers, learning-rate schedules and gradient clipping. Every update is elementwise with
// the operation order written in docs/numerics.md (section "Optimizers"); scalar coefficients are
// computed in f64 with bitgrad's math and rounded once to the parameters' dtype.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/tensor.hpp"

namespace bitgrad::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  explicit Optimizer(NamedTensors params);
  virtual ~Optimizer() = default;
  // One update with learning rate lr from the parameters' current gradients (parameters
  // without a gradient are left alone). Counts steps.
  void step(double lr);
  void zero_grad();
  virtual std::string describe() const = 0;
  const NamedTensors& params() const { return params_; }
  std::int64_t steps() const { return steps_; }
  // State for checkpoints: named tensors (buffers) and the step count.
  virtual NamedTensors state() const = 0;
  // Restores buffers by name; throws naming the missing or mismatched entry.
  void load_state(const NamedTensors& state, std::int64_t steps);

 protected:
  virtual void update(std::size_t i, Tensor& p, const Tensor& g, double lr) = 0;
  Tensor& buffer(NamedTensors& bufs, std::size_t i) { return bufs[i].second; }
  NamedTensors make_buffers(const std::string& prefix) const;
  NamedTensors params_;
  std::int64_t steps_ = 0;

 private:
  virtual NamedTensors& mutable_state() = 0;
};

struct SgdOptions {
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class Sgd : public Optimizer {
 public:
  Sgd(NamedTensors params, SgdOptions o);
  std::string describe() const override;
  NamedTensors state() const override { return velocity_; }

 private:
  void update(std::size_t i, Tensor& p, const Tensor& g, double lr) override;
  NamedTensors& mutable_state() override { return velocity_; }
  SgdOptions o_;
  NamedTensors velocity_;
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;  // AdamW: weight decay applied to the parameter, not the gradient
  bool decay_matrices_only = false;  // no weight decay for parameters of fewer than 2 dimensions (biases, norms)
};

class Adam : public Optimizer {
 public:
  Adam(NamedTensors params, AdamOptions o);
  std::string describe() const override;
  NamedTensors state() const override;

 private:
  void update(std::size_t i, Tensor& p, const Tensor& g, double lr) override;
  NamedTensors& mutable_state() override { return all_; }
  AdamOptions o_;
  NamedTensors all_;  // exp_avg.* then exp_avg_sq.*
};

// Learning rate of (0-based) step `step`.
struct Schedule {
  enum class Kind { constant, step, cosine };
  Kind kind = Kind::constant;
  double lr = 0.01;
  double gamma = 0.1;             // step: factor every step_size steps
  std::int64_t step_size = 1000;  // step
  std::int64_t total_steps = 0;   // cosine: steps to reach min_lr
  double min_lr = 0.0;            // cosine
  std::int64_t warmup_steps = 0;  // linear warm-up in front of any schedule
  double at(std::int64_t step) const;
  std::string describe() const;
};

// Scales every gradient by max_norm / (norm + 1e-6) when the global L2 norm exceeds max_norm.
// Each gradient's sum of squares by the row rule (fma lanes, flattened), the sums in f64
// combined by the pairwise tree in parameter order. Returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// The global gradient norm alone (same order).
double grad_norm(const std::vector<Tensor>& params);

}  // namespace bitgrad::optim
