// The extension module bitgrad._bitgrad: the C++ library itself, bound with pybind11. The
// package bitgrad (bitgrad/__init__.py) re-exports it with a few pure-Python conveniences.
#include "python/bind.hpp"
#include "python/pymodule.hpp"

#include <mutex>
#include <set>

#include "bitgrad/instruments.hpp"

namespace bitgrad::python {

CallSite py_site() {
  if (!autograd::op_hook_active()) return CallSite::current("<python>", 0);
  // file names are interned: a CallSite keeps a pointer, and traces read it after the call
  static std::mutex mu;
  static std::set<std::string>* names = new std::set<std::string>();
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (!frame) return CallSite::current("<python>", 0);
  const int line = PyFrame_GetLineNumber(frame);
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  std::string file = py::str(reinterpret_cast<PyObject*>(code->co_filename));
  Py_DECREF(code);
  std::lock_guard<std::mutex> lock(mu);
  return CallSite::current(names->insert(file).first->c_str(), line);
}

std::optional<std::vector<int>> axes_arg(const py::object& axis) {
  if (axis.is_none()) return std::nullopt;
  if (py::isinstance<py::int_>(axis)) return std::vector<int>{axis.cast<int>()};
  return axis.cast<std::vector<int>>();
}

std::vector<std::int64_t> shape_arg(const py::args& args, const char* op) {
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
    try {
      return args[0].cast<std::vector<std::int64_t>>();
    } catch (const py::cast_error&) {
      throw py::type_error(std::string(op) + ": expected a shape (ints, or one sequence of ints), got " +
                  std::string(py::str(py::type::of(args[0]).attr("__name__"))));
    }
  }
  std::vector<std::int64_t> dims;
  for (const py::handle h : args) {
    if (!py::isinstance<py::int_>(h))
      throw py::type_error(std::string(op) + ": expected a shape (ints, or one sequence of ints), got " +
                  std::string(py::str(py::type::of(h).attr("__name__"))));
    dims.push_back(h.cast<std::int64_t>());
  }
  return dims;
}

Shape to_shape(const std::vector<std::int64_t>& dims, const char* op) {
  BITGRAD_CHECK(dims.size() <= static_cast<std::size_t>(kMaxDims), op, "at most ", kMaxDims, " dimensions, got ", dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i)
    BITGRAD_CHECK(dims[i] >= 0, op, "dimension ", i, " is ", dims[i], "; dimensions are >= 0");
  return Shape(dims);
}

py::object tensor_or_none(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

Tensor as_tensor(const py::handle& h, const char* op) {
  if (py::isinstance<Tensor>(h)) return h.cast<Tensor>();
  if (py::isinstance<py::bool_>(h) || !(py::isinstance<py::int_>(h) || py::isinstance<py::float_>(h)))
    throw py::type_error(std::string(op) + ": expected a bitgrad.Tensor or a number, got " +
                         std::string(py::str(py::type::of(h).attr("__name__"))));
  return Tensor::scalar(h.cast<double>());
}

}  // namespace bitgrad::python

PYBIND11_MODULE(_bitgrad, m) {
  using namespace bitgrad;
  using namespace bitgrad::python;
  m.doc() = "bitgrad: reverse-mode autodiff and training whose results are bitwise reproducible (docs/python.md)";
  m.attr("__version__") = kVersion;
  m.attr("numerics_version") = kNumericsVersion;
  m.attr("git_commit") = git_commit();

  init_errors(m);
  init_tensor(m);
  init_ops(m);
  init_ops_shape(m);
  init_ops_spatial(m);
  init_nn(m);
  init_norm_rnn(m);
  {
    py::module_ nn = m.attr("nn").cast<py::module_>();
    init_nn_spatial(nn);
  }
  init_optim(m);
  init_data(m);
  init_train(m);
  init_instruments(m);
  init_distributed(m);  // issue 30: data parallel and accumulation from Python (distributed.cpp)
  init_onnx(m);
  init_random(m);  // issue 30: manual_seed and the generator's state

  m.def("set_num_threads", &set_num_threads, py::arg("n"),
        "Kernel threads (n >= 1). Cannot change a result: the canonical orders depend on shapes only.");
  m.def("get_num_threads", &num_threads, "Kernel threads in use.");
  m.def("set_isa", [](const std::string& name) { set_isa(parse_isa(name)); }, py::arg("isa"),
        "Force a code path: 'scalar', 'avx2' or 'avx512' (an error if the CPU lacks it). Cannot change a result.");
  m.def("get_isa", [] { return std::string(isa_name(active_isa())); }, "The code path in use.");
  m.def("cpu_model", &cpu_model);
  m.def("selftest", [] {
    const SelftestResult r = nogil([] { return run_selftest(); });
    py::dict d;
    d["model"] = r.model;
    d["loss"] = r.loss;
    py::dict g;
    for (const auto& [name, dg] : r.gradients) g[py::str(name)] = dg.hex();
    d["gradients"] = g;
    d["fingerprint"] = r.fingerprint.hex();
    return d;
  }, "The fixed selftest (as `bitgrad selftest`): its loss and the fingerprint of its gradients, the same on every machine.");
}
