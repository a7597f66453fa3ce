// Shared pieces of the Python module (docs/python.md): one init function per file, the
// Python caller's site for op traces, and the conversions every file needs.
#pragma once

#include <pybind11/iostream.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bitgrad/bitgrad.hpp"
#include "bitgrad/data.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/optim.hpp"
#include "bitgrad/train.hpp"

namespace bitgrad::python {

namespace py = pybind11;

void init_errors(py::module_& m);
// Sets the Python exception bitgrad's translator would raise for p (for C callbacks, which
// must not throw: the buffer protocol).
void set_python_error(std::exception_ptr p);
void init_tensor(py::module_& m);
void init_interop(py::module_& m, py::class_<Tensor>& cls);  // NumPy, the buffer protocol, DLPack
// A tensor over a NumPy array's memory (bitgrad.from_numpy), and the bitgrad dtype of a NumPy
// dtype's kind and item size (false where bitgrad has none): interop.cpp.
Tensor from_numpy(const py::object& obj);
bool dtype_of_numpy(char kind, py::ssize_t item, DType& out);
void init_hashing(py::module_& m);  // the recorder's hashing of arrays in place (hashing.cpp)
void init_ops(py::module_& m);
void init_ops_shape(py::module_& m);  // shape, index and factory ops (ops_shape.cpp)
void init_nn(py::module_& m);
void init_norm_rnn(py::module_& m);  // RMSNorm, GroupNorm, InstanceNorm, RNN/LSTM/GRU (norm_rnn.cpp)
void init_ops_spatial(py::module_& m);  // convolution, pooling, upsampling (ops_spatial.cpp)
void init_nn_spatial(py::module_& nn);  // their modules in bitgrad.nn (nn_spatial.cpp)
void init_optim(py::module_& m);
void init_data(py::module_& m);
void init_train(py::module_& m);
void init_instruments(py::module_& m);
void init_distributed(py::module_& m);  // bitgrad.distributed, the accumulation helper's combine (distributed.cpp)
void init_onnx(py::module_& m);  // bitgrad.onnx (onnx.cpp)

// Where the Python code that called an op is (file and line), for op traces and anomaly
// reports; looked up only while an op hook is installed. Call with the GIL held.
CallSite py_site();

// Runs f with the GIL released (the kernels): Python threads go on meanwhile, and the loader's
// threads may call a Python dataset.
template <class F>
auto nogil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// A shared_ptr whose deleter releases the GIL while it runs: for what joins threads that may be
// waiting for the GIL (the loader's workers calling a Python dataset).
template <class T>
std::shared_ptr<T> without_gil_on_delete(T* p) {
  return std::shared_ptr<T>(p, [](T* q) {
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      delete q;
    } else {
      delete q;
    }
  });
}

// The loader options a Python call gives (bitgrad.data.DataLoader, and data parallel's loader of
// a rank's shard, which adds world, rank and leaf_rows).
inline data::LoaderOptions loader_options(std::int64_t batch_size, bool shuffle, bool drop_last, int workers, int prefetch, std::uint64_t seed,
                                          int crop_padding, bool hflip) {
  data::LoaderOptions o;
  o.batch_size = batch_size;
  o.shuffle = shuffle;
  o.drop_last = drop_last;
  o.workers = workers;
  o.prefetch = prefetch;
  o.seed = seed;
  o.augment.crop_padding = crop_padding;
  o.augment.hflip = hflip;
  return o;
}

// A configuration argument: a bitgrad.Config, a file path or a dict (bitgrad/_config.py).
inline train::Config to_config(const py::object& c) {
  if (py::isinstance<train::Config>(c)) return c.cast<train::Config>();
  return py::module_::import("bitgrad._config").attr("load")(c).cast<train::Config>();
}

// Where a call's C++ text output goes: Python's sys.stdout (written under the GIL), or nowhere.
struct Output {
  explicit Output(bool quiet) : buf(py::module_::import("sys").attr("stdout")), os(quiet ? nullptr : &buf) {}
  py::detail::pythonbuf buf;
  std::ostream os;
};

// A Python axis argument: None (every axis), an int or a sequence of ints.
std::optional<std::vector<int>> axes_arg(const py::object& axis);
// A shape given as ints or as one sequence: f(2, 3) or f((2, 3)).
std::vector<std::int64_t> shape_arg(const py::args& args, const char* op);
// A Python int as int64, or an Error naming the op and what it is ("dimension 2").
std::int64_t int64_arg(py::handle h, const char* op, const std::string& what);
Shape to_shape(const std::vector<std::int64_t>& dims, const char* op);
// An undefined tensor becomes None.
py::object tensor_or_none(const Tensor& t);
// max / min ("max" or "min") as PyTorch's: the value; along an axis the named tuple (values,
// indices), so that `v, i = x.max(1)` unpacks what it does in PyTorch
py::object max_or_min(const char* op, const Tensor& x, std::optional<int> axis, bool keepdim);
// What a tensor argument may also be: a Python number (a 0-d tensor of `like`'s dtype).
Tensor as_tensor(const py::handle& h, const char* op);

}  // namespace bitgrad::python
