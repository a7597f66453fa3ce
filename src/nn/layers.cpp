// The layers: forward with the ops, output shapes checked before anything runs.
#include <sstream>

#include "bitgrad/enum_names.hpp"
#include "bitgrad/math.hpp"
#include "bitgrad/nn.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::init_stream;
using detail::str;
namespace {

// bias uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))
void init_bias(Tensor& b, std::int64_t fan_in, const rng::Stream& s) {
  if (!b.defined()) return;
  const double bound = 1.0 / math::sqrt(static_cast<double>(fan_in > 0 ? fan_in : 1));
  NoGradGuard ng;
  BITGRAD_DISPATCH_FLOAT(b.dtype(), "init", T, [&] {
    s.fill_uniform(b.mutable_data<T>(), b.numel(), 0, static_cast<T>(-bound), static_cast<T>(bound));
  });
}

}  // namespace

// ---- Linear --------------------------------------------------------------------------------
Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias) : in_features(in), out_features(out) {
  BITGRAD_CHECK(in > 0 && out > 0, "Linear", "features must be positive, got in=", in, ", out=", out);
  weight = register_parameter("weight", Tensor::zeros(Shape{out, in}));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros(Shape{out}));
}
void Linear::init(Init w, std::uint64_t seed, std::uint64_t& index) {
  init_tensor(weight, w, in_features, out_features, init_stream(seed, index));
  if (!bias.defined()) return;
  if (w == Init::gpt2) {
    NoGradGuard ng;
    bias.fill_(0.0);
    ++index;
    return;
  }
  init_bias(bias, in_features, init_stream(seed, index));
}
Tensor Linear::forward(const Tensor& x, const Context& ctx) { return detail::lowp_linear(x, weight, bias, ctx, site()); }
Shape Linear::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() >= 2 && in[in.ndim() - 1] == in_features, describe().c_str(), "expects inputs [N, ", in_features,
                "], got ", in.str());
  Shape o = in;
  o[o.ndim() - 1] = out_features;
  return o;
}
std::string Linear::describe() const { return str("Linear(", in_features, ", ", out_features, bias.defined() ? "" : ", no bias", ")"); }

// ---- activations, dropout, flatten -----------------------------------------------------------
Tensor ActivationLayer::forward(const Tensor& x, const Context&) {
  switch (a_) {
    case Activation::relu: return relu(x);
    case Activation::gelu: return gelu(x);
    case Activation::tanh: return tanh(x);
    case Activation::sigmoid: return sigmoid(x);
  }
  return x;
}
std::string ActivationLayer::describe() const {
  static constexpr EnumName<Activation> kDescriptions[] = {
      {Activation::relu, "ReLU()"}, {Activation::gelu, "GELU()"}, {Activation::tanh, "Tanh()"}, {Activation::sigmoid, "Sigmoid()"}};
  return enum_name(kDescriptions, a_);
}

Dropout::Dropout(double p, std::uint64_t layer_id) : p_(p), id_(layer_id) {
  BITGRAD_CHECK(p >= 0.0 && p < 1.0, "Dropout", "probability must be in [0, 1), got ", p);
}
Tensor Dropout::forward(const Tensor& x, const Context& ctx) {
  if (!ctx.training || p_ == 0.0) return x;
  const std::int64_t rows = x.ndim() ? x.shape()[0] : 1;
  const std::int64_t row_size = rows ? x.numel() / rows : 0;
  rng::Stream s = rng::Stream(ctx.seed, "dropout").sub(id_).sub(ctx.step);
  if (ctx.call) s = s.sub(ctx.call);  // a later call in the same forward: its own mask (the first keeps its bits)
  return dropout(x, p_, s, static_cast<std::uint64_t>(ctx.row_offset * row_size), ctx.f32_masks);
}
std::string Dropout::describe() const { return str("Dropout(p=", p_, ")"); }

Tensor Flatten::forward(const Tensor& x, const Context&) { return flatten(x, 1, -1); }
Shape Flatten::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() >= 2, "Flatten()", "expects inputs [N, ...], got ", in.str());
  return Shape{in[0], in.numel() / (in[0] ? in[0] : 1)};
}


// ---- LayerNorm, Embedding ---------------------------------------------------------------------
LayerNorm::LayerNorm(std::int64_t features, double eps, bool bias) : features_(features), eps_(eps) {
  BITGRAD_CHECK(features > 0, "LayerNorm", "features must be positive, got ", features);
  gamma = register_parameter("gamma", Tensor::ones(Shape{features}));
  if (bias) beta = register_parameter("beta", Tensor::zeros(Shape{features}));
}
std::string LayerNorm::state_key(const std::string& name) const { return name == "gamma" ? "weight" : name == "beta" ? "bias" : name; }
void LayerNorm::init(Init, std::uint64_t, std::uint64_t& index) {
  NoGradGuard ng;
  gamma.fill_(1.0);
  if (beta.defined()) beta.fill_(0.0);
  index += beta.defined() ? 2 : 1;
}
Tensor LayerNorm::forward(const Tensor& x, const Context&) { return layer_norm(x, gamma, beta, eps_); }
Shape LayerNorm::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() >= 1 && in[in.ndim() - 1] == features_, describe().c_str(), "expects inputs [..., ", features_, "], got ",
                in.str());
  return in;
}
std::string LayerNorm::describe() const { return str("LayerNorm(", features_, beta.defined() ? "" : ", no bias", ")"); }

Embedding::Embedding(std::int64_t num, std::int64_t dim) {
  BITGRAD_CHECK(num > 0 && dim > 0, "Embedding", "sizes must be positive, got ", num, " x ", dim);
  weight = register_parameter("weight", Tensor::zeros(Shape{num, dim}));
}
void Embedding::init(Init, std::uint64_t seed, std::uint64_t& index) {
  NoGradGuard ng;
  init_stream(seed, index).fill_normal(weight.mutable_data<float>(), weight.numel(), 0, 0.0f, 1.0f);
}
Tensor Embedding::forward(const Tensor& x, const Context&) { return embedding(weight, x); }
Shape Embedding::output_shape(const Shape& in) const {
  Shape o = in;
  o.push_back(weight.shape()[1]);
  return o;
}
std::string Embedding::describe() const { return str("Embedding(", weight.shape()[0], ", ", weight.shape()[1], ")"); }

// ---- Sequential ---------------------------------------------------------------------------------
void Sequential::add(std::shared_ptr<Module> m) { register_module(std::to_string(size()), std::move(m)); }
namespace {
using Layers = std::vector<std::pair<std::string, std::shared_ptr<Module>>>;
Tensor run_layers(const Layers& layers, std::size_t a, std::size_t b, const Tensor& x, const Context& ctx) {
  Tensor h = x;
  const bool labels = autograd::op_hook_active();  // names for op traces: "2:Linear(784, 512)"
  for (std::size_t i = a; i < b; ++i) {
    const auto& [name, m] = layers[i];
    const Context cc = m->child_context(ctx, name);
    if (labels) {
      LabelScope scope(name + ":" + m->describe());
      h = m->forward(h, cc);
    } else {
      h = m->forward(h, cc);
    }
  }
  return h;
}
}  // namespace

namespace {
constexpr EnumName<Recompute> kRecomputes[] = {{Recompute::none, "none"}, {Recompute::blocks, "blocks"}, {Recompute::all, "all"}};
}  // namespace

Recompute parse_recompute(const std::string& name) {
  if (auto r = enum_from_name(kRecomputes, name)) return *r;
  bitgrad::detail::fail("recompute", "unknown setting '", name, "'; expected ", enum_names_list(kRecomputes));
}
const char* recompute_name(Recompute r) { return enum_name(kRecomputes, r); }

std::vector<std::size_t> Sequential::segment_starts() const {
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 1; i < children().size(); ++i) {
    const bool starts_one = recompute_ == Recompute::all || (recompute_ == Recompute::blocks && !children()[i].second->parameters().empty());
    if (starts_one) starts.push_back(i);
  }
  return starts;
}

Tensor Sequential::forward(const Tensor& x, const Context& ctx) {
  const Layers& layers = children();
  if (recompute_ == Recompute::none || !ctx.training || !grad_enabled()) return run_layers(layers, 0, layers.size(), x, ctx);
  const std::vector<std::size_t> starts = segment_starts();
  Tensor h = x;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::size_t a = starts[k], b = k + 1 < starts.size() ? starts[k + 1] : layers.size();
    if (b == layers.size()) return run_layers(layers, a, b, h, ctx);  // the last: its backward comes first
    Layers seg(layers.begin() + static_cast<std::ptrdiff_t>(a), layers.begin() + static_cast<std::ptrdiff_t>(b));
    std::vector<Tensor> params;
    for (const auto& [name, m] : seg)
      for (const Tensor& p : m->parameters()) params.push_back(p);
    // the segment's layers and the context by value: the backward may outlive this call's frame
    h = checkpoint([seg, ctx](const Tensor& in) { return run_layers(seg, 0, seg.size(), in, ctx); }, h, params);
  }
  return h;
}
Shape Sequential::output_shape(const Shape& in) const {
  Shape s = in;
  for (const auto& [name, m] : children()) s = m->output_shape(s);
  return s;
}
std::string Sequential::describe() const {
  std::string out = "Sequential(";
  for (std::size_t i = 0; i < children().size(); ++i) out += (i ? ", " : "") + children()[i].second->describe();
  return out + ")";
}

// ---- tie_parameter: the handles again from the registered list ----
void Linear::bind_parameters() {
  weight = own_parameter("weight");
  bias = own_parameter("bias");
}
void LayerNorm::bind_parameters() {
  gamma = own_parameter("gamma");
  beta = own_parameter("beta");
}
void Embedding::bind_parameters() { weight = own_parameter("weight"); }

}  // namespace bitgrad::nn
