// bitgrad.Tensor: dtypes, factories, autograd members, operators, indexing and the methods that
// mirror the functional ops. Every method that computes releases the GIL.
#include <algorithm>
#include <functional>

#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

// A Python index (ints, slices with a positive step, Ellipsis, None, one 1-d int64 tensor or a
// list of ints) applied axis by axis with the differentiable view ops.
Tensor get_item(const Tensor& t, const py::object& index) {
  std::vector<py::object> items;
  if (py::isinstance<py::tuple>(index)) {
    for (const py::handle h : index.cast<py::tuple>()) items.push_back(py::reinterpret_borrow<py::object>(h));
  } else {
    items.push_back(index);
  }
  int consumed = 0, ellipses = 0, ints = 0, arrays = 0;
  for (const auto& it : items) {
    if (it.is(py::ellipsis())) ++ellipses;
    else if (!it.is_none()) ++consumed;
    if (py::isinstance<py::int_>(it) && !py::isinstance<py::bool_>(it)) ++ints;
    if (py::isinstance<py::list>(it) || py::isinstance<Tensor>(it)) ++arrays;
  }
  BITGRAD_CHECK(ellipses <= 1, "index", "at most one Ellipsis (...) in an index");
  // NumPy moves the axes of several advanced indices (lists, and ints beside them) to the front
  // and broadcasts them together; bitgrad does not, so it refuses rather than differ
  BITGRAD_CHECK(arrays <= 1 && (arrays == 0 || ints == 0), "index", "one list or tensor index at a time, and not beside an integer "
                "index (NumPy would broadcast them together); index in two steps, e.g. x[0][:, [1, 2]]");
  BITGRAD_CHECK(consumed <= t.ndim(), "index", "too many indices (", consumed, ") for a tensor of shape ", t.shape().str());
  const CallSite site = py_site();
  Tensor x = t;
  int axis = 0;                     // the axis of x the next item applies to
  std::vector<int> drop_axes;    // axes of x indexed by an int: dropped at the end
  std::vector<int> new_axes_at;  // positions in the output shape of None axes
  int out_pos = 0;
  for (const auto& it : items) {
    if (it.is(py::ellipsis())) {
      const int skip = t.ndim() - consumed;
      axis += skip;
      out_pos += skip;
      continue;
    }
    if (it.is_none()) {
      new_axes_at.push_back(out_pos++);
      continue;
    }
    const std::int64_t size = x.dim(axis);
    if (py::isinstance<py::bool_>(it)) throw py::type_error("index: a bool is not an index");
    if (py::isinstance<py::int_>(it)) {
      std::int64_t i = int64_arg(it, "index", "index");
      const std::int64_t orig = i;
      if (i < 0) i += size;
      if (i < 0 || i >= size)
        throw py::index_error("index " + std::to_string(orig) + " is out of range for axis " + std::to_string(axis) + " of size " +
                              std::to_string(size));
      x = nogil([&] { return slice(x, axis, i, i + 1, 1, site); });
      drop_axes.push_back(axis);
      ++axis;
      continue;
    }
    if (py::isinstance<py::slice>(it)) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(it.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      BITGRAD_CHECK(step > 0, "index", "slices with a negative step are not supported (got step ", step, ")");
      const Py_ssize_t len = PySlice_AdjustIndices(static_cast<Py_ssize_t>(size), &start, &stop, step);
      x = nogil([&] { return slice(x, axis, start, len > 0 ? stop : start, step, site); });
      ++axis;
      ++out_pos;
      continue;
    }
    Tensor idx;
    if (py::isinstance<Tensor>(it)) {
      idx = it.cast<Tensor>();
    } else if (py::isinstance<py::list>(it)) {
      idx = Tensor::from(it.cast<std::vector<std::int64_t>>(), Shape{static_cast<std::int64_t>(py::len(it))});
    } else {
      throw py::type_error("index: expected ints, slices, Ellipsis, None, a list of ints or a 1-d int64 tensor, got " +
                           std::string(py::str(py::type::of(it).attr("__name__"))));
    }
    BITGRAD_CHECK(idx.dtype() == DType::i64 && idx.ndim() == 1, "index", "a tensor index must be 1-d int64, got ",
                  dtype_name(idx.dtype()), " of shape ", idx.shape().str());
    x = nogil([&] { return index_select(x, axis, idx, site); });
    ++axis;
    ++out_pos;
  }
  if (drop_axes.empty() && new_axes_at.empty()) return x;
  std::vector<std::int64_t> dims;
  for (int a = 0; a < x.ndim(); ++a)
    if (std::find(drop_axes.begin(), drop_axes.end(), a) == drop_axes.end()) dims.push_back(x.dim(a));
  for (int p : new_axes_at) dims.insert(dims.begin() + std::min<std::size_t>(p, dims.size()), 1);
  return nogil([&] { return reshape(x, Shape(dims), site); });
}

Tensor reshape_args(const Tensor& t, const py::args& args) {
  const std::vector<std::int64_t> dims = shape_arg(args, "reshape");  // ints or one sequence of them; a TypeError naming them else
  const CallSite site = py_site();
  return nogil([&] { return reshape_infer(t, dims, site); });
}

}  // namespace

void init_tensor(py::module_& m) {
  py::enum_<DType> dt(m, "dtype", "Element types: float32 and float64 are differentiable; int64 holds indices and labels; uint8 "
                                  "masks; bfloat16 and float16 are storage only (Tensor.to converts).");
  dt.value("float32", DType::f32).value("float64", DType::f64).value("int64", DType::i64).value("uint8", DType::u8)
      .value("bfloat16", DType::bf16).value("float16", DType::f16).export_values();
  dt.def_property_readonly("itemsize", [](DType t) { return dtype_size(t); });
  dt.def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); });

  py::class_<Tensor> cls(m, "Tensor", py::buffer_protocol(),
                         "A strided view of a buffer, with autograd metadata. Copying the handle shares the data; clone() copies it.");
  cls.def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape().vec())); })
      .def("size", [](const Tensor& t, std::optional<int> dim) -> py::object {
             if (dim) return py::int_(t.dim(*dim));
             return py::tuple(py::cast(t.shape().vec()));
           }, py::arg("dim") = py::none())
      .def_property_readonly("ndim", &Tensor::ndim)
      .def("dim", &Tensor::ndim)
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& t) {
        if (t.ndim() == 0) throw py::type_error("len() of a 0-d tensor");
        return t.dim(0);
      })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("strides", [](const Tensor& t) { return py::tuple(py::cast(t.strides().vec())); },
                             "Strides in elements.")
      .def("is_contiguous", &Tensor::is_contiguous)
      .def_property("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool on) { t.set_requires_grad(on); })
      .def("requires_grad_", [](Tensor& t, bool on) { t.set_requires_grad(on); return t; }, py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property("grad", [](const Tensor& t) { return tensor_or_none(t.grad()); },
                    [](Tensor& t, std::optional<Tensor> g) {
                      if (g) t.set_grad(*g);
                      else t.zero_grad();
                    },
                    "The accumulated gradient of a leaf, or None. Assigning None drops it.")
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
        const char* p = autograd::producer(t);
        return *p ? py::str(p) : py::object(py::none());
      }, "Name of the op that produced this tensor (None for a leaf).")
      .def_property("label", &Tensor::label, [](Tensor& t, const std::string& s) { t.set_label(s); })
      .def("backward", [](const Tensor& t, std::optional<Tensor> gradient, bool retain_graph) {
             nogil([&] { t.backward(gradient ? *gradient : Tensor(), retain_graph); });
           }, py::arg("gradient") = py::none(), py::arg("retain_graph") = false,
           "Reverse-mode pass from this tensor (a non-scalar needs `gradient` of its shape). Leaf gradients accumulate.")
      .def("detach", &Tensor::detach, "Shares the data, no history, requires_grad False.")
      .def("zero_grad", &Tensor::zero_grad)
      .def("clone", [](const Tensor& t) { return nogil([&] { return t.contiguous_copy(); }); },
           "A contiguous copy of the data (no history).")
      .def("contiguous", [](const Tensor& t) {
        const CallSite site = py_site();
        return nogil([&] { return contiguous(t, site); });
      })
      .def("to", [](const Tensor& t, DType d) { return t.dtype() == d ? t : nogil([&] { return t.cast(d); }); }, py::arg("dtype"),
           "A copy converted to dtype (rounded to nearest; no history). The same tensor when it has that dtype.")
      .def("float", [](const Tensor& t) { return t.dtype() == DType::f32 ? t : nogil([&] { return t.cast(DType::f32); }); })
      .def("double", [](const Tensor& t) { return t.dtype() == DType::f64 ? t : nogil([&] { return t.cast(DType::f64); }); })
      .def("long", [](const Tensor& t) { return t.dtype() == DType::i64 ? t : nogil([&] { return t.cast(DType::i64); }); })
      .def("item", [](const Tensor& t) -> py::object {
        BITGRAD_CHECK(t.numel() == 1, "item", "a tensor of shape ", t.shape().str(), " has ", t.numel(), " elements, not one");
        const double v = t.item();
        if (t.dtype() == DType::i64 || t.dtype() == DType::u8) return py::int_(static_cast<std::int64_t>(v));
        return py::float_(v);
      })
      .def("tolist", [](const Tensor& t) {
        Tensor c = t.dtype() == DType::bf16 || t.dtype() == DType::f16 ? t.cast(DType::f32) : t;
        return py::module_::import("numpy").attr("asarray")(c.detach()).attr("tolist")();
      })
      .def("fill_", [](Tensor& t, double v) { t.fill_(v); return t; }, py::arg("value"), "In place (bumps the version).")
      .def("copy_", [](Tensor& t, const Tensor& src) { nogil([&] { t.copy_from(src); }); return t; }, py::arg("src"),
           "In place: the values of src (same shape and dtype).")
      .def("__str__", &Tensor::str)
      .def("__repr__", &Tensor::str)
      .def("__bool__", [](const Tensor& t) {
        BITGRAD_CHECK(t.numel() == 1, "bool", "the truth value of a tensor of ", t.numel(), " elements is ambiguous");
        return t.item() != 0;
      })
      .def("__float__", [](const Tensor& t) {
        BITGRAD_CHECK(t.numel() == 1, "float", "a tensor of ", t.numel(), " elements is not one number");
        return t.item();
      })
      .def("__int__", [](const Tensor& t) {
        BITGRAD_CHECK(t.numel() == 1, "int", "a tensor of ", t.numel(), " elements is not one number");
        return static_cast<std::int64_t>(t.item());
      })
      .def("__getitem__", &get_item)
      .def("__iter__", [](const Tensor& t) {
        if (t.ndim() == 0) throw py::type_error("iteration over a 0-d tensor");
        py::list rows;
        for (std::int64_t i = 0; i < t.dim(0); ++i) rows.append(get_item(t, py::int_(i)));
        return py::iter(rows);
      }, "The sub-tensors along the first axis (differentiable views).")
      .def("__setitem__", [](Tensor&, py::object, py::object) {
        throw py::type_error("bitgrad tensors do not support item assignment: build a new tensor (bitgrad.where, "
                             "bitgrad.concat), or write through .numpy() outside autograd");
      })
      .def("reshape", &reshape_args, "reshape(*shape): one dimension may be -1.")
      .def("view", &reshape_args, "As reshape.")
      .def("flatten", [](const Tensor& t, int start, int end) {
        const CallSite site = py_site();
        return nogil([&] { return flatten(t, start, end, site); });
      }, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("permute", [](const Tensor& t, const py::args& args) {
        std::vector<int> dims;
        if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) dims = args[0].cast<std::vector<int>>();
        else dims = args.cast<std::vector<int>>();
        const CallSite site = py_site();
        return nogil([&] { return permute(t, dims, site); });
      })
      .def("transpose", [](const Tensor& t, int a, int b) {
        const CallSite site = py_site();
        return nogil([&] { return transpose(t, a, b, site); });
      }, py::arg("dim0"), py::arg("dim1"))
      .def_property_readonly("T", [](const Tensor& t) {
        BITGRAD_CHECK(t.ndim() <= 2, "T", "only for tensors of at most 2 dimensions (got ", t.ndim(), "); use permute");
        if (t.ndim() < 2) return t;
        const CallSite site = py_site();
        return nogil([&] { return transpose(t, 0, 1, site); });
      })
      .def("expand", [](const Tensor& t, const py::args& args) {
        const Shape s = to_shape(shape_arg(args, "expand"), "expand");
        const CallSite site = py_site();
        return nogil([&] { return expand(t, s, site); });
      });

  // reductions as methods: axis None (everything), an int or a sequence
  cls.def("sum", [](const Tensor& t, py::object axis, bool keepdim) {
         const auto axes = axes_arg(axis);
         const CallSite site = py_site();
         return nogil([&] { return axes ? sum(t, *axes, keepdim, site) : sum(t, site); });
       }, py::arg("axis") = py::none(), py::arg("keepdim") = false)
      .def("mean", [](const Tensor& t, py::object axis, bool keepdim) {
        const auto axes = axes_arg(axis);
        const CallSite site = py_site();
        return nogil([&] { return axes ? mean(t, *axes, keepdim, site) : mean(t, site); });
      }, py::arg("axis") = py::none(), py::arg("keepdim") = false)
      .def("max", [](const Tensor& t, std::optional<int> axis, bool keepdim) { return max_or_min("max", t, axis, keepdim); },
           py::arg("axis") = py::none(), py::arg("keepdim") = false)
      .def("min", [](const Tensor& t, std::optional<int> axis, bool keepdim) { return max_or_min("min", t, axis, keepdim); },
           py::arg("axis") = py::none(), py::arg("keepdim") = false)
      .def("argmax", [](const Tensor& t, int axis, bool keepdim) {
        const CallSite site = py_site();
        return nogil([&] { return argmax(t, axis, keepdim, site); });
      }, py::arg("axis"), py::arg("keepdim") = false)
      .def("argmin", [](const Tensor& t, int axis, bool keepdim) {
        const CallSite site = py_site();
        return nogil([&] { return argmin(t, axis, keepdim, site); });
      }, py::arg("axis"), py::arg("keepdim") = false)
      .def("norm", [](const Tensor& t) {
        const CallSite site = py_site();
        return nogil([&] { return norm(t, site); });
      });
  // more reductions and scans as methods (axis None or (): all axes)
  {
    using RF = Tensor (*)(const Tensor&, const std::vector<int>&, bool, CallSite);
    auto red = [&cls](const char* name, RF f) {
      cls.def(name, [f](const Tensor& t, py::object axis, bool keepdim) {
        const std::vector<int> axes = axes_arg(axis).value_or(std::vector<int>{});
        const CallSite site = py_site();
        return nogil([&] { return f(t, axes, keepdim, site); });
      }, py::arg("axis") = py::none(), py::arg("keepdim") = false);
    };
    red("prod", &prod);
    red("logsumexp", &logsumexp);
    red("amax", &amax);
    red("amin", &amin);
    red("any", &any);
    red("all", &all);
    using VF = Tensor (*)(const Tensor&, const std::vector<int>&, double, bool, CallSite);
    auto varf = [&cls](const char* name, VF f) {
      cls.def(name, [f](const Tensor& t, py::object axis, double correction, bool keepdim) {
        const std::vector<int> axes = axes_arg(axis).value_or(std::vector<int>{});
        const CallSite site = py_site();
        return nogil([&] { return f(t, axes, correction, keepdim, site); });
      }, py::arg("axis") = py::none(), py::arg("correction") = 1.0, py::arg("keepdim") = false);
    };
    varf("var", &var);
    varf("std", &stddev);
    cls.def("cumsum", [](const Tensor& t, int axis, bool exclusive, bool reverse) {
      const CallSite site = py_site();
      return nogil([&] { return cumsum(t, axis, exclusive, reverse, site); });
    }, py::arg("axis"), py::arg("exclusive") = false, py::arg("reverse") = false);
  }

#define BITGRAD_UNARY_METHOD(name)                     \
  cls.def(#name, [](const Tensor& t) {                 \
    const CallSite site = py_site();                   \
    return nogil([&] { return ::bitgrad::name(t, site); }); \
  });
#define BITGRAD_OPLIST_METHOD(name, grad, cost, lo, hi, method, ...) BITGRAD_OPLIST_IF(method)(BITGRAD_UNARY_METHOD(name))
  BITGRAD_UNARY_OPS(BITGRAD_OPLIST_METHOD)  // the lines of bitgrad/op_list.hpp with method 1
#undef BITGRAD_OPLIST_METHOD
#undef BITGRAD_UNARY_METHOD
  cls.def("clamp", [](const Tensor& t, std::optional<double> lo, std::optional<double> hi) {
       const CallSite site = py_site();
       return nogil([&] { return clamp(t, lo, hi, site); });
     }, py::arg("min") = py::none(), py::arg("max") = py::none())
      .def("softmax", [](const Tensor& t, int axis) {
        const CallSite site = py_site();
        return nogil([&] { return softmax(t, axis, site); });
      }, py::arg("axis") = -1)
      .def("log_softmax", [](const Tensor& t, int axis) {
        const CallSite site = py_site();
        return nogil([&] { return log_softmax(t, axis, site); });
      }, py::arg("axis") = -1)
      .def("matmul", [](const Tensor& a, const Tensor& b) {
        const CallSite site = py_site();
        return nogil([&] { return matmul(a, b, site); });
      });

  // operators: a tensor with a tensor (broadcasting) or with a Python number
  auto binary = [](Tensor (*tt)(const Tensor&, const Tensor&, CallSite), Tensor (*ts)(const Tensor&, double, CallSite)) {
    return [tt, ts](const Tensor& a, const py::object& b) -> py::object {
      const CallSite site = py_site();
      if (py::isinstance<Tensor>(b)) {
        const Tensor& bt = b.cast<const Tensor&>();
        return py::cast(nogil([&] { return tt(a, bt, site); }));
      }
      if (py::isinstance<py::float_>(b) || (py::isinstance<py::int_>(b) && !py::isinstance<py::bool_>(b))) {
        const double s = b.cast<double>();
        return py::cast(nogil([&] { return ts(a, s, site); }));
      }
      return py::reinterpret_borrow<py::object>(Py_NotImplemented);
    };
  };
  auto inplace = [](const char* op, std::function<py::object(const Tensor&, const py::object&)> f) {
    return [op, f](Tensor& a, const py::object& b) -> py::object {
      if (grad_enabled() && a.requires_grad())
        throw StateError(std::string("x ") + op + " y: in place on a tensor that requires grad (" + (a.is_leaf() ? "a leaf, such as a parameter" : "recorded by autograd") +
                         "); PyTorch refuses it too for a leaf: update parameters inside `with bitgrad.no_grad():`, or write x = x " + std::string(op).substr(0, 1) + " y");
      // y's gradient would be dropped where PyTorch records the op (h = zeros(...); h += layer(x))
      if (grad_enabled() && py::isinstance<Tensor>(b) && b.cast<const Tensor&>().requires_grad())
        throw StateError(std::string("x ") + op + " y: y requires grad, and bitgrad's autograd records no in-place arithmetic, so its "
                         "gradient would be lost; write x = x " + std::string(op).substr(0, 1) + " y");
      py::object r = f(a, b);
      if (r.is(py::reinterpret_borrow<py::object>(Py_NotImplemented))) return r;
      const Tensor& rt = r.cast<const Tensor&>();
      if (rt.shape() != a.shape() || rt.dtype() != a.dtype())
        throw Error(std::string("x ") + op + " y: the result " + rt.shape().str() + " " + dtype_name(rt.dtype()) + " does not fit x " + a.shape().str() + " " +
                         dtype_name(a.dtype()) + " in place (PyTorch refuses a broadcast that grows x, too)");
      nogil([&] { a.copy_from(rt); });
      return py::cast(a);
    };
  };
  cls.def("__add__", binary(&add, &add))
      .def("__radd__", binary(&add, &add))
      .def("__sub__", binary(&sub, &sub))
      .def("__rsub__", [](const Tensor& a, const py::object& b) -> py::object {
        if (!(py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b))) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        const double s = b.cast<double>();
        const CallSite site = py_site();
        return py::cast(nogil([&] { return rsub(s, a, site); }));
      })
      .def("__mul__", binary(&mul, &mul))
      .def("__rmul__", binary(&mul, &mul))
      .def("__truediv__", binary(&div, &div))
      .def("__rtruediv__", [](const Tensor& a, const py::object& b) -> py::object {
        if (!(py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b))) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        const double s = b.cast<double>();
        const CallSite site = py_site();
        return py::cast(nogil([&] { return rdiv(s, a, site); }));
      })
      .def("__pow__", binary(&pow, &pow))
      .def("pow", binary(&pow, &pow))
      .def("__rpow__", [](const Tensor& a, const py::object& b) -> py::object {
        if (!(py::isinstance<py::float_>(b) || py::isinstance<py::int_>(b))) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        const Tensor base = Tensor::scalar(b.cast<double>(), a.dtype());
        const CallSite site = py_site();
        return py::cast(nogil([&] { return pow(base, a, site); }));
      })
      // x += y, x -= y, x *= y, x /= y change x in place, as PyTorch's (never a new tensor bound to
      // the name, which left a parameter unchanged): allowed where nothing is recorded (no_grad, or
      // a tensor without requires_grad); otherwise an error, as PyTorch's for a leaf that requires grad
      // (bitgrad's autograd records no in-place arithmetic: a non-leaf's gradient would be wrong)
      .def("__iadd__", inplace("+=", binary(&add, &add)))
      .def("__isub__", inplace("-=", binary(&sub, &sub)))
      .def("__imul__", inplace("*=", binary(&mul, &mul)))
      .def("__itruediv__", inplace("/=", binary(&div, &div)))
      .def("__matmul__", [](const Tensor& a, const Tensor& b) {
        const CallSite site = py_site();
        return nogil([&] { return matmul(a, b, site); });
      })
      .def("__neg__", [](const Tensor& a) {
        const CallSite site = py_site();
        return nogil([&] { return neg(a, site); });
      })
      .def("__pos__", [](const Tensor& a) { return a; })
      // comparisons: uint8 masks, no gradient (== and != keep Python's identity: a Tensor stays hashable)
      .def("__lt__", binary(&lt, &lt))
      .def("__le__", binary(&le, &le))
      .def("__gt__", binary(&gt, &gt))
      .def("__ge__", binary(&ge, &ge))
      .def("masked_fill", [](const Tensor& t, const Tensor& mask, double value) {
        const CallSite site = py_site();
        return nogil([&] { return masked_fill(t, mask, value, site); });
      }, py::arg("mask"), py::arg("value"));

  // factories
  m.def("zeros", [](const py::args& shape, DType dtype, bool requires_grad) {
    Tensor t = Tensor::zeros(to_shape(shape_arg(shape, "zeros"), "zeros"), dtype);
    return requires_grad ? t.set_requires_grad(true) : t;
  }, py::kw_only(), py::arg("dtype") = DType::f32, py::arg("requires_grad") = false, "zeros(*shape, dtype=float32, requires_grad=False)");
  m.def("ones", [](const py::args& shape, DType dtype, bool requires_grad) {
    Tensor t = Tensor::ones(to_shape(shape_arg(shape, "ones"), "ones"), dtype);
    return requires_grad ? t.set_requires_grad(true) : t;
  }, py::kw_only(), py::arg("dtype") = DType::f32, py::arg("requires_grad") = false);
  m.def("empty", [](const py::args& shape, DType dtype) {
    return Tensor::empty(to_shape(shape_arg(shape, "empty"), "empty"), dtype);
  }, py::kw_only(), py::arg("dtype") = DType::f32, "Uninitialised memory (from the pool).");
  m.def("full", [](const std::vector<std::int64_t>& shape, double value, DType dtype, bool requires_grad) {
    Tensor t = Tensor::full(to_shape(shape, "full"), value, dtype);
    return requires_grad ? t.set_requires_grad(true) : t;
  }, py::arg("shape"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = DType::f32, py::arg("requires_grad") = false);
  m.def("arange", [](std::int64_t n, DType dtype) {
    BITGRAD_CHECK(n >= 0, "arange", "n is ", n, "; expected >= 0");
    return Tensor::arange(n, dtype);
  }, py::arg("n"), py::kw_only(), py::arg("dtype") = DType::f32, "0, 1, ..., n-1.");
  m.def("scalar", [](double v, DType dtype) { return Tensor::scalar(v, dtype); }, py::arg("value"), py::kw_only(),
        py::arg("dtype") = DType::f32, "A 0-d tensor.");

  // grad mode
  struct NoGrad {
    std::vector<bool> prev;
  };
  py::class_<NoGrad>(m, "no_grad", "Context manager (and decorator target) that disables recording: with bitgrad.no_grad(): ...")
      .def(py::init<>())
      .def("__enter__", [](NoGrad& g) {
        g.prev.push_back(grad_enabled());
        set_grad_enabled(false);
        return &g;
      }, py::return_value_policy::reference)
      .def("__exit__", [](NoGrad& g, py::object, py::object, py::object) {
        set_grad_enabled(g.prev.empty() ? true : g.prev.back());
        if (!g.prev.empty()) g.prev.pop_back();
        return false;
      });
  m.def("is_grad_enabled", &grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, py::arg("mode"));

  init_interop(m, cls);
  init_hashing(m);
}

}  // namespace bitgrad::python
