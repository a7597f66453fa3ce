#include "train/model_state.hpp"

#include "bitgrad/autograd.hpp"

namespace bitgrad::train {
namespace {

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

void ModelState::build_model(const Config& c, const data::Dataset& ds, DType param_dtype) {
  model = train::build_model(c, ds);
  if (param_dtype != DType::f32) model->cast_parameters(param_dtype);
  params = model->named_parameters();
}

void ModelState::build_optimizer(const Config& c, std::int64_t planned_steps) {
  optimizer = make_optimizer(c, params);
  schedule.kind = c.schedule.type;
  schedule.lr = c.optimizer.lr;
  schedule.gamma = c.schedule.gamma;
  schedule.step_size = c.schedule.step_size;
  schedule.total_steps = planned_steps;
  schedule.min_lr = c.schedule.min_lr;
  schedule.warmup_steps = c.schedule.warmup_steps;
}

void ModelState::restore(const store::Checkpoint& ck, const std::string& where) {
  const optim::NamedTensors all = state();
  BITGRAD_CHECK(ck.params.size() == all.size(), "resume", where, " holds ", ck.params.size(), " tensors, the model has ", all.size(), " (",
                params.size(), " parameters and ", all.size() - params.size(), " buffers)");
  NoGradGuard ng;
  for (std::size_t i = 0; i < all.size(); ++i) {
    BITGRAD_CHECK(ck.params[i].first == all[i].first && ck.params[i].second.shape() == all[i].second.shape() &&
                      ck.params[i].second.dtype() == all[i].second.dtype(),
                  "resume", "checkpoint parameter '", ck.params[i].first, "' ", ck.params[i].second.shape().str(), " does not match model parameter '",
                  all[i].first, "' ", all[i].second.shape().str());
    Tensor p = all[i].second;
    p.copy_from(ck.params[i].second);
  }
  optimizer->load_state(ck.optimizer, ck.info.opt_steps);
}

optim::NamedTensors ModelState::state() const {
  optim::NamedTensors all = params;
  for (auto& b : model->named_buffers()) all.push_back(b);
  return all;
}

void ModelState::add_buffers_to(Fingerprint& fp) const {
  for (const auto& [name, b] : model->named_buffers()) fp.add(b);  // running statistics (none: as before)
}

void ModelState::add_to(Fingerprint& fp) const {
  for (const auto& [name, p] : params) fp.add(p);
  for (const auto& [name, s] : optimizer->state()) fp.add(s);
  const std::int64_t st = optimizer->steps();
  fp.add_bytes(&st, sizeof st);
}

}  // namespace bitgrad::train
