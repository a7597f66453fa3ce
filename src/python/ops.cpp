// The functional ops of bitgrad/ops.hpp as bitgrad.<op>: each takes the Python caller's site
// (op traces, anomaly reports) and runs with the GIL released.
#include <pybind11/functional.h>

#include "python/bind.hpp"
#include "python/pymodule.hpp"

namespace bitgrad::python {
namespace {

Reduction parse_reduction(const std::string& r) {
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  detail::fail("loss", "reduction is '", r, "'; expected one of mean, sum, none");
}

Tensor opt_tensor(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

}  // namespace

py::object max_or_min(const char* op, const Tensor& x, std::optional<int> axis, bool keepdim) {
  const bool is_max = std::string(op) == "max";
  const CallSite site = py_site();
  if (!axis) return py::cast(nogil([&] { return is_max ? max(x, site) : min(x, site); }));
  // the named tuple types, made once and kept for the interpreter's life (never destroyed after it)
  static py::object* types[2] = {nullptr, nullptr};
  py::object*& type = types[is_max ? 0 : 1];
  if (!type) type = new py::object(py::module_::import("collections").attr("namedtuple")(op, py::make_tuple("values", "indices")));
  auto [v, i] = nogil([&] {
    return is_max ? std::pair{max(x, *axis, keepdim, site), argmax(x, *axis, keepdim, site)}
                  : std::pair{min(x, *axis, keepdim, site), argmin(x, *axis, keepdim, site)};
  });
  return (*type)(v, i);
}

void init_ops(py::module_& m) {
  using TT = Tensor (*)(const Tensor&, const Tensor&, CallSite);
  using TS = Tensor (*)(const Tensor&, double, CallSite);
  using T1 = Tensor (*)(const Tensor&, CallSite);
  auto tt = [&m](const char* name, TT f, const char* doc) {
    m.def(name, [f](const Tensor& a, const Tensor& b) {
      const CallSite site = py_site();
      return nogil([&] { return f(a, b, site); });
    }, py::arg("a"), py::arg("b"), doc);
  };
  auto ts = [&m](const char* name, TS f) {
    m.def(name, [f](const Tensor& a, double s) {
      const CallSite site = py_site();
      return nogil([&] { return f(a, s, site); });
    }, py::arg("a"), py::arg("b"));
  };
  auto t1 = [&m](const char* name, T1 f, const char* doc) {
    m.def(name, [f](const Tensor& x) {
      const CallSite site = py_site();
      return nogil([&] { return f(x, site); });
    }, py::arg("x"), doc);
  };
  // the lines of bitgrad/op_list.hpp
#define BITGRAD_OPLIST_BIND_BINARY(name, scalar, doc) \
  tt(#name, &name, doc);                              \
  BITGRAD_OPLIST_IF(scalar)(ts(#name, &name);)
  BITGRAD_BINARY_OPS(BITGRAD_OPLIST_BIND_BINARY)
#undef BITGRAD_OPLIST_BIND_BINARY
#define BITGRAD_OPLIST_BIND_UNARY(name, grad, cost, lo, hi, method, torch, doc) \
  BITGRAD_OPLIST_IF_OP(grad)(t1(#name, &name, doc);)
  BITGRAD_UNARY_OPS(BITGRAD_OPLIST_BIND_UNARY)
#undef BITGRAD_OPLIST_BIND_UNARY
  // (name, lo, hi, torch oracle) of each unary op: tests/python/test_parity_ops.py makes a case of each
  py::list unary_ops;
#define BITGRAD_OPLIST_DESCRIBE(name, grad, cost, lo, hi, method, torch, doc) \
  BITGRAD_OPLIST_IF_OP(grad)(unary_ops.append(py::make_tuple(#name, double(lo), double(hi), torch));)
  BITGRAD_UNARY_OPS(BITGRAD_OPLIST_DESCRIBE)
#undef BITGRAD_OPLIST_DESCRIBE
  m.attr("_unary_ops") = unary_ops;
  t1("contiguous", &contiguous, "A contiguous tensor with x's values (x itself when it is).");
  t1("norm", &norm, "L2 norm of all elements (numerics.md: sum of squares by the axis rules).");
  m.def("clamp", [](const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
    const CallSite site = py_site();
    return nogil([&] { return clamp(x, lo, hi, site); });
  }, py::arg("x"), py::arg("min") = py::none(), py::arg("max") = py::none(),
        "minimum(maximum(x, min), max); either bound may be absent; min > max gives max (ONNX's Clip).");

  // activations with parameters (BITGRAD_PARAM_OPS), comparisons, masks, cast
#define BITGRAD_OPLIST_BIND_PARAM(name, cost, nparams, a, da, b, db, lo, hi, torch, doc) \
  BITGRAD_OPLIST_BIND_PARAM_##nparams(name, a, da, b, db, doc)
#define BITGRAD_OPLIST_BIND_PARAM_1(name, a, da, b, db, doc)              \
  m.def(#name, [](const Tensor& x, double pa) {                         \
    const CallSite site = py_site();                                    \
    return nogil([&] { return name(x, pa, site); });                    \
  }, py::arg("x"), py::arg(#a) = double(da), doc);
#define BITGRAD_OPLIST_BIND_PARAM_2(name, a, da, b, db, doc)              \
  m.def(#name, [](const Tensor& x, double pa, double pb) {              \
    const CallSite site = py_site();                                    \
    return nogil([&] { return name(x, pa, pb, site); });                \
  }, py::arg("x"), py::arg(#a) = double(da), py::arg(#b) = double(db), doc);
  BITGRAD_PARAM_OPS(BITGRAD_OPLIST_BIND_PARAM)
#undef BITGRAD_OPLIST_BIND_PARAM
#undef BITGRAD_OPLIST_BIND_PARAM_1
#undef BITGRAD_OPLIST_BIND_PARAM_2
  // (name, lo, hi, torch expression in x, a, b, a's default, b's default) of each: the parity cases
  py::list param_ops;
#define BITGRAD_OPLIST_DESCRIBE(name, cost, nparams, a, da, b, db, lo, hi, torch, doc) \
  param_ops.append(py::make_tuple(#name, double(lo), double(hi), torch, double(da), double(db)));
  BITGRAD_PARAM_OPS(BITGRAD_OPLIST_DESCRIBE)
#undef BITGRAD_OPLIST_DESCRIBE
  m.attr("_param_ops") = param_ops;
  m.def("prelu", [](const Tensor& x, const Tensor& slope) {
    const CallSite site = py_site();
    return nogil([&] { return prelu(x, slope, site); });
  }, py::arg("x"), py::arg("slope"), "x where x > 0, else x * slope; slope broadcasts to x's shape (NumPy's rule, as ONNX's PRelu).");
  m.def("clamp_min", [](const Tensor& x, double lo) {
    const CallSite site = py_site();
    return nogil([&] { return clamp_min(x, lo, site); });
  }, py::arg("x"), py::arg("min"), "clamp(x, min=min).");
  m.def("clamp_max", [](const Tensor& x, double hi) {
    const CallSite site = py_site();
    return nogil([&] { return clamp_max(x, hi, site); });
  }, py::arg("x"), py::arg("max"), "clamp(x, max=max).");
#define BITGRAD_OPLIST_BIND_COMPARE(name, op, doc) \
  tt(#name, &name, doc);                           \
  ts(#name, &name);
  BITGRAD_COMPARE_OPS(BITGRAD_OPLIST_BIND_COMPARE)
#undef BITGRAD_OPLIST_BIND_COMPARE
  tt("logical_and", &logical_and, "Nonzero (NaN too) is true; a u8 mask, broadcasting.");
  tt("logical_or", &logical_or, "Nonzero (NaN too) is true; a u8 mask, broadcasting.");
  tt("logical_xor", &logical_xor, "Nonzero (NaN too) is true; a u8 mask, broadcasting.");
  t1("logical_not", &logical_not, "1 where x is zero, else 0 (a u8 mask).");
  t1("isnan", &isnan, "1 where x is NaN (a u8 mask).");
  m.def("isinf", [](const Tensor& x, bool pos, bool neg) {
    const CallSite site = py_site();
    return nogil([&] { return isinf(x, pos, neg, site); });
  }, py::arg("x"), py::arg("detect_positive") = true, py::arg("detect_negative") = true, "1 where x is +inf / -inf (a u8 mask).");
  m.def("masked_fill", [](const Tensor& x, const Tensor& mask, double value) {
    const CallSite site = py_site();
    return nogil([&] { return masked_fill(x, mask, value, site); });
  }, py::arg("x"), py::arg("mask"), py::arg("value"), "value where mask is nonzero, else x (mask broadcasts to x's shape).");
  m.def("cast", [](const Tensor& x, DType dtype) {
    const CallSite site = py_site();
    return nogil([&] { return cast(x, dtype, site); });
  }, py::arg("x"), py::arg("dtype"),
        "x converted to dtype (numerics.md §32): floats to integers truncate toward zero (NaN, infinities, out of range: an "
        "error); the gradient flows between float32 and float64.");
  m.def("where", [](const Tensor& cond, const Tensor& a, const Tensor& b) {
    const CallSite site = py_site();
    return nogil([&] { return where(cond, a, b, site); });
  }, py::arg("cond"), py::arg("a"), py::arg("b"), "a where cond is nonzero, else b (broadcasting).");

  // reductions
  m.def("sum", [](const Tensor& x, py::object axis, bool keepdim) {
    const auto axes = axes_arg(axis);
    const CallSite site = py_site();
    return nogil([&] { return axes ? sum(x, *axes, keepdim, site) : sum(x, site); });
  }, py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdim") = false, "Sum in the canonical order (numerics.md, reductions).");
  m.def("mean", [](const Tensor& x, py::object axis, bool keepdim) {
    const auto axes = axes_arg(axis);
    const CallSite site = py_site();
    return nogil([&] { return axes ? mean(x, *axes, keepdim, site) : mean(x, site); });
  }, py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdim") = false);
  for (const char* op : {"max", "min"})
    m.def(op, [op](const Tensor& x, std::optional<int> axis, bool keepdim) { return max_or_min(op, x, axis, keepdim); }, py::arg("x"),
          py::arg("axis") = py::none(), py::arg("keepdim") = false,
          "The value; along an axis, PyTorch's named tuple (values, indices), the index of the first extremum.");
  m.def("argmax", [](const Tensor& x, int axis, bool keepdim, bool select_last_index) {
    const CallSite site = py_site();
    return nogil([&] { return argmax(x, axis, keepdim, select_last_index, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("keepdim") = false, py::arg("select_last_index") = false,
        "int64 index of the first maximum (the last with select_last_index).");
  m.def("argmin", [](const Tensor& x, int axis, bool keepdim, bool select_last_index) {
    const CallSite site = py_site();
    return nogil([&] { return argmin(x, axis, keepdim, select_last_index, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("keepdim") = false, py::arg("select_last_index") = false);

  // shape
  m.def("reshape", [](const Tensor& x, const std::vector<std::int64_t>& shape) {
    const CallSite site = py_site();
    return nogil([&] { return reshape_infer(x, shape, site); });
  }, py::arg("x"), py::arg("shape"), "One dimension may be -1.");
  m.def("flatten", [](const Tensor& x, int start, int end) {
    const CallSite site = py_site();
    return nogil([&] { return flatten(x, start, end, site); });
  }, py::arg("x"), py::arg("start_dim") = 0, py::arg("end_dim") = -1);
  m.def("permute", [](const Tensor& x, const std::vector<int>& dims) {
    const CallSite site = py_site();
    return nogil([&] { return permute(x, dims, site); });
  }, py::arg("x"), py::arg("dims"));
  m.def("transpose", [](const Tensor& x, int a, int b) {
    const CallSite site = py_site();
    return nogil([&] { return transpose(x, a, b, site); });
  }, py::arg("x"), py::arg("dim0"), py::arg("dim1"));
  m.def("expand", [](const Tensor& x, const std::vector<std::int64_t>& shape) {
    const Shape s = to_shape(shape, "expand");
    const CallSite site = py_site();
    return nogil([&] { return expand(x, s, site); });
  }, py::arg("x"), py::arg("shape"), "A broadcast view.");
  m.def("slice", [](const Tensor& x, int axis, std::int64_t start, std::int64_t end, std::int64_t step) {
    const CallSite site = py_site();
    return nogil([&] { return slice(x, axis, start, end, step, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("start"), py::arg("end"), py::arg("step") = 1);
  m.def("concat", [](const std::vector<Tensor>& xs, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return concat(xs, axis, site); });
  }, py::arg("tensors"), py::arg("axis") = 0);
  m.def("cat", [](const std::vector<Tensor>& xs, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return concat(xs, axis, site); });
  }, py::arg("tensors"), py::arg("axis") = 0, "As concat.");
  m.def("index_select", [](const Tensor& x, int axis, const Tensor& index) {
    const CallSite site = py_site();
    return nogil([&] { return index_select(x, axis, index, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("index"));
  m.def("gather", [](const Tensor& x, int axis, const Tensor& index) {
    const CallSite site = py_site();
    return nogil([&] { return gather(x, axis, index, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("index"), "torch.gather semantics.");

  // linear algebra and neural-network ops
  m.def("matmul", [](const Tensor& a, const Tensor& b) {
    const CallSite site = py_site();
    return nogil([&] { return matmul(a, b, site); });
  }, py::arg("a"), py::arg("b"), "1-d and 2-d as NumPy; N-d operands are batches of matrices.");
  m.def("linear", [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b) {
    const CallSite site = py_site();
    return nogil([&] { return linear(x, w, opt_tensor(b), site); });
  }, py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), "x weightᵀ + bias; weight [out, in].");
  // conv2d, max_pool2d, avg_pool2d: ops_spatial.cpp (PyTorch's arguments)
  m.def("layer_norm", [](const Tensor& x, const std::optional<Tensor>& g, const std::optional<Tensor>& b, double eps) {
    const CallSite site = py_site();
    return nogil([&] { return layer_norm(x, opt_tensor(g), opt_tensor(b), eps, site); });
  }, py::arg("x"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5,
        "Normalises over the last dimension.");
  // batch norm
  m.def("batch_norm", [](const Tensor& x, const std::optional<Tensor>& rm, const std::optional<Tensor>& rv, const std::optional<Tensor>& w,
                         const std::optional<Tensor>& b, bool training, double momentum, double eps) {
    const CallSite site = py_site();
    return nogil([&] { return batch_norm(x, opt_tensor(rm), opt_tensor(rv), opt_tensor(w), opt_tensor(b), training, momentum, eps, site); });
  }, py::arg("x"), py::arg("running_mean") = py::none(), py::arg("running_var") = py::none(), py::arg("weight") = py::none(),
        py::arg("bias") = py::none(), py::arg("training") = false, py::arg("momentum") = 0.1, py::arg("eps") = 1e-5,
        "torch.nn.functional.batch_norm: x [N, C, *]; per channel over N and the spatial positions (numerics.md §31). "
        "training: this batch's statistics, the running ones (if given) updated in place; else the running statistics.");
  // without seed, the program's generator draws a new mask each call (pymodule.hpp)
  m.def("dropout", [](const Tensor& x, double p, bool training, std::optional<std::uint64_t> seed, std::optional<std::uint64_t> stream,
                      std::uint64_t first_index) {
    if (!training) return x;
    const CallSite site = py_site();
    if (!seed) {
      BITGRAD_CHECK(!stream, "dropout", "stream= keys a mask with seed=; without seed the generator draws a new mask each call");
      const std::int64_t rows = x.ndim() ? x.shape()[0] : 1;
      if (const auto keyed = functional_dropout_stream(rows ? x.numel() / rows : 0)) {  // inside a forward: T5
        const std::uint64_t first = keyed->second + first_index;
        return nogil([&] { return dropout(x, p, keyed->first, first, false, site); });
      }
      const rng::Stream s = draw_stream();
      return nogil([&] { return dropout(x, p, s, first_index, false, site); });
    }
    if (!stream && first_index == 0) check_fixed_dropout_seed(*seed);
    const rng::Stream s = rng::Stream(*seed, "dropout").sub(stream.value_or(0));
    return nogil([&] { return dropout(x, p, s, first_index, false, site); });
  }, py::arg("x"), py::arg("p") = 0.5, py::arg("training") = true, py::kw_only(), py::arg("seed") = py::none(), py::arg("stream") = py::none(),
        py::arg("first_index") = 0,
        "Inverted dropout: element k is kept (scaled by 1/(1-p)) when uniform(first_index + k) of the Philox stream "
        "(seed, 'dropout').sub(stream) is >= p, a pure function of its arguments; without seed, inside a forward, keyed as a "
        "dropout layer by the forward's context (its seed, step and row offset, and the call's index in the forward), so "
        "micro-batches draw the whole batch's masks; outside one, of the generator's next stream (seed, 'draw').sub(n) "
        "(bitgrad.manual_seed). seed alone (no stream, first_index) twice is an error: the same mask again. "
        "training=False: x itself.");
  m.def("round_to", [](const Tensor& x, const std::string& precision, std::optional<std::uint64_t> seed, std::uint64_t first_index) {
    const Precision p = parse_precision(precision);
    const CallSite site = py_site();
    std::optional<rng::Stream> s;
    if (seed) s.emplace(*seed, "round");
    return nogil([&] { return round_to(x, p, s ? &*s : nullptr, first_index, true, site); });
  }, py::arg("x"), py::arg("precision"), py::kw_only(), py::arg("seed") = py::none(), py::arg("first_index") = 0,
        "Every element rounded to 'bf16' or 'fp16' values (kept in x's dtype): to nearest, or stochastically from the stream "
        "(seed, 'round') when seed is given (numerics.md §24).");
  m.def("embedding", [](const Tensor& w, const Tensor& idx) {
    const CallSite site = py_site();
    return nogil([&] { return embedding(w, idx, site); });
  }, py::arg("weight"), py::arg("indices"), "weight [num, dim], int64 indices [..] -> [.., dim].");
  m.def("softmax", [](const Tensor& x, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return softmax(x, axis, site); });
  }, py::arg("x"), py::arg("axis") = -1);
  m.def("log_softmax", [](const Tensor& x, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return log_softmax(x, axis, site); });
  }, py::arg("x"), py::arg("axis") = -1);
  m.def("cross_entropy", [](const Tensor& logits, const Tensor& targets, const std::string& reduction, std::optional<int> classes_axis) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    // Sequences: bitgrad's [N, T, C] (classes last) or PyTorch's [N, C, T] (classes on axis 1),
    // told apart by the targets [N, T]; with T == C nothing tells them apart, and a guess would be
    // silently wrong half the time: classes_axis (1 or 2, -1) must say which.
    bool classes_on_1 = false;
    if (logits.ndim() == 3 && targets.defined() && targets.ndim() == 2) {
      const auto& ls = logits.shape();
      if (classes_axis) {
        BITGRAD_CHECK(*classes_axis == 1 || *classes_axis == 2 || *classes_axis == -1, "cross_entropy",
                      "classes_axis must be 1 (PyTorch's [N, C, T]) or 2 / -1 ([N, T, C]), got ", *classes_axis);
        classes_on_1 = *classes_axis == 1;
      } else {
        BITGRAD_CHECK(ls[1] != ls[2], "cross_entropy", "logits ", ls.str(), " with targets ", targets.shape().str(),
                      " are ambiguous: PyTorch's [N, C, T] and bitgrad's [N, T, C] have the same shape when T == C; say which "
                      "with classes_axis=1 (PyTorch's layout) or classes_axis=-1");
        classes_on_1 = targets.shape()[1] == ls[2];
      }
    } else if (classes_axis) {
      BITGRAD_CHECK(logits.ndim() == 2 && (*classes_axis == 1 || *classes_axis == -1), "cross_entropy",
                    "classes_axis ", *classes_axis, " for logits ", logits.shape().str(), ": [N, C] takes 1 (or -1)");
    }
    return nogil([&] { return cross_entropy(classes_on_1 ? transpose(logits, 1, 2) : logits, targets, r, site); });
  }, py::arg("logits"), py::arg("targets"), py::arg("reduction") = "mean", py::kw_only(), py::arg("classes_axis") = py::none(),
        "logits [N, C], int64 targets [N]; or sequences, logits [N, T, C] or PyTorch's [N, C, T] (told apart by targets [N, T]; "
        "classes_axis=1 or -1 when T == C) with PyTorch's reductions over every position: 'mean', 'sum' or 'none' ([N, T]).");
  m.def("mse_loss", [](const Tensor& input, const Tensor& target, const std::string& reduction) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return mse_loss(input, target, r, site); });
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
  m.def("checkpoint", [](std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params) {
    const CallSite site = py_site();
    return nogil([&] { return checkpoint(std::move(fn), x, params, site); });
  }, py::arg("fn"), py::arg("x"), py::arg("params") = std::vector<Tensor>{},
        "fn(x) without keeping its intermediates: the backward runs fn again (contract T9). Every tensor inside fn that "
        "requires grad must be x or in params.");

  // bitgrad.autograd.Function's node (src/python/bitgrad/autograd.py): backward(g) returns one
  // gradient or None per input. The callable is released with the GIL held, wherever the graph is freed.
  m.def("_custom_function", [](const std::string& name, const std::vector<Tensor>& inputs, const Tensor& y, const py::function& backward) {
    std::shared_ptr<py::function> fn(new py::function(backward), [](py::function* f) {
      py::gil_scoped_acquire gil;
      delete f;
    });
    auto bw = [fn, name](const Tensor& g) {
      py::gil_scoped_acquire gil;
      const py::object r = (*fn)(g);
      if (!py::isinstance<py::sequence>(r) || py::isinstance<py::str>(r))
        throw py::type_error(name + ".backward: expected a sequence of gradients (a bitgrad.Tensor or None each), got " +
                             std::string(py::str(py::type::of(r).attr("__name__"))));
      std::vector<Tensor> out;
      for (const py::handle h : r.cast<py::sequence>()) {
        if (h.is_none()) out.emplace_back();
        else if (py::isinstance<Tensor>(h)) out.push_back(h.cast<Tensor>());
        else
          throw py::type_error(name + ".backward: a gradient is a " + std::string(py::str(py::type::of(h).attr("__name__"))) +
                               "; expected a bitgrad.Tensor or None");
      }
      return out;
    };
    const CallSite site = py_site();
    return custom_function(name, inputs, y, bw, site);
  }, py::arg("name"), py::arg("inputs"), py::arg("y"), py::arg("backward"));

  // ---- reductions over axes, scans, more losses (numerics.md §28-§30) ----
  {
    using RF = Tensor (*)(const Tensor&, const std::vector<int>&, bool, CallSite);
    auto red = [&m](const char* name, RF f, const char* doc) {
      m.def(name, [f](const Tensor& x, py::object axis, bool keepdim) {
        const std::vector<int> axes = axes_arg(axis).value_or(std::vector<int>{});
        const CallSite site = py_site();
        return nogil([&] { return f(x, axes, keepdim, site); });
      }, py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdim") = false, doc);
    };
    red("prod", &prod, "Product over axes (None or (): all): a chain in row-major order of the reduced elements.");
    red("logsumexp", &logsumexp, "log(sum(exp(x))) over axes, shifted by the maximum (numerics.md).");
    red("sum_square", &sum_square, "Sum of squares over axes (ONNX ReduceSumSquare).");
    red("norm_l1", &norm_l1, "Sum of |x| over axes (ONNX ReduceL1).");
    red("norm_l2", &norm_l2, "sqrt of the sum of squares over axes (ONNX ReduceL2).");
    red("log_sum", &log_sum, "log(sum(x)) over axes (ONNX ReduceLogSum).");
    red("amax", &amax, "Maximum over axes (ONNX ReduceMax); the gradient goes to the first maximum.");
    red("amin", &amin, "Minimum over axes (ONNX ReduceMin).");
    red("any", &any, "uint8: 1 where some element over the axes is nonzero (NaN counts).");
    red("all", &all, "uint8: 1 where every element over the axes is nonzero.");
    using VF = Tensor (*)(const Tensor&, const std::vector<int>&, double, bool, CallSite);
    auto varf = [&m](const char* name, VF f, const char* doc) {
      m.def(name, [f](const Tensor& x, py::object axis, double correction, bool keepdim) {
        const std::vector<int> axes = axes_arg(axis).value_or(std::vector<int>{});
        const CallSite site = py_site();
        return nogil([&] { return f(x, axes, correction, keepdim, site); });
      }, py::arg("x"), py::arg("axis") = py::none(), py::arg("correction") = 1.0, py::arg("keepdim") = false, doc);
    };
    varf("var", &var, "Variance over axes: squared deviations summed by the axis rules / (count - correction).");
    varf("std", &stddev, "Standard deviation: sqrt(var).");
    using LF = Tensor (*)(const std::vector<Tensor>&, CallSite);
    auto many = [&m](const char* name, LF f, const char* doc) {
      m.def(name, [f](const std::vector<Tensor>& xs) {
        const CallSite site = py_site();
        return nogil([&] { return f(xs, site); });
      }, py::arg("xs"), doc);
    };
    many("sum_of", &sum_of, "ONNX Sum: the tensors added left to right (broadcasting).");
    many("mean_of", &mean_of, "ONNX Mean: sum_of(xs) / len(xs).");
    many("max_of", &max_of, "ONNX Max: maximum folded left to right.");
    many("min_of", &min_of, "ONNX Min: minimum folded left to right.");
  }
  m.def("cumsum", [](const Tensor& x, int axis, bool exclusive, bool reverse) {
    const CallSite site = py_site();
    return nogil([&] { return cumsum(x, axis, exclusive, reverse, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("exclusive") = false, py::arg("reverse") = false,
        "Cumulative sum along axis (ONNX CumSum): a sequential chain from +0 in the scan's direction.");
  m.def("nll_loss", [](const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, std::int64_t ignore_index,
                       const std::string& reduction) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return nll_loss(input, target, opt_tensor(weight), ignore_index, r, site); });
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
        py::arg("reduction") = "mean", "log-probabilities [N, C, d...] (classes on axis 1), int64 targets [N, d...].");
  m.def("softmax_cross_entropy", [](const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                    std::int64_t ignore_index, double label_smoothing, const std::string& reduction,
                                    bool return_log_prob) -> py::object {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    Tensor lp;
    Tensor loss = nogil([&] {
      return softmax_cross_entropy(input, target, opt_tensor(weight), ignore_index, label_smoothing, r, return_log_prob ? &lp : nullptr, site);
    });
    if (return_log_prob) return py::make_tuple(loss, lp);
    return py::cast(loss);
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
        py::arg("label_smoothing") = 0.0, py::arg("reduction") = "mean", py::arg("return_log_prob") = false,
        "PyTorch's F.cross_entropy with classes on axis 1 ([N, C, d...]), weights, ignore_index, label smoothing; "
        "return_log_prob: (loss, log_softmax) as ONNX SoftmaxCrossEntropyLoss.");
  m.def("binary_cross_entropy", [](const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                   const std::string& reduction) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return binary_cross_entropy(input, target, opt_tensor(weight), r, site); });
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("reduction") = "mean");
  m.def("binary_cross_entropy_with_logits", [](const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                               const std::optional<Tensor>& pos_weight, const std::string& reduction) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return binary_cross_entropy_with_logits(input, target, opt_tensor(weight), opt_tensor(pos_weight), r, site); });
  }, py::arg("input"), py::arg("target"), py::arg("weight") = py::none(), py::arg("pos_weight") = py::none(),
        py::arg("reduction") = "mean");
  m.def("l1_loss", [](const Tensor& input, const Tensor& target, const std::string& reduction) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return l1_loss(input, target, r, site); });
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean");
  m.def("smooth_l1_loss", [](const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return smooth_l1_loss(input, target, r, beta, site); });
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("beta") = 1.0);
  m.def("huber_loss", [](const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
    const Reduction r = parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return huber_loss(input, target, r, delta, site); });
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("delta") = 1.0);
  m.def("kl_div", [](const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
    const bool batch_mean = reduction == "batchmean";
    if (!batch_mean && reduction != "mean" && reduction != "sum" && reduction != "none")
      detail::fail("kl_div", "reduction is '", reduction, "'; expected one of mean, sum, none, batchmean");
    const Reduction r = batch_mean ? Reduction::sum : parse_reduction(reduction);
    const CallSite site = py_site();
    return nogil([&] { return kl_div(input, target, r, log_target, batch_mean, site); });
  }, py::arg("input"), py::arg("target"), py::arg("reduction") = "mean", py::arg("log_target") = false,
        "input: log-probabilities; reduction 'mean', 'sum', 'none' or 'batchmean'.");

  // autograd helpers
  m.def("grad", [](const Tensor& root, const std::vector<Tensor>& inputs, const std::optional<Tensor>& seed, bool retain_graph) {
    const std::vector<Tensor> g = nogil([&] { return autograd::grad(root, opt_tensor(seed), inputs, retain_graph); });
    py::list out;
    for (const Tensor& t : g) out.append(tensor_or_none(t));
    return out;
  }, py::arg("output"), py::arg("inputs"), py::arg("grad_output") = py::none(), py::arg("retain_graph") = false,
        "Gradients of output with respect to inputs (None where none arrives), without touching any .grad.");
  m.def("gradcheck", [](std::function<Tensor(const std::vector<Tensor>&)> f, const std::vector<Tensor>& inputs, double eps, double atol,
                        double rtol) {
    GradcheckOptions o;
    o.eps = eps;
    o.atol = atol;
    o.rtol = rtol;
    const GradcheckResult r = nogil([&] { return gradcheck(f, inputs, o); });
    py::dict d;
    d["ok"] = r.ok;
    d["message"] = r.message;
    d["max_abs_error"] = r.max_abs_error;
    d["checked"] = r.checked;
    return d;
  }, py::arg("fn"), py::arg("inputs"), py::arg("eps") = 1e-6, py::arg("atol") = 1e-6, py::arg("rtol") = 1e-5,
        "bitgrad's finite-difference check in float64: fn takes the list of inputs and returns a tensor.");
  m.def("fingerprint", [](const py::object& obj) {
    std::vector<Tensor> ts;
    if (py::hasattr(obj, "fingerprint") && !py::isinstance<Tensor>(obj)) return obj.attr("fingerprint")().cast<std::string>();
    if (py::isinstance<Tensor>(obj)) ts.push_back(obj.cast<Tensor>());
    else if (py::isinstance<py::dict>(obj))
      for (auto item : obj.cast<py::dict>()) ts.push_back(item.second.cast<Tensor>());
    else if (py::hasattr(obj, "parameters") && !py::isinstance<py::list>(obj))
      ts = obj.attr("parameters")().cast<std::vector<Tensor>>();
    else
      for (const py::handle h : obj) {
        if (py::isinstance<py::tuple>(h) && py::len(h) == 2) ts.push_back(h.cast<py::tuple>()[1].cast<Tensor>());
        else ts.push_back(h.cast<Tensor>());
      }
    return nogil([&] { return fingerprint(ts).hex(); });
  }, py::arg("tensors"),
        "XXH3-128 (hex) of tensors' dtypes, shapes and bytes, in order: a Tensor, a list of tensors or (name, tensor) pairs, a "
        "dict (a state_dict) or a module (its parameters); a Session's own fingerprint (parameters, optimizer state, steps).");
}

}  // namespace bitgrad::python
