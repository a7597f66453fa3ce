#include <cmath>

#include "bitgrad/math.hpp"
#include "bitgrad/nn.hpp"

namespace bitgrad::nn {

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> out = buffers_;
  for (const auto& [name, child] : children_)
    for (auto& [bn, t] : child->named_buffers()) out.emplace_back(name + "." + bn, t);
  return out;
}

void Module::register_module(const std::string& name, std::shared_ptr<Module> m) { children_.emplace_back(name, std::move(m)); }

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  for (const auto& [name, child] : children_)
    for (auto& [pn, t] : child->named_parameters()) out.emplace_back(name + "." + pn, t);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

namespace {
void cast_in_place(Tensor& t, DType dtype) {
  Tensor c = t.cast(dtype);
  TensorImpl& i = t.impl();  // shared with every handle of the tensor
  i.storage = c.impl().storage;
  i.strides = c.impl().strides;
  i.offset = 0;
  i.dtype = dtype;
}
}  // namespace

void Module::cast_parameters(DType dtype) {
  for (auto& [name, t] : params_)
    if (t.dtype() != dtype) cast_in_place(t, dtype);
  for (auto& [name, t] : buffers_)  // floating buffers follow (running statistics), counters stay i64
    if (t.dtype() != dtype && (t.dtype() == DType::f32 || t.dtype() == DType::f64)) cast_in_place(t, dtype);
  for (const auto& [name, child] : children_) child->cast_parameters(dtype);
}

void Module::number_sites(std::uint64_t& next) {
  site_ = next++;
  for (const auto& [name, child] : children_) child->number_sites(next);
}

void Module::init(Init weights, std::uint64_t seed, std::uint64_t& index) {
  for (const auto& [name, child] : children_) child->init(weights, seed, index);
}

Init parse_init(const std::string& name) {
  if (name == "kaiming_uniform") return Init::kaiming_uniform;
  if (name == "kaiming_normal") return Init::kaiming_normal;
  if (name == "xavier_uniform") return Init::xavier_uniform;
  if (name == "xavier_normal") return Init::xavier_normal;
  if (name == "zeros") return Init::zeros;
  if (name == "gpt2") return Init::gpt2;
  throw Error("init: unknown initialiser '" + name +
              "' (expected kaiming_uniform, kaiming_normal, xavier_uniform, xavier_normal, zeros or gpt2)");
}

const char* init_name(Init init) {
  switch (init) {
    case Init::kaiming_uniform: return "kaiming_uniform";
    case Init::kaiming_normal: return "kaiming_normal";
    case Init::xavier_uniform: return "xavier_uniform";
    case Init::xavier_normal: return "xavier_normal";
    case Init::zeros: return "zeros";
    case Init::gpt2: return "gpt2";
  }
  return "?";
}

void init_tensor(Tensor& t, Init init, std::int64_t fan_in, std::int64_t fan_out, const rng::Stream& stream) {
  NoGradGuard ng;
  const double fi = static_cast<double>(fan_in > 0 ? fan_in : 1), fo = static_cast<double>(fan_out > 0 ? fan_out : 1);
  const double gain = math::sqrt(2.0);
  double bound = 0, stddev = 0;
  bool uniform = true;
  switch (init) {
    case Init::kaiming_uniform: bound = math::sqrt(3.0) * gain / math::sqrt(fi); break;
    case Init::kaiming_normal: stddev = gain / math::sqrt(fi), uniform = false; break;
    case Init::xavier_uniform: bound = math::sqrt(6.0 / (fi + fo)); break;
    case Init::xavier_normal: stddev = math::sqrt(2.0 / (fi + fo)), uniform = false; break;
    case Init::zeros: t.fill_(0.0); return;
    case Init::gpt2: stddev = 0.02, uniform = false; break;
  }
  BITGRAD_DISPATCH_FLOAT(t.dtype(), "init", T, [&] {
    T* p = t.mutable_data<T>();
    if (uniform) stream.fill_uniform(p, t.numel(), 0, static_cast<T>(-bound), static_cast<T>(bound));
    else stream.fill_normal(p, t.numel(), 0, T(0), static_cast<T>(stddev));
  });
}

void initialize(Module& m, Init weights, std::uint64_t seed) {
  std::uint64_t index = 0;
  m.init(weights, seed, index);
}

}  // namespace bitgrad::nn
