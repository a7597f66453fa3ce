// The extension module bitgrad._bitgrad: the C++ library itself, bound with pybind11. The
// package bitgrad (bitgrad/__init__.py) re-exports it with a few pure-Python conveniences.
#include <limits>
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

std::int64_t int64_arg(py::handle h, const char* op, const std::string& what) {
  try {
    return h.cast<std::int64_t>();
  } catch (const py::cast_error&) {  // a Python int past int64: pybind11 said only "Unable to cast"
    throw Error(std::string(op) + ": " + what + " is " + std::string(py::str(h)) + ", which no int64 holds");
  }
}

std::vector<std::int64_t> shape_arg(const py::args& args, const char* op) {
  auto not_a_shape = [op](py::handle h) {
    return py::type_error(std::string(op) + ": expected a shape (ints, or one sequence of ints), got " +
                          std::string(py::str(py::type::of(h).attr("__name__"))));
  };
  py::sequence items = args;
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) {
    if (!py::isinstance<py::sequence>(args[0]) || py::isinstance<py::str>(args[0])) throw not_a_shape(args[0]);
    items = args[0].cast<py::sequence>();
  }
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < items.size(); ++i) {
    py::object h = items[i];
    if (!py::isinstance<py::int_>(h)) {  // a NumPy integer, or anything else with __index__
      if (py::isinstance<py::float_>(h) || !py::hasattr(h, "__index__")) throw not_a_shape(h);
      h = h.attr("__index__")();
    }
    dims.push_back(int64_arg(h, op, "dimension " + std::to_string(i)));
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
  // the build's own numerics, before anything computes: an import of a build that computes other
  // bits raises, naming the cause
  check_canonical_bits();
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
  init_distributed(m);  // data parallel and accumulation from Python (distributed.cpp)
  init_onnx(m);
  init_random(m);  // manual_seed and the generator's state

  m.def("set_num_threads", [](const py::int_& n) {
    // an int past C++'s int is refused with the same words as any count out of range (pybind11
    // said "called with (int); accepted: set_num_threads(n: int)")
    const std::int64_t v = int64_arg(n, "set_num_threads", "n");
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      throw Error("set_num_threads: expected 1 to 1024 threads, got " + std::to_string(v));
    set_num_threads(static_cast<int>(v));
  }, py::arg("n"),
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
