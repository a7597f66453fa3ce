// The shape, index and factory ops as bitgrad.<op> (bitgrad/ops.hpp, "shape and
// index, more"), and the Tensor methods PyTorch users reach for among them (squeeze, unsqueeze,
// repeat, flip, tril, triu, split, chunk, topk, sort). Each takes the Python caller's site and runs with the GIL released.
#include "python/bind.hpp"
#include "python/pymodule.hpp"

namespace bitgrad::python {
namespace {

PadMode parse_pad_mode(const std::string& m) {
  if (m == "constant") return PadMode::constant;
  if (m == "reflect") return PadMode::reflect;
  if (m == "edge" || m == "replicate") return PadMode::edge;
  detail::fail("pad", "mode is '", m, "'; expected one of constant, reflect, edge (or replicate)");
}

ScatterReduction parse_scatter_reduction(const std::string& r, const char* op) {
  if (r == "none") return ScatterReduction::none;
  if (r == "add" || r == "sum") return ScatterReduction::add;
  detail::fail(op, "reduction is '", r, "'; expected none or add");
}

std::vector<int> axes_or_empty(const py::object& axis) {
  const auto a = axes_arg(axis);
  return a ? *a : std::vector<int>{};
}

py::list tensor_list(const std::vector<Tensor>& ts) {
  py::list l;
  for (const Tensor& t : ts) l.append(t);
  return l;
}

// a Philox stream of the module's random factories: (seed, purpose).sub(stream)
rng::Stream factory_stream(std::uint64_t seed, const char* purpose, std::uint64_t stream) {
  return rng::Stream(seed, purpose).sub(stream);
}
// seed=None draws from the program's generator (a new stream each call)
rng::Stream factory_stream(std::optional<std::uint64_t> seed, const char* purpose, std::uint64_t stream) {
  if (!seed) {
    BITGRAD_CHECK(stream == 0, purpose, "stream= keys values with seed=; without seed the generator draws new values each call");
    return draw_stream();
  }
  return factory_stream(*seed, purpose, stream);
}

// torch.split: parts of one size (an int; the last smaller) or of the listed sizes
py::list split_py(const Tensor& x, const py::object& sizes, int axis) {
  std::vector<Tensor> parts;
  const CallSite site = py_site();
  if (py::isinstance<py::int_>(sizes)) {
    const std::int64_t each = int64_arg(sizes, "split", "the split size");
    BITGRAD_CHECK(each >= 1, "split", "split size is ", each, "; expected >= 1");
    BITGRAD_CHECK(x.defined(), "split", "the input is undefined");
    const std::int64_t n = x.shape()[x.shape().normalize_axis(axis, "split")];
    std::vector<std::int64_t> s;
    for (std::int64_t at = 0; at < n; at += each) s.push_back(std::min(each, n - at));
    if (s.empty()) s.push_back(0);
    parts = nogil([&] { return split(x, s, axis, site); });
  } else {
    const auto s = sizes.cast<std::vector<std::int64_t>>();
    parts = nogil([&] { return split(x, s, axis, site); });
  }
  return tensor_list(parts);
}

py::tuple topk_py(const Tensor& x, std::int64_t k, int axis, bool largest, bool sorted) {
  const CallSite site = py_site();
  const ValuesIndices r = nogil([&] { return topk(x, k, axis, largest, sorted, site); });
  return py::make_tuple(r.values, r.indices);
}

py::tuple sort_py(const Tensor& x, int axis, bool descending) {
  const CallSite site = py_site();
  const ValuesIndices r = nogil([&] { return sort(x, axis, descending, site); });
  return py::make_tuple(r.values, r.indices);
}

}  // namespace

void init_ops_shape(py::module_& m) {
  m.def("squeeze", [](const Tensor& x, const py::object& axis) {
    const std::vector<int> axes = axes_or_empty(axis);
    const CallSite site = py_site();
    return nogil([&] { return squeeze(x, axes, site); });
  }, py::arg("x"), py::arg("axis") = py::none(), "Removes the given axes (each of size 1); None: every axis of size 1.");
  m.def("unsqueeze", [](const Tensor& x, const py::object& axis) {
    const std::vector<int> axes = axes_or_empty(axis);
    const CallSite site = py_site();
    return nogil([&] { return unsqueeze(x, axes, site); });
  }, py::arg("x"), py::arg("axis"), "Inserts axes of size 1 (an int or a list; positions in the result).");
  m.def("stack", [](const std::vector<Tensor>& xs, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return stack(xs, axis, site); });
  }, py::arg("tensors"), py::arg("axis") = 0, "The tensors (one shape) along a new axis.");
  m.def("split", &split_py, py::arg("x"), py::arg("split_size_or_sections"), py::arg("axis") = 0,
        "torch.split: parts of one size (an int; the last smaller) or of the listed sizes; views.");
  m.def("chunk", [](const Tensor& x, std::int64_t chunks, int axis) {
    const CallSite site = py_site();
    return tensor_list(nogil([&] { return chunk(x, chunks, axis, site); }));
  }, py::arg("x"), py::arg("chunks"), py::arg("axis") = 0, "torch.chunk: parts of ceil(size / chunks), the last smaller.");
  m.def("tile", [](const Tensor& x, const std::vector<std::int64_t>& repeats) {
    const CallSite site = py_site();
    return nogil([&] { return tile(x, repeats, site); });
  }, py::arg("x"), py::arg("repeats"), "numpy.tile / torch.tile; the backward sums each element's copies (numerics.md §27).");
  m.def("flip", [](const Tensor& x, const py::object& axis) {
    const std::vector<int> axes = axes_or_empty(axis);
    const CallSite site = py_site();
    return nogil([&] { return flip(x, axes, site); });
  }, py::arg("x"), py::arg("dims"), "Reverses the order along each of the axes.");
  m.def("pad", [](const Tensor& x, const std::vector<std::int64_t>& pads, const std::string& mode, double value) {
    const PadMode pm = parse_pad_mode(mode);
    const CallSite site = py_site();
    return nogil([&] { return pad(x, pads, pm, value, site); });
  }, py::arg("x"), py::arg("pads"), py::arg("mode") = "constant", py::arg("value") = 0.0,
        "ONNX Pad: pads = [begin of each axis..., end of each axis...] (negative crops); mode 'constant', 'reflect' or "
        "'edge' ('replicate'). Note torch.nn.functional.pad lists (begin, end) pairs from the last axis instead.");
  m.def("tril", [](const Tensor& x, std::int64_t k) {
    const CallSite site = py_site();
    return nogil([&] { return tril(x, k, site); });
  }, py::arg("x"), py::arg("diagonal") = 0, "Keeps j <= i + diagonal of the last two axes, zeros the rest.");
  m.def("triu", [](const Tensor& x, std::int64_t k) {
    const CallSite site = py_site();
    return nogil([&] { return triu(x, k, site); });
  }, py::arg("x"), py::arg("diagonal") = 0, "Keeps j >= i + diagonal of the last two axes, zeros the rest.");

  // factories
  m.def("one_hot", [](const Tensor& indices, std::int64_t depth, int axis, double off, double on, DType dtype) {
    return nogil([&] { return one_hot(indices, depth, axis, off, on, dtype); });
  }, py::arg("indices"), py::arg("num_classes"), py::kw_only(), py::arg("axis") = -1, py::arg("off") = 0.0, py::arg("on") = 1.0,
        py::arg("dtype") = DType::i64,
        "ONNX OneHot: a negative index wraps (+ num_classes), one out of range gives a row of `off`.");
  m.def("arange", [](double start, double end, double step, DType dtype) {
    return nogil([&] { return arange(start, end, step, dtype); });
  }, py::arg("start"), py::arg("end"), py::arg("step") = 1.0, py::kw_only(), py::arg("dtype") = DType::f32,
        "ONNX Range: max(ceil((end - start) / step), 0) elements start + i * step.");
  m.def("eye", [](std::int64_t n, std::optional<std::int64_t> mcols, std::int64_t k, DType dtype) {
    return eye(n, mcols ? *mcols : -1, k, dtype);
  }, py::arg("n"), py::arg("m") = py::none(), py::kw_only(), py::arg("k") = 0, py::arg("dtype") = DType::f32,
        "[n, m] with ones on the diagonal j = i + k.");
  m.def("eye_like", [](const Tensor& x, std::int64_t k, std::optional<DType> dtype) {
    BITGRAD_CHECK(x.defined(), "eye_like", "the input is undefined");
    return eye_like(x, k, dtype ? *dtype : x.dtype());
  }, py::arg("x"), py::arg("k") = 0, py::kw_only(), py::arg("dtype") = py::none(), "ONNX EyeLike: x's 2-d shape (and dtype).");
  const char* keyed =
      " Element k (row-major) is draw first_index + k of the Philox stream (seed, '%s').sub(stream): a pure function of its "
      "arguments (numerics.md §27). Without seed: the generator's next stream (seed, 'draw').sub(n) (bitgrad.manual_seed).";
  auto doc = [keyed](const char* head, const char* purpose) {
    static std::vector<std::string> keep;  // pybind11 keeps the pointer
    char buf[512];
    std::snprintf(buf, sizeof buf, keyed, purpose);
    keep.push_back(std::string(head) + buf);
    return keep.back().c_str();
  };
  m.def("randn", [](const py::args& shape, std::optional<std::uint64_t> seed, std::uint64_t stream, std::uint64_t first, DType dtype) {
    const Shape s = to_shape(shape_arg(shape, "randn"), "randn");
    return nogil([&] { return randn(s, factory_stream(seed, "randn", stream), first, dtype); });
  }, py::kw_only(), py::arg("seed") = py::none(), py::arg("stream") = 0, py::arg("first_index") = 0, py::arg("dtype") = DType::f32,
        doc("randn(*shape, seed, stream=0, first_index=0, dtype=float32): standard normal values.", "randn"));
  m.def("rand", [](const py::args& shape, std::optional<std::uint64_t> seed, std::uint64_t stream, std::uint64_t first, DType dtype) {
    const Shape s = to_shape(shape_arg(shape, "rand"), "rand");
    return nogil([&] { return rand(s, factory_stream(seed, "rand", stream), first, dtype); });
  }, py::kw_only(), py::arg("seed") = py::none(), py::arg("stream") = 0, py::arg("first_index") = 0, py::arg("dtype") = DType::f32,
        doc("rand(*shape, seed, stream=0, first_index=0, dtype=float32): uniform values in [0, 1).", "rand"));
  m.def("randn_like", [](const Tensor& x, std::optional<std::uint64_t> seed, std::uint64_t stream, std::uint64_t first) {
    return nogil([&] { return randn_like(x, factory_stream(seed, "randn", stream), first); });
  }, py::arg("x"), py::kw_only(), py::arg("seed") = py::none(), py::arg("stream") = 0, py::arg("first_index") = 0,
        doc("randn of x's shape and dtype.", "randn"));
  m.def("rand_like", [](const Tensor& x, std::optional<std::uint64_t> seed, std::uint64_t stream, std::uint64_t first) {
    return nogil([&] { return rand_like(x, factory_stream(seed, "rand", stream), first); });
  }, py::arg("x"), py::kw_only(), py::arg("seed") = py::none(), py::arg("stream") = 0, py::arg("first_index") = 0,
        doc("rand of x's shape and dtype.", "rand"));

  // scatter, N-d gather, sort, einsum
  m.def("scatter", [](const Tensor& x, int axis, const Tensor& index, const Tensor& src, const std::string& reduction) {
    const ScatterReduction r = parse_scatter_reduction(reduction, "scatter");
    const CallSite site = py_site();
    return nogil([&] { return scatter(x, axis, index, src, r, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("index"), py::arg("src"), py::arg("reduction") = "none",
        "ONNX ScatterElements / torch.scatter: src[p] written (the last write wins) or added ('add', in index order) at "
        "index[p] along axis.");
  m.def("scatter_add", [](const Tensor& x, int axis, const Tensor& index, const Tensor& src) {
    const CallSite site = py_site();
    return nogil([&] { return scatter(x, axis, index, src, ScatterReduction::add, site); });
  }, py::arg("x"), py::arg("axis"), py::arg("index"), py::arg("src"), "torch.scatter_add: added in index order (deterministic).");
  m.def("gather_nd", [](const Tensor& x, const Tensor& indices, int batch_dims) {
    const CallSite site = py_site();
    return nogil([&] { return gather_nd(x, indices, batch_dims, site); });
  }, py::arg("x"), py::arg("indices"), py::arg("batch_dims") = 0, "ONNX GatherND.");
  m.def("scatter_nd", [](const Tensor& x, const Tensor& indices, const Tensor& updates, const std::string& reduction) {
    const ScatterReduction r = parse_scatter_reduction(reduction, "scatter_nd");
    const CallSite site = py_site();
    return nogil([&] { return scatter_nd(x, indices, updates, r, site); });
  }, py::arg("x"), py::arg("indices"), py::arg("updates"), py::arg("reduction") = "none", "ONNX ScatterND.");
  m.def("topk", &topk_py, py::arg("x"), py::arg("k"), py::arg("axis") = -1, py::arg("largest") = true, py::arg("sorted") = true,
        "(values, int64 indices); ties: the lower index first; NaN ranks above +inf.");
  m.def("sort", &sort_py, py::arg("x"), py::arg("axis") = -1, py::arg("descending") = false,
        "(values, int64 indices), stable: ties keep the lower index first; NaN ranks above +inf.");
  m.def("einsum", [](const std::string& eq, const py::args& operands) {
    std::vector<Tensor> ts;
    for (const py::handle h : operands) ts.push_back(h.cast<Tensor>());
    const CallSite site = py_site();
    return nogil([&] { return einsum(eq, ts, site); });
  }, py::arg("equation"),
        "einsum of one operand or of two whose contraction is one (batched) GEMM: its bits are matmul's.");

  // Tensor methods (torch's names)
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("squeeze", [](const Tensor& x, const py::object& axis) {
    const std::vector<int> axes = axes_or_empty(axis);
    const CallSite site = py_site();
    return nogil([&] { return squeeze(x, axes, site); });
  }, py::arg("dim") = py::none());
  cls.def("unsqueeze", [](const Tensor& x, int axis) {
    const CallSite site = py_site();
    return nogil([&] { return unsqueeze(x, {axis}, site); });
  }, py::arg("dim"));
  cls.def("repeat", [](const Tensor& x, const py::args& sizes) {
    const std::vector<std::int64_t> r = shape_arg(sizes, "repeat");
    const CallSite site = py_site();
    return nogil([&] { return tile(x, r, site); });
  }, "torch's Tensor.repeat: tile by the sizes.");
  cls.def("tril", [](const Tensor& x, std::int64_t k) {
    const CallSite site = py_site();
    return nogil([&] { return tril(x, k, site); });
  }, py::arg("diagonal") = 0);
  cls.def("triu", [](const Tensor& x, std::int64_t k) {
    const CallSite site = py_site();
    return nogil([&] { return triu(x, k, site); });
  }, py::arg("diagonal") = 0);
  cls.def("split", &split_py, py::arg("split_size"), py::arg("dim") = 0);
  cls.def("chunk", [](const Tensor& x, std::int64_t chunks, int axis) {
    const CallSite site = py_site();
    return tensor_list(nogil([&] { return chunk(x, chunks, axis, site); }));
  }, py::arg("chunks"), py::arg("dim") = 0);
  cls.def("topk", &topk_py, py::arg("k"), py::arg("dim") = -1, py::arg("largest") = true, py::arg("sorted") = true);
  cls.def("sort", &sort_py, py::arg("dim") = -1, py::arg("descending") = false);
  cls.def("flip", [](const Tensor& x, const py::args& dims) {
    std::vector<int> axes;
    for (std::int64_t d : shape_arg(dims, "flip")) axes.push_back(static_cast<int>(d));
    const CallSite site = py_site();
    return nogil([&] { return flip(x, axes, site); });
  });
}

}  // namespace bitgrad::python
