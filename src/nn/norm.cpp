// RMSNorm, GroupNorm and InstanceNorm modules over the ops of src/ops/norm_composed.cpp.
#include "bitgrad/nn.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::str;

namespace {
std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return d.size() == 1 ? s : "[" + s + "]";
}
}  // namespace

// ---- RMSNorm -----------------------------------------------------------------------------------
RMSNorm::RMSNorm(std::vector<std::int64_t> shape, double eps, bool affine) : shape_(std::move(shape)), eps_(eps) {
  BITGRAD_CHECK(!shape_.empty(), "RMSNorm", "needs the normalised shape (the last dimensions of the input)");
  for (std::int64_t d : shape_) BITGRAD_CHECK(d > 0, "RMSNorm", "the normalised shape must be positive, got ", dims_text(shape_));
  BITGRAD_CHECK(eps >= 0, "RMSNorm", "eps must be >= 0, got ", eps);
  if (affine) gamma = register_parameter("gamma", Tensor::ones(Shape(shape_)));
}
void RMSNorm::init(Init, std::uint64_t, std::uint64_t& index) {
  if (!gamma.defined()) return;
  NoGradGuard ng;
  gamma.fill_(1.0);
  ++index;
}
std::string RMSNorm::state_key(const std::string& name) const { return name == "gamma" ? "weight" : name; }
Tensor RMSNorm::forward(const Tensor& x, const Context&) { return rms_norm(x, gamma, eps_, -static_cast<int>(shape_.size())); }
Shape RMSNorm::output_shape(const Shape& in) const {
  const auto k = shape_.size();
  bool ok = in.ndim() >= static_cast<int>(k);
  for (std::size_t i = 0; ok && i < k; ++i) ok = in[in.ndim() - static_cast<int>(k) + static_cast<int>(i)] == shape_[i];
  BITGRAD_CHECK(ok, describe().c_str(), "expects inputs [..., ", dims_text(shape_), "], got ", in.str());
  return in;
}
std::string RMSNorm::describe() const { return str("RMSNorm(", dims_text(shape_), gamma.defined() ? "" : ", no affine", ")"); }

// ---- GroupNorm, InstanceNorm -------------------------------------------------------------------
GroupNorm::GroupNorm(std::int64_t groups, std::int64_t channels, double eps, bool affine, bool instance)
    : groups_(instance ? channels : groups), channels_(channels), eps_(eps), instance_(instance) {
  const char* name = instance ? "InstanceNorm" : "GroupNorm";
  BITGRAD_CHECK(channels > 0 && groups_ > 0 && channels % groups_ == 0, name, "needs groups dividing the channels, got ", groups_,
                " groups of ", channels, " channels");
  BITGRAD_CHECK(eps >= 0, name, "eps must be >= 0, got ", eps);
  if (affine) {
    gamma = register_parameter("gamma", Tensor::ones(Shape{channels}));
    beta = register_parameter("beta", Tensor::zeros(Shape{channels}));
  }
}
void GroupNorm::init(Init, std::uint64_t, std::uint64_t& index) {
  if (!gamma.defined()) return;
  NoGradGuard ng;
  gamma.fill_(1.0);
  beta.fill_(0.0);
  index += 2;
}
std::string GroupNorm::state_key(const std::string& name) const { return name == "gamma" ? "weight" : name == "beta" ? "bias" : name; }
Tensor GroupNorm::forward(const Tensor& x, const Context&) { return group_norm(x, groups_, gamma, beta, eps_); }
Shape GroupNorm::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() >= (instance_ ? 3 : 2) && in[1] == channels_, describe().c_str(), "expects inputs [N, ", channels_,
                instance_ ? ", D1, ...]" : ", ...]", ", got ", in.str());
  return in;
}
std::string GroupNorm::describe() const {
  const char* affine = gamma.defined() ? "" : ", no affine";
  return instance_ ? str("InstanceNorm(", channels_, affine, ")") : str("GroupNorm(", groups_, ", ", channels_, affine, ")");
}

void RMSNorm::bind_parameters() { gamma = own_parameter("gamma"); }
void GroupNorm::bind_parameters() {
  gamma = own_parameter("gamma");
  beta = own_parameter("beta");
}

}  // namespace bitgrad::nn
