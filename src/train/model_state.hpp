// A session's model and optimizer state: the model of the configuration, its named parameters,
// the optimizer over them and the learning-rate schedule. What a checkpoint saves of them and
// what the fingerprint covers are here too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/optim.hpp"
#include "bitgrad/train.hpp"
#include "store/checkpoint.hpp"

namespace bitgrad::train {

struct ModelState {
  std::shared_ptr<nn::Sequential> model;
  optim::NamedTensors params;  // the model's, in registration order
  std::unique_ptr<optim::Optimizer> optimizer;
  optim::Schedule schedule;

  // The model of `c` for `ds`, its parameters cast to param_dtype (f64: the shadow).
  void build_model(const Config& c, const data::Dataset& ds, DType param_dtype);
  // The optimizer and the schedule, for a run planned to `planned_steps` steps.
  void build_optimizer(const Config& c, std::int64_t planned_steps);
  // Parameters and optimizer buffers of a checkpoint; errors name `where`.
  void restore(const store::Checkpoint& ck, const std::string& where);
  // the parameters, then the model's buffers (BatchNorm's running statistics): a checkpoint's model file
  optim::NamedTensors state() const;
  void add_buffers_to(Fingerprint& fp) const;
  // Parameters, optimizer buffers and the optimizer's step count, in that order.
  void add_to(Fingerprint& fp) const;
};

}  // namespace bitgrad::train
