// Zero-copy interchange: Tensor.numpy(), the buffer protocol, bitgrad.from_numpy, and DLPack
// (__dlpack__ / __dlpack_device__ / bitgrad.from_dlpack; the unversioned capsule of DLPack 0.6,
// which NumPy 1.24 and PyTorch 1.13 speak). A buffer shared with another library keeps its
// owner alive (a NumPy array, a DLPack producer) and is released with the GIL taken.
#include <dlpack/dlpack.h>
#include <cstring>
#include <pybind11/numpy.h>

#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

// numpy's type string of a dtype; bfloat16 has none
const char* numpy_format(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::f16: return "float16";
    case DType::bf16: return nullptr;
  }
  return nullptr;
}

const char* buffer_format(DType t) {
  switch (t) {
    case DType::f32: return "f";
    case DType::f64: return "d";
    case DType::i64: return "q";
    case DType::u8: return "B";
    case DType::f16: return "e";
    case DType::bf16: return nullptr;
  }
  return nullptr;
}

char* first_element(const Tensor& t) {
  return static_cast<char*>(t.storage()->data()) + t.offset() * static_cast<std::int64_t>(dtype_size(t.dtype()));
}

void check_exportable(const Tensor& t, const char* what) {
  BITGRAD_CHECK_STATE(!t.requires_grad(), what, "the tensor requires grad, and writes through a shared view would bypass autograd; "
                      "call .detach() first (it shares the data)");
}

// The Python object `o` owns a buffer: released (with the GIL) when the last tensor on it goes.
// Not at all once the interpreter is finalizing: the object goes with it.
std::shared_ptr<void> python_owner(py::object o) {
  return std::shared_ptr<void>(o.release().ptr(), [](void* p) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
    const PyGILState_STATE s = PyGILState_Ensure();
    Py_DECREF(static_cast<PyObject*>(p));
    PyGILState_Release(s);
  });
}

// A tensor over `extent` bytes at `base` with element strides (>= 0).
Tensor wrap(void* base, DType dtype, const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
            std::shared_ptr<void> owner) {
  std::int64_t last = 0;
  bool empty = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) empty = true;
    else last += (shape[i] - 1) * strides[i];
  }
  const std::size_t bytes = empty ? 0 : static_cast<std::size_t>(last + 1) * dtype_size(dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::wrap(base, bytes, std::move(owner));
  impl->shape = Shape(shape);
  impl->strides = Shape(strides);
  impl->dtype = dtype;
  return Tensor(impl);
}

py::array to_numpy(const Tensor& t) {
  check_exportable(t, "numpy");
  const char* fmt = numpy_format(t.dtype());
  BITGRAD_CHECK(fmt != nullptr, "numpy", "NumPy has no bfloat16; convert first: t.to(bitgrad.float32).numpy()");
  const std::int64_t size = static_cast<std::int64_t>(dtype_size(t.dtype()));
  std::vector<py::ssize_t> shape, strides;
  for (int i = 0; i < t.ndim(); ++i) {
    shape.push_back(t.dim(i));
    strides.push_back(t.strides()[i] * size);
  }
  // the base (a handle to the tensor) keeps the storage alive: no copy
  return py::array(py::dtype(fmt), shape, strides, first_element(t), py::cast(t));
}

}  // namespace

// The bitgrad dtype of a NumPy dtype (kind, item size); false where bitgrad has none.
bool dtype_of_numpy(char kind, py::ssize_t item, DType& out) {
  if (kind == 'f' && item == 4) out = DType::f32;
  else if (kind == 'f' && item == 8) out = DType::f64;
  else if (kind == 'f' && item == 2) out = DType::f16;
  else if (kind == 'i' && item == 8) out = DType::i64;
  else if ((kind == 'u' || kind == 'b') && item == 1) out = DType::u8;
  else return false;
  return true;
}

Tensor from_numpy(const py::object& obj) {
  if (!py::isinstance<py::array>(obj))
    throw py::type_error("from_numpy: expected a numpy.ndarray, got " + std::string(py::str(py::type::of(obj).attr("__name__"))) +
                         " (bitgrad.tensor(x) copies any array-like)");
  py::array a = py::reinterpret_borrow<py::array>(obj);
  const py::dtype d = a.dtype();
  const char kind = d.kind();
  const auto item = d.itemsize();
  DType dtype;
  if (!dtype_of_numpy(kind, item, dtype))
    throw Error("from_numpy: dtype " + std::string(py::str(py::handle(d))) + " has no bitgrad dtype (float32, float64, float16, int64, uint8, bool); "
                "convert it first, e.g. a.astype(numpy.float32)");
  const char order = d.attr("byteorder").cast<std::string>()[0];
  BITGRAD_CHECK(order == '=' || order == '|' || order == '<', "from_numpy", "the array is big-endian; convert it with a.astype(a.dtype.newbyteorder('='))");
  BITGRAD_CHECK(a.ndim() <= kMaxDims, "from_numpy", "the array has ", a.ndim(), " dimensions; bitgrad tensors have at most ", kMaxDims);
  const int flags = a.flags();
  BITGRAD_CHECK(flags & py::detail::npy_api::NPY_ARRAY_ALIGNED_, "from_numpy", "the array's data is not aligned to its element size; bitgrad.tensor(a) copies it");
  BITGRAD_CHECK(a.writeable(), "from_numpy", "the array is read-only, and bitgrad may write to a tensor in place (optimizers); "
                "bitgrad.tensor(a) copies it");
  std::vector<std::int64_t> shape, strides;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    const py::ssize_t st = a.strides(i);
    BITGRAD_CHECK(st >= 0 && st % item == 0, "from_numpy", "axis ", i, " has stride ", st, " bytes; bitgrad views need non-negative strides "
                  "that are multiples of the element size (", item, "); bitgrad.tensor(a) copies it");
    shape.push_back(a.shape(i));
    strides.push_back(st / item);
  }
  return wrap(a.mutable_data(), dtype, shape, strides, python_owner(obj));
}

namespace {

// ---- DLPack -----------------------------------------------------------------------------------

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::u8: return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

DType from_dl_dtype(DLDataType d) {
  BITGRAD_CHECK(d.lanes == 1, "from_dlpack", "vector dtypes (lanes ", d.lanes, ") have no bitgrad dtype");
  if (d.code == kDLFloat && d.bits == 32) return DType::f32;
  if (d.code == kDLFloat && d.bits == 64) return DType::f64;
  if (d.code == kDLFloat && d.bits == 16) return DType::f16;
  if (d.code == kDLBfloat && d.bits == 16) return DType::bf16;
  if (d.code == kDLInt && d.bits == 64) return DType::i64;
  if (d.code == kDLUInt && d.bits == 8) return DType::u8;
  detail::fail("from_dlpack", "DLPack dtype (code ", int(d.code), ", bits ", int(d.bits),
               ") has no bitgrad dtype (float32, float64, float16, bfloat16, int64, uint8, bool)");
}

struct Exported {
  Tensor t;
  std::vector<std::int64_t> shape, strides;
  DLManagedTensor managed{};
};

void capsule_destructor(PyObject* cap) {
  // a capsule nobody consumed still owns its tensor
  if (!PyCapsule_IsValid(cap, "dltensor")) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (m && m->deleter) m->deleter(m);
}

py::capsule to_dlpack(const Tensor& t, const py::object& stream) {
  check_exportable(t, "__dlpack__");
  BITGRAD_CHECK(stream.is_none(), "__dlpack__", "bitgrad tensors live on the CPU; stream must be None");
  auto* e = new Exported{t, t.shape().vec(), t.strides().vec(), {}};
  DLTensor& d = e->managed.dl_tensor;
  d.data = first_element(t);
  d.byte_offset = 0;
  d.device = {kDLCPU, 0};
  d.ndim = t.ndim();
  d.dtype = dl_dtype(t.dtype());
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); };
  PyObject* cap = PyCapsule_New(&e->managed, "dltensor", &capsule_destructor);
  if (!cap) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

Tensor from_dlpack(const py::object& obj) {
  py::object cap = obj;
  if (py::hasattr(obj, "__dlpack__")) {
    if (py::hasattr(obj, "__dlpack_device__")) {
      const auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
      BITGRAD_CHECK(dev.first == kDLCPU, "from_dlpack", "the tensor lives on DLPack device type ", dev.first,
                    "; bitgrad reads CPU memory only (move it with .cpu() first)");
    }
    cap = obj.attr("__dlpack__")();
  }
  if (!PyCapsule_IsValid(cap.ptr(), "dltensor"))
    throw py::type_error("from_dlpack: expected an object with __dlpack__ or an unconsumed 'dltensor' capsule, got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  const DLTensor& d = m->dl_tensor;
  BITGRAD_CHECK(d.device.device_type == kDLCPU, "from_dlpack", "the tensor lives on DLPack device type ", int(d.device.device_type),
                "; bitgrad reads CPU memory only");
  BITGRAD_CHECK(d.ndim >= 0 && d.ndim <= kMaxDims, "from_dlpack", "the tensor has ", d.ndim, " dimensions; at most ", kMaxDims);
  const DType dtype = from_dl_dtype(d.dtype);
  std::vector<std::int64_t> shape(d.shape, d.shape + d.ndim), strides(d.ndim);
  if (d.strides) {
    for (int i = 0; i < d.ndim; ++i) {
      BITGRAD_CHECK(d.strides[i] >= 0, "from_dlpack", "axis ", i, " has stride ", d.strides[i], "; bitgrad views need strides >= 0");
      strides[i] = d.strides[i];
    }
  } else {
    std::int64_t s = 1;
    for (int i = d.ndim - 1; i >= 0; --i) {
      strides[i] = s;
      s *= shape[i];
    }
  }
  for (int i = 0; i < d.ndim; ++i) BITGRAD_CHECK(shape[i] >= 0, "from_dlpack", "dimension ", i, " is ", shape[i]);
  void* base = static_cast<char*>(d.data) + d.byte_offset;
  // consumed: the capsule no longer owns it, the tensor's storage does
  PyCapsule_SetName(cap.ptr(), "used_dltensor");
  PyCapsule_SetDestructor(cap.ptr(), nullptr);
  std::shared_ptr<void> owner(m, [](void* p) {
    auto* mm = static_cast<DLManagedTensor*>(p);
    if (!mm->deleter || !Py_IsInitialized() || _Py_IsFinalizing()) return;
    const PyGILState_STATE s = PyGILState_Ensure();  // a producer's deleter may touch Python objects (NumPy's does)
    mm->deleter(mm);
    PyGILState_Release(s);
  });
  return wrap(base, dtype, shape, strides, std::move(owner));
}

// What a Py_buffer of a tensor points to: its shape and strides in bytes, and the tensor.
struct BufferView {
  Tensor t;
  std::vector<Py_ssize_t> shape, strides;
};

extern "C" int get_buffer(PyObject* obj, Py_buffer* view, int flags) {
  try {
    const Tensor& t = py::handle(obj).cast<const Tensor&>();
    check_exportable(t, "numpy");
    const char* fmt = buffer_format(t.dtype());
    BITGRAD_CHECK(fmt != nullptr, "buffer", "the buffer protocol has no bfloat16; convert first: t.to(bitgrad.float32)");
    const Py_ssize_t size = static_cast<Py_ssize_t>(dtype_size(t.dtype()));
    auto* b = new BufferView{t, {}, {}};
    for (int i = 0; i < t.ndim(); ++i) {
      b->shape.push_back(t.dim(i));
      b->strides.push_back(t.strides()[i] * size);
    }
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !t.is_contiguous()) {
      delete b;
      PyErr_SetString(PyExc_BufferError, "buffer: the tensor is strided and the consumer asked for a contiguous buffer");
      return -1;
    }
    std::memset(view, 0, sizeof(Py_buffer));
    view->obj = obj;
    Py_INCREF(obj);
    view->buf = first_element(t);
    view->itemsize = size;
    view->len = size * t.numel();
    view->readonly = 0;
    view->ndim = t.ndim();
    view->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? const_cast<char*>(fmt) : nullptr;
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? b->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? b->strides.data() : nullptr;
    view->internal = b;
    return 0;
  } catch (...) {
    set_python_error(std::current_exception());
    return -1;
  }
}

extern "C" void release_buffer(PyObject*, Py_buffer* view) { delete static_cast<BufferView*>(view->internal); }

}  // namespace

void init_interop(py::module_& m, py::class_<Tensor>& cls) {
  cls.def("numpy", &to_numpy,
          "A NumPy array over the same memory (no copy; the array keeps the tensor alive). Writes through it bypass autograd, so "
          "a tensor that requires grad is refused (detach it). bfloat16 has no NumPy dtype.");
  cls.def("__array__", [](const Tensor& t, py::object dtype) -> py::object {
    py::array a = to_numpy(t);
    if (dtype.is_none()) return a;
    return a.attr("astype")(dtype);
  }, py::arg("dtype") = py::none());
  // The buffer protocol by hand: pybind11 2.10 calls a def_buffer function from C without
  // catching, so a refusal (a tensor that requires grad, bfloat16) would end the process.
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  type->tp_as_buffer->bf_getbuffer = &get_buffer;
  type->tp_as_buffer->bf_releasebuffer = &release_buffer;
  cls.def("__dlpack__", &to_dlpack, py::arg("stream") = py::none(),
          "A DLPack capsule over the same memory (no copy), for torch.from_dlpack / numpy.from_dlpack.");
  cls.def("__dlpack_device__", [](const Tensor&) { return py::make_tuple(static_cast<int>(kDLCPU), 0); });
  cls.def_property_readonly("data_ptr", [](const Tensor& t) { return reinterpret_cast<std::uintptr_t>(first_element(t)); },
                            "Address of the first element (tests compare it to show that no copy was made).");
  m.def("from_numpy", &from_numpy, py::arg("array"),
        "A tensor over the array's memory (no copy): float32/64, float16, int64, uint8 or bool; aligned, writeable, native byte "
        "order, strides >= 0. Anything else is refused with the reason (bitgrad.tensor copies).");
  m.def("from_dlpack", &from_dlpack, py::arg("tensor"),
        "A tensor over another library's CPU tensor (an object with __dlpack__, e.g. a torch.Tensor or numpy array, or a "
        "'dltensor' capsule), without a copy.");
}

}  // namespace bitgrad::python
