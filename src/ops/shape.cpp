// Shape ops, forward and backward side by side. reshape (of contiguous data), permute,
// transpose, expand and slice return strided views that share storage; concat,
// index_select, gather and contiguous copy. No arithmetic except the scatter-adds of the
// backward passes, whose order is fixed in kernels/index.hpp.
#include <algorithm>
#include <numeric>

#include "kernels/index.hpp"
#include "bitgrad/checked.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

Tensor view(const Tensor& x, const Shape& shape, const Shape& strides, std::int64_t offset) {
  return Tensor::view_of(x, shape, strides, offset);
}

// ---- reshape: x [..] -> y [shape], same numel ----------------------------------------------
void reshape_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = reshape(g, n.in_shape[0]); }

// ---- permute: y[dims[i]] axis order ---------------------------------------------------------
struct PermuteSaved {
  int dims[kMaxDims];  // the first ndim are used
};
void permute_bw(Node& n, const Tensor& g, Tensor* gi) {
  const PermuteSaved& s = n.payload<PermuteSaved>();
  std::vector<int> inv(static_cast<std::size_t>(g.ndim()));
  for (int i = 0; i < g.ndim(); ++i) inv[static_cast<std::size_t>(s.dims[i])] = i;
  gi[0] = permute(g, inv);
}

// ---- expand: x [..] broadcast to y [shape] ----------------------------------------------------
void expand_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = ops::sum_to(g, n.in_shape[0]); }

// ---- slice: y = x[start:end:step] along axis ------------------------------------------------
struct SliceSaved {
  int axis;
  std::int64_t start, step;  // start after clamping
};
// dx: +0 but where the slice's elements were, g there (one pass: kern::place_in_zeros)
void slice_bw(Node& n, const Tensor& g, Tensor* gi) {
  const SliceSaved& s = n.payload<SliceSaved>();
  // step 1: the engine places it (slices of one tensor's disjoint ranges in one pass)
  if (s.step == 1 && autograd::add_placed_gradient(0, g, s.axis, s.start)) return;
  gi[0] = kern::place_in_zeros(g, n.in_shape[0], s.axis, s.start, s.step);
}

// ---- concat: y = [x0 | x1 | ...] along axis ---------------------------------------------------
struct ConcatSaved {
  int axis;
};
void concat_bw(Node& n, const Tensor& g, Tensor* gi) {
  const int axis = n.payload<ConcatSaved>().axis;
  std::int64_t at = 0;
  for (int i = 0; i < n.n_inputs; ++i) {
    const Shape& s = n.input_shape(i);
    if (n.input(i).needs_grad()) gi[i] = ops::fresh_copy(slice(g, axis, at, at + s[axis]));
    at += s[axis];
  }
}

// index_select and gather: x viewed [outer, S, inner], cnt indices along S
struct IndexSaved {
  std::int64_t outer, S, inner, cnt;
};

// The scatter-add of an indexing op's backward: gi[0] = zeros of x's shape plus g at the
// indexed places (the kernel fixes the order, numerics.md §11).
template <template <class> class Scatter>
void scatter_bw(Node& n, const Tensor& g, Tensor* gi, const char* op) {
  const IndexSaved& s = n.payload<IndexSaved>();
  Tensor gc = kern::contiguous(g);
  Tensor out = Tensor::empty(n.in_shape[0], g.dtype());
  const std::int64_t* idx = n.saved_tensor(0).data<std::int64_t>();
  BITGRAD_DISPATCH_FLOAT(g.dtype(), op, T, [&] { Scatter<T>::run(gc.data<T>(), s, idx, kern::out_ptr<T>(out)); });
  gi[0] = out;
}

// ---- index_select: y [.., n, ..] = x [.., S, ..] at index along axis ----------------------------
template <class T>
struct IndexAddRows {
  static void run(const T* g, const IndexSaved& s, const std::int64_t* idx, T* out) {
    kern::index_add_rows(g, s.outer, s.cnt, s.inner, idx, s.S, out);
  }
};
void index_select_bw(Node& n, const Tensor& g, Tensor* gi) { scatter_bw<IndexAddRows>(n, g, gi, "index_select"); }

// ---- gather: y [index shape] = x at index along axis --------------------------------------------
template <class T>
struct GatherAdd {
  static void run(const T* g, const IndexSaved& s, const std::int64_t* idx, T* out) {
    kern::gather_axis_backward(g, s.outer, s.S, s.inner, idx, s.cnt, out);
  }
};
void gather_bw(Node& n, const Tensor& g, Tensor* gi) { scatter_bw<GatherAdd>(n, g, gi, "gather"); }

void identity_bw(Node&, const Tensor& g, Tensor* gi) { gi[0] = g; }

// checked, contiguous i64 copy of an index tensor
Tensor check_index(const char* op, const Tensor& index, std::int64_t size, int axis) {
  BITGRAD_CHECK(index.defined() && index.dtype() == DType::i64, op, "the index must be an i64 tensor, got ",
                index.defined() ? dtype_name(index.dtype()) : "undefined");
  Tensor ic = kern::contiguous(index);
  const std::int64_t* p = ic.data<std::int64_t>();
  for (std::int64_t i = 0; i < ic.numel(); ++i)
    BITGRAD_CHECK(p[i] >= 0 && p[i] < size, op, "index ", p[i], " at position ", i, " is out of range for axis ", axis,
                  " of size ", size);
  return ic;
}

void split3(const Shape& s, int axis, std::int64_t& outer, std::int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape, CallSite site) {
  BITGRAD_CHECK(x.defined(), "reshape", "the input is undefined");
  BITGRAD_CHECK(shape.numel() == x.numel(), "reshape", "cannot reshape ", x.shape().str(), " (", x.numel(), " elements) into ",
                shape.str(), " (", shape.numel(), " elements)");
  Tensor base = x.is_contiguous() ? x : kern::contiguous(x);
  Tensor y = view(base, shape, contiguous_strides(shape), base.offset());
  ops::record("reshape", reshape_bw, {&x}, y, site);
  return y;
}

Tensor reshape_infer(const Tensor& x, const std::vector<std::int64_t>& dims, CallSite site) {
  std::vector<std::int64_t> d = dims;
  int infer = -1;
  // the product of the others; past 2^56 (`huge`) only 0 elements can take the shape, with the
  // inferred dimension 0, as torch reshapes them (Shape checks the rest)
  std::int64_t known = 1;
  bool huge = false;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] == -1) {
      BITGRAD_CHECK(infer < 0, "reshape", "only one dimension can be -1");
      infer = static_cast<int>(i);
    } else {
      BITGRAD_CHECK(d[i] >= 0, "reshape", "dimension ", i, " is ", d[i], "; expected >= 0 or -1");
      if (d[i] == 0) known = 0;
      else if (known != 0 && (huge || known > kMaxElements / d[i])) huge = true;
      else if (known != 0) known *= d[i];
    }
  }
  if (infer >= 0) {
    const bool none = x.numel() == 0 && known != 0;  // the others hold no 0: the inferred dimension is 0
    BITGRAD_CHECK(none || (!huge && known > 0 && x.numel() % known == 0), "reshape", "cannot infer dimension ", infer, " of shape with ",
                  x.numel(), " elements from the others (product ", huge ? std::string("past 2^56") : std::to_string(known), ")");
    d[static_cast<std::size_t>(infer)] = none ? 0 : x.numel() / known;
  } else if (huge && known != 0) {  // no 0 among them: the product passes 2^56, named as reshape's
    std::int64_t p = 1;
    for (const std::int64_t v : d) p = checked_mul(p, v, "reshape");
  }
  return reshape(x, Shape(d), site);
}

Tensor flatten(const Tensor& x, int start_axis, int end_axis, CallSite site) {
  if (x.ndim() == 0) return reshape(x, Shape{1}, site);
  const int s = x.shape().normalize_axis(start_axis, "flatten");
  const int e = x.shape().normalize_axis(end_axis, "flatten");
  BITGRAD_CHECK(s <= e, "flatten", "start axis ", start_axis, " is after end axis ", end_axis);
  Shape out;
  for (int d = 0; d < s; ++d) out.push_back(x.shape()[d]);
  std::int64_t m = 1;
  for (int d = s; d <= e; ++d) m *= x.shape()[d];
  out.push_back(m);
  for (int d = e + 1; d < x.ndim(); ++d) out.push_back(x.shape()[d]);
  return reshape(x, out, site);
}

Tensor permute(const Tensor& x, const std::vector<int>& dims, CallSite site) {
  BITGRAD_CHECK(x.defined(), "permute", "the input is undefined");
  BITGRAD_CHECK(static_cast<int>(dims.size()) == x.ndim(), "permute", "got ", dims.size(), " dimensions for a tensor of shape ",
                x.shape().str());
  std::vector<int> seen(dims.size(), 0);
  Shape sh, st;
  std::vector<int> nd;
  for (int d : dims) {
    int a = x.shape().normalize_axis(d, "permute");
    BITGRAD_CHECK(!seen[static_cast<std::size_t>(a)], "permute", "axis ", a, " appears twice");
    seen[static_cast<std::size_t>(a)] = 1;
    nd.push_back(a);
    sh.push_back(x.shape()[a]);
    st.push_back(x.strides()[a]);
  }
  Tensor y = view(x, sh, st, x.offset());
  if (Node* n = ops::record("permute", permute_bw, {&x}, y, site)) {
    PermuteSaved s{};
    for (std::size_t i = 0; i < nd.size(); ++i) s.dims[i] = nd[i];
    n->set_payload(s);
  }
  return y;
}

Tensor transpose(const Tensor& x, int a, int b, CallSite site) {
  BITGRAD_CHECK(x.defined(), "transpose", "the input is undefined");
  std::vector<int> dims(static_cast<std::size_t>(x.ndim()));
  std::iota(dims.begin(), dims.end(), 0);
  a = x.shape().normalize_axis(a, "transpose");
  b = x.shape().normalize_axis(b, "transpose");
  std::swap(dims[static_cast<std::size_t>(a)], dims[static_cast<std::size_t>(b)]);
  return permute(x, dims, site);
}

Tensor expand(const Tensor& x, const Shape& shape, CallSite site) {
  BITGRAD_CHECK(x.defined(), "expand", "the input is undefined");
  const int lead = shape.ndim() - x.ndim();
  BITGRAD_CHECK(lead >= 0, "expand", "cannot expand ", x.shape().str(), " to fewer dimensions ", shape.str());
  Shape st = shape;
  for (int d = 0; d < shape.ndim(); ++d) {
    if (d < lead) {
      st[d] = 0;
      continue;
    }
    const std::int64_t xd = x.shape()[d - lead];
    BITGRAD_CHECK(xd == shape[d] || xd == 1, "expand", "cannot expand ", x.shape().str(), " to ", shape.str(), " (dimension ", d,
                  ": ", xd, " vs ", shape[d], ")");
    st[d] = xd == shape[d] ? x.strides()[d - lead] : 0;
  }
  Tensor y = view(x, shape, st, x.offset());
  ops::record("expand", expand_bw, {&x}, y, site);
  return y;
}

Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t end, std::int64_t step, CallSite site) {
  BITGRAD_CHECK(x.defined(), "slice", "the input is undefined");
  axis = x.shape().normalize_axis(axis, "slice");
  BITGRAD_CHECK(step >= 1, "slice", "step must be >= 1, got ", step);
  const std::int64_t size = x.shape()[axis];
  auto clampi = [&](std::int64_t v) {
    if (v < 0) v += size;
    return v < 0 ? std::int64_t(0) : (v > size ? size : v);
  };
  start = clampi(start);
  end = clampi(end);
  const std::int64_t len = end > start ? (end - start + step - 1) / step : 0;
  Shape sh = x.shape(), st = x.strides();
  sh[axis] = len;
  const std::int64_t off = x.offset() + start * st[axis];
  st[axis] *= step;
  Tensor y = view(x, sh, st, off);
  if (Node* n = ops::record("slice", slice_bw, {&x}, y, site)) {
    n->set_payload(SliceSaved{axis, start, step});
  }
  return y;
}

Tensor concat(const std::vector<Tensor>& xs, int axis, CallSite site) {
  BITGRAD_CHECK(!xs.empty(), "concat", "needs at least one tensor");
  const Tensor& f = xs[0];
  BITGRAD_CHECK(f.defined(), "concat", "tensor 0 is undefined");
  axis = f.shape().normalize_axis(axis, "concat");
  Shape out = f.shape();
  std::int64_t total = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    BITGRAD_CHECK(t.defined() && t.ndim() == f.ndim(), "concat", "tensor ", i, " has shape ",
                  t.defined() ? t.shape().str() : "undefined", "; expected ", f.ndim(), " dimensions like ", f.shape().str());
    BITGRAD_CHECK(t.dtype() == f.dtype(), "concat", "tensor ", i, " has dtype ", dtype_name(t.dtype()), "; expected ",
                  dtype_name(f.dtype()));
    for (int d = 0; d < f.ndim(); ++d)
      BITGRAD_CHECK(d == axis || t.shape()[d] == f.shape()[d], "concat", "tensor ", i, " has shape ", t.shape().str(),
                    ", incompatible with ", f.shape().str(), " outside axis ", axis);
    total += t.shape()[axis];
  }
  out[axis] = total;
  Tensor y = Tensor::empty(out, f.dtype());
  std::int64_t at = 0;
  for (const Tensor& t : xs) {
    Shape sh = out;
    sh[axis] = t.shape()[axis];
    Tensor region = view(y, sh, y.strides(), at * y.strides()[axis]);
    region.copy_from(t);
    at += t.shape()[axis];
  }
  if (Node* n = ops::record("concat", concat_bw, xs, y, site)) n->set_payload(ConcatSaved{axis});
  return y;
}

Tensor index_select(const Tensor& x, int axis, const Tensor& index, CallSite site) {
  BITGRAD_CHECK(x.defined(), "index_select", "the input is undefined");
  axis = x.shape().normalize_axis(axis, "index_select");
  BITGRAD_CHECK(index.defined() && index.ndim() == 1, "index_select", "the index must be 1-d, got shape ",
                index.defined() ? index.shape().str() : "undefined");
  const std::int64_t S = x.shape()[axis];
  Tensor ic = check_index("index_select", index, S, axis);
  std::int64_t outer, inner;
  split3(x.shape(), axis, outer, inner);
  Shape out = x.shape();
  out[axis] = ic.numel();
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(out, x.dtype());
  switch (x.dtype()) {
    case DType::f32: kern::index_select_rows(xc.data<float>(), outer, S, inner, ic.data<std::int64_t>(), ic.numel(), kern::out_ptr<float>(y)); break;
    case DType::f64: kern::index_select_rows(xc.data<double>(), outer, S, inner, ic.data<std::int64_t>(), ic.numel(), kern::out_ptr<double>(y)); break;
    case DType::i64: kern::index_select_rows(xc.data<std::int64_t>(), outer, S, inner, ic.data<std::int64_t>(), ic.numel(), kern::out_ptr<std::int64_t>(y)); break;
    default: detail::fail("index_select", "unsupported dtype ", dtype_name(x.dtype()));
  }
  if (Node* n = ops::record("index_select", index_select_bw, {&x}, y, site)) {
    n->save(0, ic);
    n->set_payload(IndexSaved{outer, S, inner, ic.numel()});
  }
  return y;
}

Tensor gather(const Tensor& x, int axis, const Tensor& index, CallSite site) {
  BITGRAD_CHECK(x.defined(), "gather", "the input is undefined");
  axis = x.shape().normalize_axis(axis, "gather");
  BITGRAD_CHECK(index.defined() && index.ndim() == x.ndim(), "gather", "the index must have ", x.ndim(),
                " dimensions like the input ", x.shape().str(), ", got ", index.defined() ? index.shape().str() : "undefined");
  for (int d = 0; d < x.ndim(); ++d)
    BITGRAD_CHECK(d == axis || index.shape()[d] == x.shape()[d], "gather", "index shape ", index.shape().str(),
                  " must match input shape ", x.shape().str(), " outside axis ", axis);
  const std::int64_t S = x.shape()[axis];
  Tensor ic = check_index("gather", index, S, axis);
  std::int64_t outer, inner;
  split3(x.shape(), axis, outer, inner);
  const std::int64_t cnt = index.shape()[axis];
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(index.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "gather", T, [&] {
    kern::gather_axis(xc.data<T>(), outer, S, inner, ic.data<std::int64_t>(), cnt, kern::out_ptr<T>(y));
  });
  if (Node* n = ops::record("gather", gather_bw, {&x}, y, site)) {
    n->save(0, ic);
    n->set_payload(IndexSaved{outer, S, inner, cnt});
  }
  return y;
}

Tensor contiguous(const Tensor& x, CallSite site) {
  BITGRAD_CHECK(x.defined(), "contiguous", "the input is undefined");
  Tensor y = ops::fresh_copy(x);
  ops::record("contiguous", identity_bw, {&x}, y, site);
  return y;
}

}  // namespace bitgrad
