// bitgrad.nn's modules of the convolution variants, adaptive and global pooling and upsampling
// (bitgrad/nn_spatial.hpp), with PyTorch's arguments: Conv (the class; Conv1d, Conv2d,
// ConvTranspose1d, ConvTranspose2d are its factories), MaxPool2d and AvgPool2d (of Pool),
// AdaptiveAvgPool2d, AdaptiveMaxPool2d, GlobalAvgPool, Upsample; BasicBlock (torchvision's residual block). Layers made alone are initialised from their
// own `seed` as the other modules.
#include <cmath>

#include "bitgrad/nn_spatial.hpp"
#include "python/bind.hpp"
#include "python/pymodule.hpp"

namespace bitgrad::python {
namespace {

std::vector<int> ints(const py::object& o, std::size_t n, const char* op, const char* what, std::size_t alt = 0) {
  if (py::isinstance<py::int_>(o)) return std::vector<int>(n, o.cast<int>());
  const std::vector<int> v = o.cast<std::vector<int>>();
  BITGRAD_CHECK(v.size() == n || (alt && v.size() == alt), op, what, " must be an int or ", n, " ints", alt ? " (or ONNX's pads)" : "",
                ", got ", v.size());
  return v;
}

std::shared_ptr<nn::Conv> make_conv(const char* op, std::size_t sp, bool transpose, std::int64_t in, std::int64_t out, const py::object& k,
                                    const py::object& stride, const py::object& padding, const py::object& output_padding,
                                    const py::object& dilation, int groups, bool bias, std::optional<std::uint64_t> seed, const std::string& w) {
  ConvOptions o;
  o.stride = ints(stride, sp, op, "stride");
  o.pads = ints(padding, sp, op, "padding", 2 * sp);
  if (o.pads.size() == sp) o.pads.insert(o.pads.end(), o.pads.begin(), o.pads.end());
  o.dilation = ints(dilation, sp, op, "dilation");
  o.groups = groups;
  if (transpose) o.output_padding = ints(output_padding, sp, op, "output_padding");
  auto m = std::make_shared<nn::Conv>(in, out, ints(k, sp, op, "kernel_size"), o, bias, transpose);
  nn::initialize(*m, nn::parse_init(w), module_seed(seed));  // without seed, the generator's
  return m;
}

}  // namespace

void init_nn_spatial(py::module_& m) {
  const char* seed_doc = "Initialised from (seed, 'init') (weights: the scheme, from weight.shape[1] times the kernel as fan-in, as PyTorch's).";
  py::class_<nn::Conv, nn::Module, std::shared_ptr<nn::Conv>>(m, "Conv", "Conv1d / Conv2d with every option, or their transposes.")
      .def_readonly("weight", &nn::Conv::weight)
      .def_property_readonly("bias", [](const nn::Conv& l) { return tensor_or_none(l.bias); });
  m.def("Conv1d", [](std::int64_t in, std::int64_t out, const py::object& k, const py::object& s, const py::object& p, const py::object& d,
                     int groups, bool bias, std::optional<std::uint64_t> seed, const std::string& w) {
    return make_conv("Conv1d", 1, false, in, out, k, s, p, py::int_(0), d, groups, bias, seed, w);
  }, py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true, py::kw_only(), py::arg("seed") = py::none(),
        py::arg("weights") = "kaiming_uniform", seed_doc);
  m.def("Conv2d", [](std::int64_t in, std::int64_t out, const py::object& k, const py::object& s, const py::object& p, const py::object& d,
                     int groups, bool bias, std::optional<std::uint64_t> seed, const std::string& w) {
    return make_conv("Conv2d", 2, false, in, out, k, s, p, py::int_(0), d, groups, bias, seed, w);
  }, py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("dilation") = 1, py::arg("groups") = 1, py::arg("bias") = true, py::kw_only(), py::arg("seed") = py::none(),
        py::arg("weights") = "kaiming_uniform",
        "[N, C, H, W] -> [N, OC, OH, OW]: PyTorch's Conv2d, an int or a pair per option (padding also ONNX's four pads).");
  m.attr("ConvNd2d") = m.attr("Conv2d");  // its former name, when Conv2d took square kernels only
  m.def("ConvTranspose1d", [](std::int64_t in, std::int64_t out, const py::object& k, const py::object& s, const py::object& p,
                              const py::object& op, int groups, bool bias, const py::object& d, std::optional<std::uint64_t> seed, const std::string& w) {
    return make_conv("ConvTranspose1d", 1, true, in, out, k, s, p, op, d, groups, bias, seed, w);
  }, py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true, py::arg("dilation") = 1, py::kw_only(),
        py::arg("seed") = py::none(), py::arg("weights") = "kaiming_uniform", seed_doc);
  m.def("ConvTranspose2d", [](std::int64_t in, std::int64_t out, const py::object& k, const py::object& s, const py::object& p,
                              const py::object& op, int groups, bool bias, const py::object& d, std::optional<std::uint64_t> seed, const std::string& w) {
    return make_conv("ConvTranspose2d", 2, true, in, out, k, s, p, op, d, groups, bias, seed, w);
  }, py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
        py::arg("output_padding") = 0, py::arg("groups") = 1, py::arg("bias") = true, py::arg("dilation") = 1, py::kw_only(),
        py::arg("seed") = py::none(), py::arg("weights") = "kaiming_uniform", seed_doc);
  // PyTorch's MaxPool2d / AvgPool2d: stride None is the kernel; what bitgrad does not have raises
  py::class_<nn::Pool, nn::Module, std::shared_ptr<nn::Pool>>(m, "_Pool2d");
  auto pool_options = [](const char* op, const py::object& k, const py::object& s, const py::object& p, const py::object& d, bool ceil) {
    PoolOptions o;
    o.kernel = ints(k, 2, op, "kernel_size");
    o.stride = s.is_none() ? o.kernel : ints(s, 2, op, "stride");
    o.pads = ints(p, 2, op, "padding", 4);
    if (o.pads.size() == 2) o.pads.insert(o.pads.end(), o.pads.begin(), o.pads.end());
    o.dilation = ints(d, 2, op, "dilation");
    o.ceil_mode = ceil;
    return o;
  };
  m.def("MaxPool2d", [pool_options](const py::object& k, const py::object& s, const py::object& p, const py::object& d, bool indices, bool ceil) {
    BITGRAD_CHECK(!indices, "MaxPool2d", "return_indices=True is not supported (bitgrad's max pooling returns the values only)");
    return std::make_shared<nn::Pool>(true, pool_options("MaxPool2d", k, s, p, d, ceil));
  }, py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("dilation") = 1,
        py::arg("return_indices") = false, py::arg("ceil_mode") = false);
  m.def("AvgPool2d", [pool_options](const py::object& k, const py::object& s, const py::object& p, bool ceil, bool count_include_pad,
                                    const py::object& divisor) {
    BITGRAD_CHECK(divisor.is_none(), "AvgPool2d", "divisor_override is not supported (the divisor is the window's count, numerics.md §35)");
    PoolOptions o = pool_options("AvgPool2d", k, s, p, py::int_(1), ceil);
    o.count_include_pad = count_include_pad;
    return std::make_shared<nn::Pool>(false, o);
  }, py::arg("kernel_size"), py::arg("stride") = py::none(), py::arg("padding") = 0, py::arg("ceil_mode") = false,
        py::arg("count_include_pad") = true, py::arg("divisor_override") = py::none());
  py::class_<nn::AdaptivePool2d, nn::Module, std::shared_ptr<nn::AdaptivePool2d>>(m, "_AdaptivePool2d");
  auto pair = [](const py::object& o, const char* op) {
    const std::vector<int> v = ints(o, 2, op, "output_size");
    return std::pair<std::int64_t, std::int64_t>(v[0], v[1]);
  };
  m.def("AdaptiveAvgPool2d", [pair](const py::object& size) {
    const auto [h, w] = pair(size, "AdaptiveAvgPool2d");
    return std::make_shared<nn::AdaptivePool2d>(false, h, w);
  }, py::arg("output_size"));
  m.def("AdaptiveMaxPool2d", [pair](const py::object& size) {
    const auto [h, w] = pair(size, "AdaptiveMaxPool2d");
    return std::make_shared<nn::AdaptivePool2d>(true, h, w);
  }, py::arg("output_size"));
  m.def("GlobalAvgPool", [] { return std::make_shared<nn::AdaptivePool2d>(false, 1, 1); }, "[N, C, H, W] -> [N, C, 1, 1].");
  py::class_<nn::Upsample, nn::Module, std::shared_ptr<nn::Upsample>>(m, "Upsample", "PyTorch's nn.Upsample: nearest or bilinear.")
      .def(py::init([](const py::object& size, const py::object& scale, const std::string& mode, const py::object& align) {
             BITGRAD_CHECK(mode == "nearest" || mode == "bilinear", "Upsample", "mode is '", mode, "'; expected nearest or bilinear");
             BITGRAD_CHECK(size.is_none() != scale.is_none(), "Upsample", "give exactly one of size and scale_factor");
             std::int64_t h = 0, w = 0;
             double sh = 0, sw = 0;
             if (!size.is_none()) {
               const std::vector<int> v = ints(size, 2, "Upsample", "size");
               h = v[0], w = v[1];
             } else if (py::isinstance<py::float_>(scale) || py::isinstance<py::int_>(scale)) {
               sh = sw = scale.cast<double>();
             } else {
               const auto v = scale.cast<std::vector<double>>();
               BITGRAD_CHECK(v.size() == 2, "Upsample", "scale_factor must be a number or 2 numbers, got ", v.size());
               sh = v[0], sw = v[1];
             }
             return std::make_shared<nn::Upsample>(h, w, sh, sw, mode == "bilinear", !align.is_none() && align.cast<bool>());
           }),
           py::arg("size") = py::none(), py::arg("scale_factor") = py::none(), py::arg("mode") = "nearest",
           py::arg("align_corners") = py::none());
  // torchvision's BasicBlock, its children and parameters named as torchvision's
  py::class_<nn::BasicBlock, nn::Module, std::shared_ptr<nn::BasicBlock>>(
      m, "BasicBlock", "torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); downsample (1x1 conv, batch norm) "
                       "when the stride is not 1 or the channels change. Parameters named as torchvision's.")
      .def(py::init([](std::int64_t in, std::int64_t out, int stride, double eps, double momentum, std::uint64_t seed, const std::string& w) {
             auto b = std::make_shared<nn::BasicBlock>(in, out, stride, eps, momentum);
             nn::initialize(*b, nn::parse_init(w), seed);
             return b;
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("stride") = 1, py::kw_only(), py::arg("eps") = 1e-5,
           py::arg("momentum") = 0.1, py::arg("seed") = 0, py::arg("weights") = "kaiming_uniform")
      .def_readonly("conv1", &nn::BasicBlock::conv1)
      .def_readonly("bn1", &nn::BasicBlock::bn1)
      .def_readonly("conv2", &nn::BasicBlock::conv2)
      .def_readonly("bn2", &nn::BasicBlock::bn2)
      .def_property_readonly("downsample", [](const nn::BasicBlock& b) -> py::object {
        return b.downsample ? py::cast(b.downsample) : py::none();
      });
}

}  // namespace bitgrad::python
