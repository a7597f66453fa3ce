// The modules of the convolution variants, adaptive pooling and upsampling (bitgrad/nn_spatial.hpp):
// forward with the ops of bitgrad/ops_spatial.hpp, output shapes checked before anything runs.
#include <cmath>

#include "bitgrad/math.hpp"
#include "bitgrad/nn_spatial.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::init_stream;
using detail::str;
namespace {

std::string ints(const std::vector<int>& v) {
  std::string r = "(";
  for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + (v.size() == 1 ? ",)" : ")");
}
int at(const std::vector<int>& v, std::size_t i, int dflt) { return v.empty() ? dflt : v[i]; }
std::vector<int> per_axis(const std::vector<int>& v, std::size_t sp, int dflt) { return v.empty() ? std::vector<int>(sp, dflt) : v; }
bool all_are(const std::vector<int>& v, int x) {
  for (int e : v)
    if (e != x) return false;
  return true;
}
// an option with one entry per axis (or none: the default), each at least `least`
void check_axes(const char* name, const std::vector<int>& v, const char* what, std::size_t n, int least) {
  BITGRAD_CHECK(v.empty() || v.size() == n, name, what, " must have ", n, " entries (or none), got ", ints(v));
  for (int e : v) BITGRAD_CHECK(e >= least, name, what, " must be >= ", least, ", got ", ints(v));
}
// PyTorch's way of writing the padding: padding=(h, w) when each axis has the same at both ends,
// else ONNX's pads=(begin..., end...); nothing when there is none
std::string padding_text(const std::vector<int>& pads, std::size_t sp) {
  if (all_are(pads, 0)) return "";
  bool symmetric = pads.size() == 2 * sp;
  for (std::size_t a = 0; symmetric && a < sp; ++a) symmetric = pads[a] == pads[a + sp];
  return symmetric ? ", padding=" + ints(std::vector<int>(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(sp))) : ", pads=" + ints(pads);
}

}  // namespace

// ---- Conv -------------------------------------------------------------------------------------
Conv::Conv(std::int64_t ic, std::int64_t oc, std::vector<int> k, ConvOptions o, bool with_bias, bool tr)
    : in_channels(ic), out_channels(oc), kernel(std::move(k)), options(std::move(o)), transpose(tr) {
  const char* name = tr ? "ConvTranspose" : "Conv";
  BITGRAD_CHECK(kernel.size() == 1 || kernel.size() == 2, name, "expects 1 or 2 kernel sizes, got ", kernel.size());
  BITGRAD_CHECK(ic > 0 && oc > 0 && options.groups >= 1 && ic % options.groups == 0 && oc % options.groups == 0, name,
                "invalid channels ", ic, " -> ", oc, " for groups ", options.groups);
  for (int v : kernel) BITGRAD_CHECK(v > 0, name, "kernel sizes must be > 0, got ", ints(kernel));
  // the options' sizes and signs here, where the layer is made, not at its first forward
  const std::size_t sp = kernel.size();
  check_axes(name, options.stride, "stride", sp, 1);
  check_axes(name, options.pads, "pads", 2 * sp, 0);
  check_axes(name, options.dilation, "dilation", sp, 1);
  check_axes(name, options.output_padding, "output_padding", sp, 0);
  std::vector<std::int64_t> ws = {tr ? ic : oc, (tr ? oc : ic) / options.groups};
  for (int v : kernel) ws.push_back(v);
  weight = register_parameter("weight", Tensor::zeros(Shape(ws)));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros(Shape{oc}));
}
void Conv::init(Init w, std::uint64_t seed, std::uint64_t& index) {
  // PyTorch's fans: weight.shape[1] and weight.shape[0] times the receptive field
  std::int64_t rf = 1;
  for (int v : kernel) rf *= v;
  const std::int64_t fan_in = weight.shape()[1] * rf, fan_out = weight.shape()[0] * rf;
  init_tensor(weight, w, fan_in, fan_out, init_stream(seed, index));
  if (bias.defined()) {
    const rng::Stream s = init_stream(seed, index);
    const double bound = 1.0 / math::sqrt(static_cast<double>(fan_in));
    NoGradGuard ng;
    BITGRAD_DISPATCH_FLOAT(bias.dtype(), "init", T, [&] {
      s.fill_uniform(bias.mutable_data<T>(), bias.numel(), 0, static_cast<T>(-bound), static_cast<T>(bound));
    });
  }
}
Tensor Conv::forward(const Tensor& x, const Context& ctx) {
  using detail::lowp;
  auto op = [&](const Tensor& a, const Tensor& w, const Tensor& b) {
    return transpose ? conv_transpose(a, w, b, options) : conv(a, w, b, options);
  };
  if (ctx.precision == Precision::fp32) return op(x, weight, bias);
  const std::uint64_t s = site();
  return lowp(op(lowp(x, ctx, s, 0), lowp(weight, ctx, s, 1, true), lowp(bias, ctx, s, 2, true)), ctx, s, 3);
}
Shape Conv::output_shape(const Shape& in) const {
  const std::size_t sp = kernel.size();
  BITGRAD_CHECK(in.ndim() == static_cast<int>(2 + sp) && in[1] == in_channels, describe().c_str(), "expects inputs [N, ", in_channels,
                sp == 2 ? ", H, W" : ", L", "], got ", in.str());
  std::vector<std::int64_t> out = {in[0], out_channels};
  for (std::size_t a = 0; a < sp; ++a) {
    const std::int64_t L = in[static_cast<int>(2 + a)], k = kernel[a], s = at(options.stride, a, 1), d = at(options.dilation, a, 1);
    const std::int64_t pads = at(options.pads, a, 0) + at(options.pads, a + sp, 0);
    const std::int64_t span = d * (k - 1) + 1;
    std::int64_t o;
    if (transpose) {
      o = (L - 1) * s - pads + span + at(options.output_padding, a, 0);
      BITGRAD_CHECK(o >= 1, describe().c_str(), "the output of ", in.str(), " would be empty");
    } else {
      BITGRAD_CHECK(L + pads >= span, describe().c_str(), "the kernel is larger than the padded input ", in.str());
      o = (L + pads - span) / s + 1;
    }
    out.push_back(o);
  }
  return Shape(out);
}
// PyTorch's repr: kernel and stride always, the other options where not their defaults
std::string Conv::describe() const {
  const std::size_t sp = kernel.size();
  return str(transpose ? "ConvTranspose" : "Conv", sp, "d(", in_channels, ", ", out_channels, ", kernel_size=", ints(kernel),
             ", stride=", ints(per_axis(options.stride, sp, 1)), padding_text(options.pads, sp),
             all_are(options.dilation, 1) ? std::string() : ", dilation=" + ints(options.dilation),
             transpose && !all_are(options.output_padding, 0) ? ", output_padding=" + ints(options.output_padding) : std::string(),
             options.groups != 1 ? ", groups=" + std::to_string(options.groups) : std::string(), bias.defined() ? "" : ", bias=False", ")");
}

// ---- AdaptivePool2d ---------------------------------------------------------------------------
AdaptivePool2d::AdaptivePool2d(bool max, std::int64_t oh, std::int64_t ow) : max_(max), oh_(oh), ow_(ow) {
  BITGRAD_CHECK(oh >= 1 && ow >= 1, max ? "AdaptiveMaxPool2d" : "AdaptiveAvgPool2d", "output size must be >= 1, got ", oh, " x ", ow);
}
Tensor AdaptivePool2d::forward(const Tensor& x, const Context&) {
  return max_ ? adaptive_max_pool2d(x, oh_, ow_) : adaptive_avg_pool2d(x, oh_, ow_);
}
Shape AdaptivePool2d::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() == 4 && in[2] >= 1 && in[3] >= 1, describe().c_str(), "expects inputs [N, C, H, W], got ", in.str());
  return Shape{in[0], in[1], oh_, ow_};
}
std::string AdaptivePool2d::describe() const { return str(max_ ? "AdaptiveMaxPool2d(" : "AdaptiveAvgPool2d(", oh_, ", ", ow_, ")"); }

// ---- Pool -------------------------------------------------------------------------------------
Pool::Pool(bool max, PoolOptions o) : max_(max), o_(std::move(o)) {
  const char* name = max ? "MaxPool2d" : "AvgPool2d";
  BITGRAD_CHECK(o_.kernel.size() == 2, name, "expects 2 kernel sizes, got ", ints(o_.kernel));
  check_axes(name, o_.kernel, "kernel_size", 2, 1);
  check_axes(name, o_.stride, "stride", 2, 1);
  check_axes(name, o_.pads, "pads", 4, 0);
  check_axes(name, o_.dilation, "dilation", 2, 1);
}
Tensor Pool::forward(const Tensor& x, const Context&) { return max_ ? max_pool(x, o_) : avg_pool(x, o_); }
Shape Pool::output_shape(const Shape& in) const {  // the ops' sizes (src/ops/pool_padded.cpp)
  BITGRAD_CHECK(in.ndim() == 4, describe().c_str(), "expects inputs [N, C, H, W], got ", in.str());
  std::vector<std::int64_t> out = {in[0], in[1]};
  for (std::size_t a = 0; a < 2; ++a) {
    const std::int64_t L = in[static_cast<int>(2 + a)], k = o_.kernel[a], s = at(o_.stride, a, static_cast<int>(k)), d = at(o_.dilation, a, 1);
    const std::int64_t pb = at(o_.pads, a, 0), room = L + pb + at(o_.pads, a + 2, 0) - (d * (k - 1) + 1);
    BITGRAD_CHECK(room >= 0, describe().c_str(), "the window is larger than the padded input ", in.str());
    std::int64_t o = (o_.ceil_mode ? (room + s - 1) / s : room / s) + 1;
    if (o_.ceil_mode && (o - 1) * s >= L + pb) --o;
    out.push_back(o);
  }
  return Shape(out);
}
// as Conv's: kernel and stride always, the rest where not the default (count_include_pad where
// there is padding for it to count)
std::string Pool::describe() const {
  const std::string pads = padding_text(o_.pads, 2);
  return str(max_ ? "MaxPool2d(" : "AvgPool2d(", "kernel_size=", ints(o_.kernel), ", stride=", ints(o_.stride.empty() ? o_.kernel : o_.stride),
             pads, all_are(o_.dilation, 1) ? std::string() : ", dilation=" + ints(o_.dilation), o_.ceil_mode ? ", ceil_mode=True" : "",
             !max_ && !pads.empty() ? (o_.count_include_pad ? ", count_include_pad=True" : ", count_include_pad=False") : "", ")");
}

// ---- Upsample ---------------------------------------------------------------------------------
Upsample::Upsample(std::int64_t oh, std::int64_t ow, double sh, double sw, bool bilinear, bool align)
    : oh_(oh), ow_(ow), sh_(sh), sw_(sw), bilinear_(bilinear), align_(align) {
  BITGRAD_CHECK((oh >= 1 && ow >= 1) || (oh == 0 && ow == 0 && sh > 0 && sw > 0), "Upsample",
                "give an output size (>= 1) or scale factors (> 0), got size ", oh, " x ", ow, ", scale ", sh, " x ", sw);
}
Tensor Upsample::forward(const Tensor& x, const Context&) {
  const Shape o = output_shape(x.shape());
  const double sh = oh_ ? 0.0 : sh_, sw = oh_ ? 0.0 : sw_;
  return bilinear_ ? upsample_bilinear2d(x, o[2], o[3], align_, sh, sw) : upsample_nearest2d(x, o[2], o[3], sh, sw);
}
Shape Upsample::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() == 4, describe().c_str(), "expects inputs [N, C, H, W], got ", in.str());
  if (oh_) return Shape{in[0], in[1], oh_, ow_};
  const auto h = static_cast<std::int64_t>(std::floor(static_cast<double>(in[2]) * sh_));
  const auto w = static_cast<std::int64_t>(std::floor(static_cast<double>(in[3]) * sw_));
  BITGRAD_CHECK(h >= 1 && w >= 1, describe().c_str(), "scales ", sh_, " x ", sw_, " leave no output for ", in.str());
  return Shape{in[0], in[1], h, w};
}
std::string Upsample::describe() const {
  const std::string mode = bilinear_ ? (align_ ? "bilinear, align_corners" : "bilinear") : "nearest";
  return oh_ ? str("Upsample(size=(", oh_, ", ", ow_, "), ", mode, ")") : str("Upsample(scale=(", sh_, ", ", sw_, "), ", mode, ")");
}

void Conv::bind_parameters() {
  weight = own_parameter("weight");
  bias = own_parameter("bias");
}

}  // namespace bitgrad::nn
