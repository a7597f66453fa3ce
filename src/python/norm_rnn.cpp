// RMSNorm, GroupNorm, InstanceNorm and the recurrent cells as bitgrad.<op>, and
// their modules in bitgrad.nn (RMSNorm, GroupNorm, InstanceNorm, RNN, LSTM, GRU with PyTorch's
// arguments and parameter names). Each op takes the Python caller's site and runs without the GIL.
#include "python/bind.hpp"
#include "python/pymodule.hpp"

namespace bitgrad::python {
namespace {

Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

RnnParams params(const Tensor& w_ih, const Tensor& w_hh, const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh) {
  return RnnParams{w_ih, w_hh, opt(b_ih), opt(b_hh)};
}

bool relu_of(const std::string& nonlinearity) {
  if (nonlinearity == "tanh") return false;
  if (nonlinearity == "relu") return true;
  detail::fail("rnn", "nonlinearity is '", nonlinearity, "'; expected tanh or relu");
}

using RecurrentPtr = std::shared_ptr<nn::Recurrent>;
RecurrentPtr make_recurrent(RnnMode mode, std::int64_t in, std::int64_t hidden, std::int64_t layers, bool bias, bool batch_first,
                            bool last_only, std::optional<std::uint64_t> seed) {
  auto r = std::make_shared<nn::Recurrent>(mode, in, hidden, layers, bias, batch_first, last_only);
  nn::initialize(*r, nn::Init::kaiming_uniform, module_seed(seed));  // without seed, the generator's  // the module's own initialisation (PyTorch's)
  return r;
}

// PyTorch's return: (output, h_n), or (output, (h_n, c_n)) for an LSTM
py::tuple run(const nn::Recurrent& r, const Tensor& x, const std::optional<Tensor>& h0, const std::optional<Tensor>& c0) {
  const RnnResult res = nogil([&] { return r.run(x, opt(h0), opt(c0)); });
  if (r.mode() == RnnMode::lstm) return py::make_tuple(res.output, py::make_tuple(res.h_n, res.c_n));
  return py::make_tuple(res.output, res.h_n);
}

py::list layer_params(const nn::Recurrent& r) {
  py::list l;
  for (const RnnParams& p : r.layer_params()) l.append(py::make_tuple(p.w_ih, p.w_hh, tensor_or_none(p.b_ih), tensor_or_none(p.b_hh)));
  return l;
}

}  // namespace

void init_norm_rnn(py::module_& top) {
  top.def("rms_norm", [](const Tensor& x, const std::optional<Tensor>& w, double eps, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return rms_norm(x, opt(w), eps, axis, site); });
  }, py::arg("x"), py::arg("weight") = py::none(), py::arg("eps") = 1e-5, py::arg("axis") = -1,
         "RMSNorm over the axes [axis, ndim): (x / sqrt(mean(x²) + eps)) * weight (weight of shape x.shape[axis:]).");
  top.def("group_norm", [](const Tensor& x, std::int64_t groups, const std::optional<Tensor>& w, const std::optional<Tensor>& b, double eps) {
    const CallSite site = py_site();
    return nogil([&] { return group_norm(x, groups, opt(w), opt(b), eps, site); });
  }, py::arg("x"), py::arg("num_groups"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5,
         "GroupNorm of x [N, C, ...]: each sample's groups of C / num_groups channels normalised, then * weight[c] + bias[c].");
  top.def("instance_norm", [](const Tensor& x, const std::optional<Tensor>& w, const std::optional<Tensor>& b, double eps) {
    const CallSite site = py_site();
    return nogil([&] { return instance_norm(x, opt(w), opt(b), eps, site); });
  }, py::arg("x"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5,
         "InstanceNorm of x [N, C, D1, ...] (ONNX InstanceNormalization): group_norm with one group per channel.");
  top.def("rnn_cell", [](const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const std::optional<Tensor>& b_ih,
                         const std::optional<Tensor>& b_hh, const std::string& nonlinearity) {
    const bool relu = relu_of(nonlinearity);
    const CallSite site = py_site();
    return nogil([&] { return rnn_cell(x, h, params(w_ih, w_hh, b_ih, b_hh), relu, site); });
  }, py::arg("x"), py::arg("h"), py::arg("w_ih"), py::arg("w_hh"), py::arg("b_ih") = py::none(), py::arg("b_hh") = py::none(),
         py::arg("nonlinearity") = "tanh", "One step of torch.nn.RNNCell: act(x w_ihᵀ + b_ih + b_hh + h w_hhᵀ).");
  top.def("lstm_cell", [](const Tensor& x, const Tensor& h, const Tensor& c, const Tensor& w_ih, const Tensor& w_hh,
                          const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh) {
    const CallSite site = py_site();
    const RnnState s = nogil([&] { return lstm_cell(x, h, c, params(w_ih, w_hh, b_ih, b_hh), site); });
    return py::make_tuple(s.h, s.c);
  }, py::arg("x"), py::arg("h"), py::arg("c"), py::arg("w_ih"), py::arg("w_hh"), py::arg("b_ih") = py::none(), py::arg("b_hh") = py::none(),
         "One step of torch.nn.LSTMCell (gates i, f, g, o): returns (h', c').");
  top.def("gru_cell", [](const Tensor& x, const Tensor& h, const Tensor& w_ih, const Tensor& w_hh, const std::optional<Tensor>& b_ih,
                         const std::optional<Tensor>& b_hh) {
    const CallSite site = py_site();
    return nogil([&] { return gru_cell(x, h, params(w_ih, w_hh, b_ih, b_hh), site); });
  }, py::arg("x"), py::arg("h"), py::arg("w_ih"), py::arg("w_hh"), py::arg("b_ih") = py::none(), py::arg("b_hh") = py::none(),
         "One step of torch.nn.GRUCell (gates r, z, n; r multiplies h w_hnᵀ + b_hn).");

  py::module_ m = top.attr("nn").cast<py::module_>();
  py::class_<nn::RMSNorm, nn::Module, std::shared_ptr<nn::RMSNorm>>(m, "RMSNorm", "RMSNorm over the last len(normalized_shape) dimensions.")
      .def(py::init([](const py::object& shape, double eps, bool affine) {
             std::vector<std::int64_t> dims;
             if (py::isinstance<py::int_>(shape)) dims.push_back(shape.cast<std::int64_t>());
             else dims = shape.cast<std::vector<std::int64_t>>();
             auto r = std::make_shared<nn::RMSNorm>(dims, eps, affine);
             nn::initialize(*r, nn::Init::kaiming_uniform, 0);
             return r;
           }),
           py::arg("normalized_shape"), py::arg("eps") = 1e-5, py::arg("elementwise_affine") = true)
      .def_property_readonly("weight", [](const nn::RMSNorm& l) { return tensor_or_none(l.gamma); });
  py::class_<nn::GroupNorm, nn::Module, std::shared_ptr<nn::GroupNorm>> gn(m, "GroupNorm", "GroupNorm of x [N, C, ...] (torch.nn.GroupNorm).");
  gn.def(py::init([](std::int64_t groups, std::int64_t channels, double eps, bool affine) {
           auto r = std::make_shared<nn::GroupNorm>(groups, channels, eps, affine);
           nn::initialize(*r, nn::Init::kaiming_uniform, 0);
           return r;
         }),
         py::arg("num_groups"), py::arg("num_channels"), py::arg("eps") = 1e-5, py::arg("affine") = true)
      .def_property_readonly("weight", [](const nn::GroupNorm& l) { return tensor_or_none(l.gamma); })
      .def_property_readonly("bias", [](const nn::GroupNorm& l) { return tensor_or_none(l.beta); });
  m.def("InstanceNorm", [](std::int64_t features, double eps, bool affine) {
    auto r = std::make_shared<nn::GroupNorm>(features, features, eps, affine, true);
    nn::initialize(*r, nn::Init::kaiming_uniform, 0);
    return r;
  }, py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("affine") = false,
        "InstanceNorm of x [N, C, D1, ...] (torch.nn.InstanceNorm1d/2d/3d without running statistics): a GroupNorm of C groups.");

  py::class_<nn::Recurrent, nn::Module, RecurrentPtr> rec(m, "_Recurrent");
  rec.def("run", &run, py::arg("x"), py::arg("h0") = py::none(), py::arg("c0") = py::none(),
          "(output, h_n), or (output, (h_n, c_n)) for an LSTM, as PyTorch's forward; h0, c0 [num_layers, N, H].")
      .def("layer_params", &layer_params, "Per layer: (weight_ih, weight_hh, bias_ih, bias_hh).")
      .def_readonly("input_size", &nn::Recurrent::input_size)
      .def_readonly("hidden_size", &nn::Recurrent::hidden_size)
      .def_readonly("num_layers", &nn::Recurrent::num_layers)
      .def_readonly("batch_first", &nn::Recurrent::batch_first)
      .def_readonly("last_only", &nn::Recurrent::last_only);
  const char* rnn_doc = "PyTorch's arguments and parameters (weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, drawn "
                        "uniform(±1/sqrt(hidden_size)) from (seed, 'init') streams). Calling it returns PyTorch's (output, h_n), or "
                        "(output, (h_n, c_n)) for an LSTM; with last_only, the last step's output [N, H] alone (inside a Sequential "
                        "the layer gives its output).";
  m.def("RNN", [](std::int64_t in, std::int64_t hidden, std::int64_t layers, const std::string& nonlinearity, bool bias, bool batch_first,
                  bool last_only, std::optional<std::uint64_t> seed) {
    return make_recurrent(relu_of(nonlinearity) ? RnnMode::rnn_relu : RnnMode::rnn_tanh, in, hidden, layers, bias, batch_first, last_only, seed);
  }, py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1, py::arg("nonlinearity") = "tanh", py::arg("bias") = true,
        py::arg("batch_first") = false, py::kw_only(), py::arg("last_only") = false, py::arg("seed") = py::none(), rnn_doc);
  for (const auto& [name, mode] : {std::pair{"LSTM", RnnMode::lstm}, std::pair{"GRU", RnnMode::gru}}) {
    const RnnMode md = mode;
    m.def(name, [md](std::int64_t in, std::int64_t hidden, std::int64_t layers, bool bias, bool batch_first, bool last_only, std::optional<std::uint64_t> seed) {
      return make_recurrent(md, in, hidden, layers, bias, batch_first, last_only, seed);
    }, py::arg("input_size"), py::arg("hidden_size"), py::arg("num_layers") = 1, py::arg("bias") = true, py::arg("batch_first") = false,
          py::kw_only(), py::arg("last_only") = false, py::arg("seed") = py::none(), rnn_doc);
  }
}

}  // namespace bitgrad::python
