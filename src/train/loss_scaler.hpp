// Loss scaling (numerics.md §25): the loss is multiplied by 2^k before backward and the
// gradients by 2^-k after it, so that fp16 gradients do not underflow. A fixed scale (a power of
// two from the configuration) or a dynamic one: it starts at 2^16, halves at a step whose
// gradients are not finite (the step is skipped) and doubles after `loss_scale_interval` steps
// without.
#pragma once

#include <cstdint>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/optim.hpp"
#include "bitgrad/train.hpp"
#include "store/checkpoint.hpp"

namespace bitgrad::train {

class LossScaler {
 public:
  explicit LossScaler(const TrainConfig& t);
  int log2() const { return log2_; }  // the scale is 2^log2()
  double scale() const;
  // After backward: false when a gradient is not finite (the step is skipped and a dynamic
  // scale halves; a fixed scale throws naming the parameter); else the gradients are unscaled
  // and a dynamic scale counts the step. `step` counts from 0.
  bool unscale(const optim::NamedTensors& params, std::int64_t step);

  // A dynamic scale's state goes into checkpoints and the fingerprint (it decides the steps to come).
  void save(store::CheckpointInfo& info) const;
  void restore(const store::CheckpointInfo& info);
  void add_to(Fingerprint& fp) const;

 private:
  Precision precision_;
  std::int64_t interval_;
  bool dynamic_ = false;
  int log2_ = 0;
  std::int64_t good_ = 0;  // dynamic: steps since the last overflow or growth
};

}  // namespace bitgrad::train
