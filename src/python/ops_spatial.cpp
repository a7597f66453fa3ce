// Convolution, pooling and upsampling as bitgrad.<op> with PyTorch's arguments
// (bitgrad/ops.hpp): conv2d / conv1d with stride, padding, dilation and groups per axis (the
// plain case runs the original conv2d), conv_transpose2d / 1d; max_pool2d / avg_pool2d with padding,
// dilation, ceil_mode and count_include_pad (square windows without them run the original
// max_pool2d / avg_pool2d), the 1-d forms, adaptive and global pooling, interpolate.
#include <cmath>

#include "bitgrad/ops_spatial.hpp"
#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

// An int (repeated n times) or a sequence of n ints (or of `alt` ints, when alt > 0)
std::vector<int> ints_arg(const py::object& o, std::size_t n, const char* op, const char* what, std::size_t alt = 0) {
  if (py::isinstance<py::int_>(o)) return std::vector<int>(n, o.cast<int>());
  std::vector<int> v;
  try {
    v = o.cast<std::vector<int>>();
  } catch (const py::cast_error&) {
    detail::fail(op, what, " must be an int or a sequence of ints");
  }
  if (v.size() != n && (alt == 0 || v.size() != alt))
    detail::fail(op, what, " must be an int or ", n, alt ? " or " + std::to_string(alt) : std::string(), " ints, got ", v.size());
  return v;
}

// padding: one int, one per axis (both sides) or ONNX's [begin..., end...]
std::vector<int> pads_arg(const py::object& o, std::size_t n, const char* op) {
  std::vector<int> p = ints_arg(o, n, op, "padding", 2 * n);
  if (p.size() == n) p.insert(p.end(), p.begin(), p.end());
  return p;
}

bool all_equal(const std::vector<int>& v, int x) {
  for (int e : v)
    if (e != x) return false;
  return true;
}

PoolOptions pool_options(const char* op, std::size_t n, const py::object& kernel, const py::object& stride, const py::object& padding,
                         const py::object& dilation, bool ceil_mode, bool include_pad) {
  PoolOptions o;
  o.kernel = ints_arg(kernel, n, op, "kernel_size");
  o.stride = stride.is_none() ? o.kernel : ints_arg(stride, n, op, "stride");
  for (std::size_t i = 0; i < n; ++i)
    if (o.stride[i] == 0) o.stride[i] = o.kernel[i];  // 0: the kernel size (bitgrad's old default)
  o.pads = pads_arg(padding, n, op);
  o.dilation = ints_arg(dilation, n, op, "dilation");
  o.ceil_mode = ceil_mode;
  o.count_include_pad = include_pad;
  return o;
}

// the original square, unpadded 2-d pooling: its kernels (and bits) when the options allow
bool plain_2d(const PoolOptions& o) {
  return o.kernel[0] == o.kernel[1] && o.stride[0] == o.stride[1] && all_equal(o.pads, 0) && all_equal(o.dilation, 1) && !o.ceil_mode;
}

std::pair<std::int64_t, std::int64_t> pair_arg(const py::object& o, const char* op, const char* what) {
  const std::vector<int> v = ints_arg(o, 2, op, what);
  return {v[0], v[1]};
}

ConvOptions conv_options(const char* op, std::size_t n, const py::object& stride, const py::object& padding,
                         const py::object& dilation, int groups, const py::object& output_padding) {
  ConvOptions o;
  o.stride = ints_arg(stride, n, op, "stride");
  o.pads = pads_arg(padding, n, op);
  o.dilation = ints_arg(dilation, n, op, "dilation");
  o.groups = groups;
  o.output_padding = ints_arg(output_padding, n, op, "output_padding");
  return o;
}

Tensor bias_of(const std::optional<Tensor>& b) { return b ? *b : Tensor(); }

}  // namespace

void init_ops_spatial(py::module_& m) {
  m.def("conv2d", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const py::object& stride, const py::object& padding,
                     const py::object& dilation, int groups) {
    const ConvOptions o = conv_options("conv2d", 2, stride, padding, dilation, groups, py::int_(0));
    const bool plain = groups == 1 && o.stride[0] == o.stride[1] && all_equal(o.pads, o.pads[0]) && all_equal(o.dilation, 1);
    const CallSite site = py_site();
    return nogil([&] { return plain ? conv2d(x, w, bias_of(b), o.stride[0], o.pads[0], site) : conv(x, w, bias_of(b), o, site); });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("dilation") = 1, py::arg("groups") = 1,
        "x [N, C, H, W], weight [OC, C / groups, KH, KW] -> [N, OC, OH, OW]; padding: an int, (ph, pw) or ONNX's (top, left, bottom, right).");
  m.def("conv1d", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const py::object& stride, const py::object& padding,
                     const py::object& dilation, int groups) {
    const ConvOptions o = conv_options("conv1d", 1, stride, padding, dilation, groups, py::int_(0));
    const CallSite site = py_site();
    return nogil([&] { return conv(x, w, bias_of(b), o, site); });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("dilation") = 1, py::arg("groups") = 1, "x [N, C, L], weight [OC, C / groups, K] -> [N, OC, OL].");
  m.def("conv_transpose2d", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const py::object& stride,
                               const py::object& padding, const py::object& output_padding, int groups, const py::object& dilation) {
    const ConvOptions o = conv_options("conv_transpose2d", 2, stride, padding, dilation, groups, output_padding);
    const CallSite site = py_site();
    return nogil([&] { return conv_transpose(x, w, bias_of(b), o, site); });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("dilation") = 1,
        "The adjoint of conv2d: x [N, C, H, W], weight [C, OC / groups, KH, KW] -> [N, OC, OH, OW] (PyTorch's argument order).");
  m.def("conv_transpose1d", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const py::object& stride,
                               const py::object& padding, const py::object& output_padding, int groups, const py::object& dilation) {
    const ConvOptions o = conv_options("conv_transpose1d", 1, stride, padding, dilation, groups, output_padding);
    const CallSite site = py_site();
    return nogil([&] { return conv_transpose(x, w, bias_of(b), o, site); });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("dilation") = 1, "The adjoint of conv1d.");
  m.def("max_pool2d", [](const Tensor& x, const py::object& k, const py::object& s, const py::object& p, const py::object& d,
                         bool ceil_mode) {
    const PoolOptions o = pool_options("max_pool2d", 2, k, s, p, d, ceil_mode, false);
    const CallSite site = py_site();
    return nogil([&] { return plain_2d(o) ? max_pool2d(x, o.kernel[0], o.stride[0], site) : max_pool(x, o, site); });
  }, py::arg("x"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
        py::arg("ceil_mode") = false,
        "PyTorch's F.max_pool2d. stride None (or 0): the kernel size; padding: an int, (ph, pw) or ONNX's (top, left, bottom, right).");
  m.def("avg_pool2d", [](const Tensor& x, const py::object& k, const py::object& s, const py::object& p, bool ceil_mode,
                         bool count_include_pad) {
    const PoolOptions o = pool_options("avg_pool2d", 2, k, s, p, py::int_(1), ceil_mode, count_include_pad);
    const CallSite site = py_site();
    return nogil([&] { return plain_2d(o) ? avg_pool2d(x, o.kernel[0], o.stride[0], site) : avg_pool(x, o, site); });
  }, py::arg("x"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
        py::arg("count_include_pad") = true, "PyTorch's F.avg_pool2d (count_include_pad True as PyTorch; ONNX's default is False).");
  m.def("max_pool1d", [](const Tensor& x, const py::object& k, const py::object& s, const py::object& p, const py::object& d,
                         bool ceil_mode) {
    const PoolOptions o = pool_options("max_pool1d", 1, k, s, p, d, ceil_mode, false);
    const CallSite site = py_site();
    return nogil([&] { return max_pool(x, o, site); });
  }, py::arg("x"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
        py::arg("ceil_mode") = false, "x [N, C, L]; PyTorch's F.max_pool1d.");
  m.def("avg_pool1d", [](const Tensor& x, const py::object& k, const py::object& s, const py::object& p, bool ceil_mode,
                         bool count_include_pad) {
    const PoolOptions o = pool_options("avg_pool1d", 1, k, s, p, py::int_(1), ceil_mode, count_include_pad);
    const CallSite site = py_site();
    return nogil([&] { return avg_pool(x, o, site); });
  }, py::arg("x"), py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
        py::arg("count_include_pad") = true, "x [N, C, L]; PyTorch's F.avg_pool1d.");
  m.def("adaptive_avg_pool2d", [](const Tensor& x, const py::object& size) {
    const auto [h, w] = pair_arg(size, "adaptive_avg_pool2d", "output_size");
    const CallSite site = py_site();
    return nogil([&] { return adaptive_avg_pool2d(x, h, w, site); });
  }, py::arg("x"), py::arg("output_size"), "Bins [floor(i H / OH), ceil((i + 1) H / OH)) as PyTorch.");
  m.def("adaptive_max_pool2d", [](const Tensor& x, const py::object& size) {
    const auto [h, w] = pair_arg(size, "adaptive_max_pool2d", "output_size");
    const CallSite site = py_site();
    return nogil([&] { return adaptive_max_pool2d(x, h, w, site); });
  }, py::arg("x"), py::arg("output_size"), "Bins as PyTorch; the first maximum of each (NaN wins).");
  m.def("adaptive_avg_pool1d", [](const Tensor& x, std::int64_t size) {
    const CallSite site = py_site();
    return nogil([&] { return adaptive_avg_pool1d(x, size, site); });
  }, py::arg("x"), py::arg("output_size"));
  m.def("adaptive_max_pool1d", [](const Tensor& x, std::int64_t size) {
    const CallSite site = py_site();
    return nogil([&] { return adaptive_max_pool1d(x, size, site); });
  }, py::arg("x"), py::arg("output_size"));
  m.def("global_avg_pool", [](const Tensor& x) {
    const CallSite site = py_site();
    return nogil([&] { return global_avg_pool(x, site); });
  }, py::arg("x"), "[N, C, d1, ...] -> [N, C, 1, ...] (ONNX GlobalAveragePool).");
  m.def("global_max_pool", [](const Tensor& x) {
    const CallSite site = py_site();
    return nogil([&] { return global_max_pool(x, site); });
  }, py::arg("x"), "[N, C, d1, ...] -> [N, C, 1, ...] (ONNX GlobalMaxPool).");
  m.def("interpolate", [](const Tensor& x, const py::object& size, const py::object& scale_factor, const std::string& mode,
                          const py::object& align_corners) {
    const char* op = "interpolate";
    BITGRAD_CHECK(mode == "nearest" || mode == "bilinear", op, "mode is '", mode, "'; expected nearest or bilinear");
    BITGRAD_CHECK(x.ndim() == 4, op, "expects x [N, C, H, W], got ", x.shape().str());
    BITGRAD_CHECK(size.is_none() != scale_factor.is_none(), op, "give exactly one of size and scale_factor");
    BITGRAD_CHECK(mode == "bilinear" || align_corners.is_none(), op, "align_corners is for bilinear only (as PyTorch)");
    const bool align = !align_corners.is_none() && align_corners.cast<bool>();
    std::int64_t oh = 0, ow = 0;
    double sh = 0, sw = 0;
    if (!size.is_none()) {
      std::tie(oh, ow) = pair_arg(size, op, "size");
    } else {
      if (py::isinstance<py::float_>(scale_factor) || py::isinstance<py::int_>(scale_factor)) sh = sw = scale_factor.cast<double>();
      else {
        const auto v = scale_factor.cast<std::vector<double>>();
        BITGRAD_CHECK(v.size() == 2, op, "scale_factor must be a number or 2 numbers, got ", v.size());
        sh = v[0], sw = v[1];
      }
      BITGRAD_CHECK(sh > 0 && sw > 0, op, "scale_factor must be > 0, got ", sh, " and ", sw);
      // PyTorch: floor(float(size) * scale), the scale handed on to the kernel
      oh = static_cast<std::int64_t>(std::floor(static_cast<double>(x.shape()[2]) * sh));
      ow = static_cast<std::int64_t>(std::floor(static_cast<double>(x.shape()[3]) * sw));
    }
    const CallSite site = py_site();
    return nogil([&] {
      return mode == "nearest" ? upsample_nearest2d(x, oh, ow, sh, sw, site) : upsample_bilinear2d(x, oh, ow, align, sh, sw, site);
    });
  }, py::arg("x"), py::arg("size") = py::none(), py::arg("scale_factor") = py::none(), py::arg("mode") = "nearest",
        py::arg("align_corners") = py::none(), "PyTorch's F.interpolate of [N, C, H, W], modes nearest and bilinear.");
}

}  // namespace bitgrad::python
