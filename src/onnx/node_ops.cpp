// The ONNX op types the importer runs, one entry each: the attributes it reads (any other is
// refused at load), its input counts, a load-time check of what bitgrad lacks, and the run with
// bitgrad's ops (the mapping of tests/onnx/onnx_ops.py, in C++). Float values go through
// bitgrad's differentiable ops; integer and bool values (shapes, axes, indices, masks) are
// computed on the host, exactly, and never carry gradients.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "bitgrad/ops_spatial.hpp"
#include "onnx/graph_impl.hpp"

namespace bitgrad::onnx {
namespace {

using Ints = std::vector<std::int64_t>;

int axis_of(const Call& c, std::int64_t a, int rank) {
  const std::int64_t r = std::max(rank, 1);
  if (a < -r || a >= r) c.fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

Value fval(Tensor t, int ty) { return Value{std::move(t), ty}; }

// what a node may create from a shape it reads (ConstantOfShape, Expand, Range): a graph's
// numbers must not ask for more memory than a model can use
constexpr std::int64_t kMaxMade = std::int64_t(1) << 28;
void check_made(const Call& c, const Shape& s) {
  std::int64_t n = 1;
  for (const std::int64_t d : s) {
    if (d != 0 && n > kMaxMade / d) c.fail("a result of more than 2^28 elements (" + s.str() + ")");
    n *= d;
  }
}
Value ints_value(const Ints& v, const Shape& shape) { return Value{Tensor::from<std::int64_t>(v, shape), kInt64}; }
Value ints_value(const Ints& v) { return ints_value(v, Shape{static_cast<std::int64_t>(v.size())}); }

// a scalar (or one-element) integer input
std::int64_t scalar_int(const Call& c, std::size_t i) {
  const Ints v = c.int_values(i);
  if (v.size() != 1) c.fail("input " + std::to_string(i) + " must hold one integer, got " + std::to_string(v.size()));
  return v[0];
}

Ints host_ints(const Value& v) {
  if (v.t.dtype() == DType::i64) return v.t.contiguous_copy().to_vector<std::int64_t>();
  const auto u = v.t.contiguous_copy().to_vector<std::uint8_t>();
  return Ints(u.begin(), u.end());
}

// NumPy broadcasting of two shapes
Shape broadcast(const Call& c, const Shape& a, const Shape& b) {
  const int r = std::max(a.ndim(), b.ndim());
  std::vector<std::int64_t> out(static_cast<std::size_t>(r));
  for (int k = 0; k < r; ++k) {
    const std::int64_t x = k - (r - a.ndim()) >= 0 ? a[k - (r - a.ndim())] : 1;
    const std::int64_t y = k - (r - b.ndim()) >= 0 ? b[k - (r - b.ndim())] : 1;
    if (x != y && x != 1 && y != 1) c.fail("shapes " + a.str() + " and " + b.str() + " do not broadcast");
    out[static_cast<std::size_t>(k)] = x == 1 ? y : x;
  }
  return Shape(out);
}

// element index of `src` (shape s) for output element i of shape out (broadcast)
std::int64_t source_index(std::int64_t i, const Shape& out, const Shape& s) {
  std::int64_t idx = 0, stride = 1;
  for (int k = out.ndim() - 1, j = s.ndim() - 1; k >= 0; --k, --j) {
    const std::int64_t pos = i % out[k];
    i /= out[k];
    if (j >= 0) {
      if (s[j] != 1) idx += pos * stride;
      stride *= s[j];
    }
  }
  return idx;
}

// an integer (or bool) elementwise op on the host
Value host_elementwise(const Call& c, const std::vector<const Value*>& vs, int out_ty,
                       const std::function<std::int64_t(const std::vector<std::int64_t>&)>& f) {
  Shape out = vs[0]->t.shape();
  for (std::size_t k = 1; k < vs.size(); ++k) out = broadcast(c, out, vs[k]->t.shape());
  check_made(c, out);
  std::vector<Ints> data;
  for (const Value* v : vs) data.push_back(host_ints(*v));
  Ints r(static_cast<std::size_t>(out.numel()));
  std::vector<std::int64_t> args(vs.size());
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    for (std::size_t k = 0; k < vs.size(); ++k) args[k] = data[k][static_cast<std::size_t>(source_index(i, out, vs[k]->t.shape()))];
    r[static_cast<std::size_t>(i)] = f(args);
  }
  if (out_ty == kBool) {
    std::vector<std::uint8_t> b(r.begin(), r.end());
    return Value{Tensor::from<std::uint8_t>(b, out), kBool};
  }
  return Value{Tensor::from<std::int64_t>(r, out), out_ty};
}

void same_type(const Call& c) {
  int ty = kUndefined;
  for (const Value* v : c.ins) {
    if (!v) continue;
    if (ty != kUndefined && v->ty != ty) c.fail(std::string("inputs of different types: ") + elem_type_name(ty) + " and " + elem_type_name(v->ty));
    ty = v->ty;
  }
}

void need_float(const Call& c, std::size_t i) {
  if (!is_float(c.v(i).ty)) c.fail("input " + std::to_string(i) + " is " + elem_type_name(c.v(i).ty) + "; bitgrad's mapping takes float or double");
}

std::string no_outputs_beyond(const Node& n, std::size_t k, const char* what) {
  for (std::size_t o = k; o < n.out.size(); ++o)
    if (n.out[o] >= 0) return std::string("the ") + what + " output";
  return "";
}

// ---- elementwise --------------------------------------------------------------------------------
std::int64_t checked(long double r, const Call& c) {
  if (!(r >= -9.2e18L && r <= 9.2e18L)) c.fail("an integer result out of int64's range");
  return static_cast<std::int64_t>(r);
}

template <int Op>  // 0 add, 1 sub, 2 mul, 3 div, 4 pow
void arith(Call& c) {
  same_type(c);
  const Value &a = c.v(0), &b = c.v(1);
  if (is_float(a.ty)) {
    Tensor y = Op == 0 ? add(a.t, b.t) : Op == 1 ? sub(a.t, b.t) : Op == 2 ? mul(a.t, b.t) : Op == 3 ? div(a.t, b.t) : pow(a.t, b.t);
    c.out.push_back(fval(y, a.ty));
    return;
  }
  if (!is_int(a.ty)) c.fail(std::string("bitgrad's mapping takes float, double and integers, got ") + elem_type_name(a.ty));
  c.out.push_back(host_elementwise(c, {&a, &b}, a.ty, [&](const Ints& v) -> std::int64_t {
    const long double x = static_cast<long double>(v[0]), y = static_cast<long double>(v[1]);
    switch (Op) {
      case 0: return checked(x + y, c);
      case 1: return checked(x - y, c);
      case 2: return checked(x * y, c);
      case 3:
        if (v[1] == 0) c.fail("integer division by zero");
        return v[0] / v[1];  // truncation toward zero
      default: c.fail("integer Pow");
    }
  }));
}

void pow_op(Call& c) {
  need_float(c, 0);
  Tensor e = c.x(1);
  if (c.v(1).ty != c.v(0).ty) e = cast(e, c.x(0).dtype());  // an integer or other float exponent: its value in x's type
  c.out.push_back(fval(pow(c.x(0), e), c.v(0).ty));
}

template <Tensor (*F)(const Tensor&, CallSite)>
void unary(Call& c) {
  need_float(c, 0);
  c.out.push_back(fval(F(c.x(0), CallSite::current()), c.v(0).ty));
}

void neg_op(Call& c) {
  if (is_int(c.v(0).ty)) {
    c.out.push_back(host_elementwise(c, {&c.v(0)}, c.v(0).ty, [&](const Ints& v) { return checked(-static_cast<long double>(v[0]), c); }));
    return;
  }
  unary<neg>(c);
}

void leaky_relu_op(Call& c) {
  need_float(c, 0);
  c.out.push_back(fval(leaky_relu(c.x(0), c.f("alpha", 0.01)), c.v(0).ty));
}

void clip_op(Call& c) {
  need_float(c, 0);
  const double lo = c.has(1) ? c.x(1).contiguous_copy().cast(DType::f64).item() : -INFINITY;
  const double hi = c.has(2) ? c.x(2).contiguous_copy().cast(DType::f64).item() : INFINITY;
  c.out.push_back(fval(clamp(c.x(0), lo, hi), c.v(0).ty));
}

template <int Op>  // 0 eq, 1 lt, 2 gt
void compare(Call& c) {
  same_type(c);
  const Value &a = c.v(0), &b = c.v(1);
  if (is_float(a.ty)) {
    NoGradGuard g;
    c.out.push_back(Value{Op == 0 ? eq(a.t, b.t) : Op == 1 ? lt(a.t, b.t) : gt(a.t, b.t), kBool});
    return;
  }
  c.out.push_back(host_elementwise(c, {&a, &b}, kBool, [](const Ints& v) -> std::int64_t {
    return Op == 0 ? v[0] == v[1] : Op == 1 ? v[0] < v[1] : v[0] > v[1];
  }));
}

template <int Op>  // 0 not, 1 and, 2 or, 3 xor
void logical(Call& c) {
  for (const Value* v : c.ins)
    if (v && v->ty != kBool) c.fail(std::string("takes bool inputs, got ") + elem_type_name(v->ty));
  std::vector<const Value*> vs(c.ins.begin(), c.ins.end());
  c.out.push_back(host_elementwise(c, vs, kBool, [](const Ints& v) -> std::int64_t {
    return Op == 0 ? !v[0] : Op == 1 ? (v[0] && v[1]) : Op == 2 ? (v[0] || v[1]) : (v[0] != v[1]);
  }));
}

void where_op(Call& c) {
  if (c.v(0).ty != kBool) c.fail("the condition must be bool");
  if (c.v(1).ty != c.v(2).ty) c.fail("X and Y of different types");
  if (is_float(c.v(1).ty)) {
    c.out.push_back(fval(where(c.x(0), c.x(1), c.x(2)), c.v(1).ty));
    return;
  }
  c.out.push_back(host_elementwise(c, {&c.v(0), &c.v(1), &c.v(2)}, c.v(1).ty, [](const Ints& v) { return v[0] ? v[1] : v[2]; }));
}

void cast_op(Call& c) {
  const int to = static_cast<int>(c.i("to", 0));
  const Value& v = c.v(0);
  const DType dst = storage_of(to, c.g.where());
  if (to == kBool && v.ty != kBool) {  // nonzero -> 1
    if (is_float(v.ty)) {
      NoGradGuard g;
      c.out.push_back(Value{ne(v.t, 0.0), kBool});
    } else {
      c.out.push_back(host_elementwise(c, {&v}, kBool, [](const Ints& x) -> std::int64_t { return x[0] != 0; }));
    }
    return;
  }
  if (to == kInt32 && is_int(v.ty)) {
    for (const std::int64_t x : host_ints(v))
      if (x < INT32_MIN || x > INT32_MAX) c.fail("cast to int32 of " + std::to_string(x) + ", outside int32's range");
  }
  Tensor t = v.t.dtype() == dst ? v.t : cast(v.t, dst);
  c.out.push_back(Value{t, to});
}

// ---- constants and shapes -----------------------------------------------------------------------
std::string check_constant(const Node& n, const GraphInfo&) {
  if (n.attrs.size() != 1) return "a Constant with other than one value attribute";
  return "";
}
void constant_op(Call& c) {
  const auto& [name, a] = *c.node.attrs.begin();
  if (name == "value") c.out.push_back(value_of(a->t, c.g.where() + ": " + c.node.label()));
  else if (name == "value_float") c.out.push_back(Value{Tensor::scalar(a->f, DType::f32), kFloat});
  else if (name == "value_floats") c.out.push_back(Value{Tensor::from<float>(a->floats, Shape{static_cast<std::int64_t>(a->floats.size())}), kFloat});
  else if (name == "value_int") c.out.push_back(ints_value({a->i}, Shape{}));
  else c.out.push_back(ints_value(a->ints));
}

void constant_of_shape(Call& c) {
  const Ints dims = c.int_values(0);
  for (const std::int64_t d : dims)
    if (d < 0) c.fail("a negative dimension");
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) c.fail("more than " + std::to_string(kMaxDims) + " dimensions");
  check_made(c, Shape(dims));
  Value fill{Tensor::scalar(0.0, DType::f32), kFloat};
  if (c.has_attr("value")) fill = value_of(c.node.attrs.at("value")->t, c.g.where() + ": " + c.node.label());
  if (fill.t.numel() != 1) c.fail("value must hold one element");
  const double x = fill.t.contiguous_copy().cast(DType::f64).item();
  c.out.push_back(Value{Tensor::full(Shape(dims), x, fill.t.dtype()), fill.ty});
}

void shape_op(Call& c) {
  const Ints s = c.x(0).shape().vec();
  const std::int64_t r = static_cast<std::int64_t>(s.size());
  auto clampi = [&](std::int64_t a) { return std::min(std::max(a < 0 ? a + r : a, std::int64_t(0)), r); };
  const std::int64_t b = clampi(c.i("start", 0)), e = clampi(c.i("end", r));
  c.out.push_back(ints_value(Ints(s.begin() + b, s.begin() + std::max(b, e))));
}

void size_op(Call& c) { c.out.push_back(ints_value({c.x(0).numel()}, Shape{})); }

void identity(Call& c) { c.out.push_back(c.v(0)); }

void reshape_op(Call& c) {
  const Tensor& x = c.x(0);
  Ints dims = c.int_values(1);
  if (!c.i("allowzero", 0))
    for (std::size_t k = 0; k < dims.size(); ++k)
      if (dims[k] == 0) {
        if (static_cast<int>(k) >= x.ndim()) c.fail("a 0 in the shape beyond the input's rank");
        dims[k] = x.shape()[static_cast<int>(k)];
      }
  c.out.push_back(Value{reshape_infer(x, dims), c.v(0).ty});
}

void flatten_op(Call& c) {
  const Tensor& x = c.x(0);
  const std::int64_t a = c.i("axis", 1);  // in [-r, r]; negative counts from the end
  if (a < -x.ndim() || a > x.ndim()) c.fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(x.ndim()));
  const int axis = static_cast<int>(a < 0 ? a + x.ndim() : a);
  std::int64_t outer = 1, inner = 1;
  for (int k = 0; k < x.ndim(); ++k) (k < axis ? outer : inner) *= x.shape()[k];
  c.out.push_back(Value{reshape(x, Shape{outer, inner}), c.v(0).ty});
}

void transpose_op(Call& c) {
  const Tensor& x = c.x(0);
  Ints perm = c.ints("perm");
  std::vector<int> p;
  if (perm.empty())
    for (int k = x.ndim() - 1; k >= 0; --k) p.push_back(k);
  else
    for (const std::int64_t a : perm) p.push_back(axis_of(c, a, x.ndim()));
  // read by MatMuls alone, a float tensor stays a view: matmul reads a transposed weight or an
  // attention's k^T through its strides, no copy at all (other readers would each copy it)
  const bool view = is_float(c.v(0).ty) && c.node.read_by_matmul_only;
  c.out.push_back(Value{view ? permute(x, p) : contiguous(permute(x, p)), c.v(0).ty});
}

void unsqueeze_op(Call& c) {
  const Tensor& x = c.x(0);
  const Ints axes = c.int_values(1);
  const int r = x.ndim() + static_cast<int>(axes.size());
  std::vector<int> a;
  for (const std::int64_t k : axes) a.push_back(axis_of(c, k, r));
  std::sort(a.begin(), a.end());
  c.out.push_back(Value{unsqueeze(x, a), c.v(0).ty});
}

void squeeze_op(Call& c) {
  const Tensor& x = c.x(0);
  std::vector<int> a;
  if (c.has(1)) {
    for (const std::int64_t k : c.int_values(1)) {
      const int ax = axis_of(c, k, x.ndim());
      if (x.shape()[ax] != 1) c.fail("squeeze of axis " + std::to_string(ax) + " of size " + std::to_string(x.shape()[ax]));
      a.push_back(ax);
    }
  } else {
    for (int k = 0; k < x.ndim(); ++k)
      if (x.shape()[k] == 1) a.push_back(k);
  }
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  c.out.push_back(Value{a.empty() ? x : squeeze(x, a), c.v(0).ty});
}

void concat_op(Call& c) {
  same_type(c);
  std::vector<Tensor> xs;
  for (std::size_t k = 0; k < c.ins.size(); ++k) xs.push_back(c.x(k));
  c.out.push_back(Value{concat(xs, axis_of(c, c.i("axis", 0), xs[0].ndim())), c.v(0).ty});
}

void expand_op(Call& c) {
  const Tensor& x = c.x(0);
  const Ints dims = c.int_values(1);
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) c.fail("more than " + std::to_string(kMaxDims) + " dimensions");
  for (const std::int64_t d : dims)
    if (d < 0) c.fail("a negative dimension");
  const Shape out = broadcast(c, x.shape(), Shape(dims));
  check_made(c, out);
  Tensor v = x;
  if (v.ndim() < out.ndim()) {  // leading axes of 1 first: expand takes equal ranks
    std::vector<std::int64_t> s(static_cast<std::size_t>(out.ndim() - v.ndim()), 1);
    for (const std::int64_t d : v.shape()) s.push_back(d);
    v = reshape(v, Shape(s));
  }
  c.out.push_back(Value{contiguous(expand(v, out)), c.v(0).ty});
}

void slice_op(Call& c) {
  Tensor x = c.x(0);
  const Ints starts = c.int_values(1), ends = c.int_values(2);
  if (starts.size() != ends.size()) c.fail("starts and ends of different lengths");
  Ints axes, steps;
  if (c.has(3)) axes = c.int_values(3);
  else
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
  if (c.has(4)) steps = c.int_values(4);
  else steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) c.fail("axes or steps of another length than starts");
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int a = axis_of(c, axes[k], x.ndim());
    const std::int64_t dim = x.shape()[a], st = steps[k];
    if (st == 0) c.fail("step 0");
    std::int64_t b = starts[k], e = ends[k];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      b = std::clamp<std::int64_t>(b, 0, dim);
      e = std::clamp<std::int64_t>(e, 0, dim);
      x = slice(x, a, b, std::max(b, e), st);
    } else {  // a negative step: the indices in their order
      b = std::clamp<std::int64_t>(b, -1, dim - 1);
      e = std::clamp<std::int64_t>(e, -1, dim - 1);
      Ints idx;
      for (std::int64_t i = b; i > e; i += st) idx.push_back(i);
      x = index_select(x, a, Tensor::from<std::int64_t>(idx, Shape{static_cast<std::int64_t>(idx.size())}));
    }
  }
  c.out.push_back(Value{contiguous(x), c.v(0).ty});
}

// Input 1's indices into an axis of n, negative ones counted from its end (Gather, GatherElements).
Ints indices_on_axis(Call& c, std::int64_t n) {
  Ints idx = c.int_values(1);
  for (std::int64_t& i : idx) {
    if (i < -n || i >= n) c.fail("index " + std::to_string(i) + " out of range for an axis of " + std::to_string(n));
    if (i < 0) i += n;
  }
  return idx;
}

void gather_op(Call& c) {
  const Tensor& x = c.x(0);
  const int axis = axis_of(c, c.i("axis", 0), x.ndim());
  const Ints idx = indices_on_axis(c, x.shape()[axis]);
  // a parameter's rows by each sample's indices (torch's nn.Embedding): bitgrad's embedding, whose
  // gradient sums per sample, then by the batch rule (numerics §11, §42); the same rows either way
  if (axis == 0 && x.ndim() == 2 && x.requires_grad() && c.x(1).ndim() >= 1) {
    c.out.push_back(Value{embedding(x, Tensor::from<std::int64_t>(idx, c.x(1).shape())), c.v(0).ty});
    return;
  }
  const Tensor y = index_select(x, axis, Tensor::from<std::int64_t>(idx, Shape{static_cast<std::int64_t>(idx.size())}));
  std::vector<std::int64_t> shape(x.shape().begin(), x.shape().begin() + axis);
  for (const std::int64_t d : c.x(1).shape()) shape.push_back(d);
  for (int k = axis + 1; k < x.ndim(); ++k) shape.push_back(x.shape()[k]);
  c.out.push_back(Value{reshape(y, Shape(shape)), c.v(0).ty});
}

void split_op(Call& c) {
  const Tensor& x = c.x(0);
  const int axis = axis_of(c, c.i("axis", 0), x.ndim());
  const std::size_t k = c.node.out.size();
  Ints sizes;
  if (c.has(1)) {
    sizes = c.int_values(1);
  } else {
    if (x.shape()[axis] % static_cast<std::int64_t>(k)) c.fail("an axis of " + std::to_string(x.shape()[axis]) + " in " + std::to_string(k) + " equal parts");
    sizes.assign(k, x.shape()[axis] / static_cast<std::int64_t>(k));
  }
  if (sizes.size() != k) c.fail("split sizes for another number of outputs");
  for (const Tensor& t : split(x, sizes, axis)) c.out.push_back(Value{t, c.v(0).ty});
}

void range_op(Call& c) {
  same_type(c);
  if (is_int(c.v(0).ty)) {
    const std::int64_t s = scalar_int(c, 0), l = scalar_int(c, 1), d = scalar_int(c, 2);
    if (d == 0) c.fail("delta 0");
    const long double n = std::ceil((static_cast<long double>(l) - s) / d);  // ONNX: max(ceil((limit - start) / delta), 0)
    if (n >= static_cast<long double>(kMaxMade)) c.fail("a range of more than 2^28 values");
    Ints v;
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(n); ++k) v.push_back(s + k * d);
    c.out.push_back(Value{Tensor::from<std::int64_t>(v, Shape{static_cast<std::int64_t>(v.size())}), c.v(0).ty});
    return;
  }
  const double s = c.x(0).cast(DType::f64).item(), l = c.x(1).cast(DType::f64).item(), d = c.x(2).cast(DType::f64).item();
  if (!(d != 0.0) || !std::isfinite(s) || !std::isfinite(l) || !(std::fabs((l - s) / d) < static_cast<double>(kMaxMade)))
    c.fail("a range of more than 2^28 values, or with delta 0");
  c.out.push_back(fval(arange(s, l, d, c.x(0).dtype()), c.v(0).ty));
}

void trilu_op(Call& c) {
  need_float(c, 0);
  const std::int64_t k = c.has(1) ? scalar_int(c, 1) : 0;
  c.out.push_back(fval(c.i("upper", 1) ? triu(c.x(0), k) : tril(c.x(0), k), c.v(0).ty));
}

// ---- linear algebra and networks ----------------------------------------------------------------
void matmul_op(Call& c) {
  same_type(c);
  need_float(c, 0);
  Tensor a = c.x(0), b = c.x(1);
  const bool a1 = a.ndim() == 1, b1 = b.ndim() == 1;  // NumPy's 1-d operands: a row, a column, dropped from the result
  if (a1) a = reshape(a, Shape{1, a.shape()[0]});
  if (b1) b = reshape(b, Shape{b.shape()[0], 1});
  if (a.ndim() > 2 || b.ndim() > 2) {
    std::vector<std::int64_t> ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
    const Shape batch = broadcast(c, Shape(ab), Shape(bb));
    // bitgrad: equal batch dimensions, or b 2-d and shared; other broadcasting written out
    if (!(b.ndim() == 2 && Shape(ab) == batch)) {
      auto widen = [&](const Tensor& t) {
        if (t.ndim() == batch.ndim() + 2 && Shape(std::vector<std::int64_t>(t.shape().begin(), t.shape().end() - 2)) == batch)
          return t;  // its batch already the broadcast one: read as it is (a view through its strides)
        std::vector<std::int64_t> s = batch.vec();
        s.push_back(t.shape()[t.ndim() - 2]);
        s.push_back(t.shape()[t.ndim() - 1]);
        std::vector<std::int64_t> r(static_cast<std::size_t>(static_cast<int>(s.size()) - t.ndim()), 1);
        for (const std::int64_t d : t.shape()) r.push_back(d);
        return contiguous(expand(reshape(t, Shape(r)), Shape(s)));
      };
      a = widen(a);
      b = widen(b);
    }
  }
  Tensor y = matmul(a, b);
  if (a1 || b1) {
    std::vector<std::int64_t> s = y.shape().vec();
    if (b1) s.pop_back();
    if (a1) s.erase(s.end() - (b1 ? 1 : 2));
    y = reshape(y, Shape(s));
  }
  c.out.push_back(fval(y, c.v(0).ty));
}

void gemm_op(Call& c) {
  same_type(c);
  need_float(c, 0);
  Tensor a = c.x(0), b = c.x(1);
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  if (c.i("transA", 0)) a = transpose(a, 0, 1);
  Tensor y;
  const bool plain_bias = c.has(2) && beta == 1.0 && c.x(2).ndim() == 1;
  if (c.i("transB", 0) && alpha == 1.0 && (!c.has(2) || plain_bias)) {
    y = linear(a, b, c.has(2) ? c.x(2) : Tensor());  // x Wᵀ + b: PyTorch's nn.Linear
  } else {
    y = matmul(a, c.i("transB", 0) ? transpose(b, 0, 1) : b);
    if (alpha != 1.0) y = y * alpha;
    if (c.has(2)) y = y + (beta != 1.0 ? c.x(2) * beta : c.x(2));
  }
  c.out.push_back(fval(y, c.v(0).ty));
}

std::vector<int> to_int(const Ints& v) { return std::vector<int>(v.begin(), v.end()); }

// explicit pads for auto_pad SAME_UPPER / SAME_LOWER (the output is ceil(in / stride))
std::vector<int> same_pads(const Call& c, const Tensor& x, const Ints& kernel, const Ints& strides, const Ints& dil) {
  const std::string mode = c.s("auto_pad", "NOTSET");
  const std::size_t n = kernel.size();
  if (mode == "NOTSET") {
    Ints p = c.ints("pads");
    if (p.empty()) p.assign(2 * n, 0);
    if (p.size() != 2 * n) c.fail("pads of length " + std::to_string(p.size()) + " for " + std::to_string(n) + " spatial axes");
    return to_int(p);
  }
  std::vector<int> p(2 * n, 0);
  if (mode == "VALID") return p;
  for (std::size_t k = 0; k < n; ++k) {
    const std::int64_t in = x.shape()[static_cast<int>(k) + 2], s = strides.empty() ? 1 : strides[k], d = dil.empty() ? 1 : dil[k];
    const std::int64_t total = std::max<std::int64_t>((in + s - 1) / s * s - s + d * (kernel[k] - 1) + 1 - in, 0);
    const int small = static_cast<int>(total / 2), big = static_cast<int>(total - total / 2);
    p[k] = mode == "SAME_UPPER" ? small : big;
    p[k + n] = mode == "SAME_UPPER" ? big : small;
  }
  return p;
}

std::string check_auto_pad(const Node& n) {
  auto it = n.attrs.find("auto_pad");
  if (it == n.attrs.end()) return "";
  const std::string& m = it->second->s;
  if (m != "NOTSET" && m != "VALID" && m != "SAME_UPPER" && m != "SAME_LOWER") return "auto_pad " + printable_excerpt(m);
  return "";
}

std::string check_spatial(const Node& n, const GraphInfo&) {
  if (std::string e = check_auto_pad(n); !e.empty()) return e;
  for (const char* name : {"kernel_shape", "pads", "strides", "dilations"}) {  // sizes a model can have (and ints fit)
    auto a = n.attrs.find(name);
    if (a == n.attrs.end()) continue;
    const std::int64_t lo = std::string(name) == "pads" ? 0 : 1;
    for (const std::int64_t v : a->second->ints)
      if (v < lo || v > 65536) return std::string(name) + " value " + std::to_string(v) + " outside [" + std::to_string(lo) + ", 65536]";
  }
  auto grp = n.attrs.find("group");
  if (grp != n.attrs.end() && (grp->second->i < 1 || grp->second->i > 65536)) return "group " + std::to_string(grp->second->i);
  auto k = n.attrs.find("kernel_shape");
  if (k != n.attrs.end() && (k->second->ints.empty() || k->second->ints.size() > 2))
    return "kernel_shape of " + std::to_string(k->second->ints.size()) + " axes (bitgrad's convolutions and pools are 1-d and 2-d)";
  auto so = n.attrs.find("storage_order");
  if (so != n.attrs.end() && so->second->i != 0) return "storage_order=1";
  if (n.proto->op_type == "MaxPool") return no_outputs_beyond(n, 1, "Indices");
  return "";
}

void conv_op(Call& c) {
  same_type(c);
  need_float(c, 0);
  const Tensor &x = c.x(0), &w = c.x(1);
  Ints kernel = c.ints("kernel_shape");
  if (kernel.empty()) kernel.assign(w.shape().begin() + 2, w.shape().end());
  if (static_cast<int>(kernel.size()) + 2 != x.ndim()) c.fail("kernel_shape " + Shape(kernel).str() + " for input " + x.shape().str());
  ConvOptions o;
  o.stride = to_int(c.ints("strides"));
  o.dilation = to_int(c.ints("dilations"));
  o.pads = same_pads(c, x, kernel, c.ints("strides"), c.ints("dilations"));
  o.groups = static_cast<int>(c.i("group", 1));
  c.out.push_back(fval(bitgrad::conv(x, w, c.has(2) ? c.x(2) : Tensor(), o), c.v(0).ty));
}

template <bool Max>
void pool_op(Call& c) {
  need_float(c, 0);
  const Tensor& x = c.x(0);
  PoolOptions o;
  const Ints kernel = c.ints("kernel_shape");
  if (static_cast<int>(kernel.size()) + 2 != x.ndim()) c.fail("kernel_shape " + Shape(kernel).str() + " for input " + x.shape().str());
  o.kernel = to_int(kernel);
  o.stride = to_int(c.ints("strides"));
  o.dilation = to_int(c.ints("dilations"));
  o.pads = same_pads(c, x, kernel, c.ints("strides"), c.ints("dilations"));
  o.ceil_mode = c.i("ceil_mode", 0) != 0;
  o.count_include_pad = c.i("count_include_pad", 0) != 0;
  c.out.push_back(fval(Max ? max_pool(x, o) : avg_pool(x, o), c.v(0).ty));
}

template <bool Max>
void global_pool(Call& c) {
  need_float(c, 0);
  c.out.push_back(fval(Max ? global_max_pool(c.x(0)) : global_avg_pool(c.x(0)), c.v(0).ty));
}

// PyTorch writes 1 - its momentum as a float32 attribute: the momentum it trained with is the
// 7-significant-digit decimal of 1 - that (0.9f -> 0.1, not 0.10000002384)
double torch_momentum(double onnx_momentum) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", 1.0 - onnx_momentum);
  return std::strtod(buf, nullptr);
}

std::string check_batch_norm(const Node& n, const GraphInfo& g) {
  if (n.proto->input.size() < 5) return "BatchNormalization without its running statistics";
  auto t = n.attrs.find("training_mode");
  const bool training = t != n.attrs.end() && t->second->i != 0;
  if (!training) return no_outputs_beyond(n, 1, "running statistics (training_mode=0)");
  (void)g;
  return "";
}

void batch_norm_op(Call& c) {
  same_type(c);
  need_float(c, 0);
  const Tensor &x = c.x(0), &scale = c.x(1), &bias = c.x(2), &mean = c.x(3), &var = c.x(4);
  const double eps = c.f("epsilon", 1e-5), momentum = torch_momentum(c.f("momentum", 0.9));
  if (!c.training) {
    c.out.push_back(fval(batch_norm(x, mean, var, scale, bias, false, momentum, eps), c.v(0).ty));
    c.out.push_back(c.v(3));
    c.out.push_back(c.v(4));
    return;
  }
  // training: the batch's statistics; the running statistics updated in place once per step
  // (PyTorch's rule: momentum, the unbiased variance), not by a checkpointed segment's recomputation
  if (recomputing()) {
    c.out.push_back(fval(batch_norm(x, Tensor(), Tensor(), scale, bias, true, momentum, eps), c.v(0).ty));
  } else {
    c.out.push_back(fval(batch_norm(x, mean, var, scale, bias, true, momentum, eps), c.v(0).ty));
    if (c.node.batches_tracked.defined()) {
      Tensor n = c.node.batches_tracked;
      n.mutable_data<std::int64_t>()[0] += 1;
    }
  }
  c.out.push_back(c.v(3));
  c.out.push_back(c.v(4));
}

std::string check_layer_norm(const Node& n, const GraphInfo&) { return no_outputs_beyond(n, 1, "Mean and InvStdDev"); }

void layer_norm_op(Call& c) {
  same_type(c);
  need_float(c, 0);
  const Tensor& x = c.x(0);
  const int axis = axis_of(c, c.i("axis", -1), x.ndim());
  const std::int64_t stash = c.i("stash_type", 1);
  if (stash != 1 && !(stash == 11 && c.v(0).ty == kDouble)) c.fail("stash_type " + std::to_string(stash) + " (bitgrad normalises in the input's type)");
  std::vector<std::int64_t> outer(x.shape().begin(), x.shape().begin() + axis), norm(x.shape().begin() + axis, x.shape().end());
  std::int64_t d = 1;
  for (const std::int64_t k : norm) d *= k;
  auto flat = [&](std::size_t i) -> Tensor {
    if (!c.has(i)) return Tensor();
    Tensor t = c.x(i);
    if (t.shape() != Shape(norm)) t = contiguous(expand(t, Shape(norm)));
    return reshape(t, Shape{d});
  };
  std::vector<std::int64_t> s2 = outer;
  s2.push_back(d);
  const Tensor y = layer_norm(reshape(x, Shape(s2)), flat(1), flat(2), c.f("epsilon", 1e-5));
  c.out.push_back(fval(reshape(y, x.shape()), c.v(0).ty));
}

template <bool Log>
void softmax_op(Call& c) {
  need_float(c, 0);
  const int axis = axis_of(c, c.i("axis", -1), c.x(0).ndim());
  c.out.push_back(fval(Log ? log_softmax(c.x(0), axis) : softmax(c.x(0), axis), c.v(0).ty));
}

std::string check_dropout(const Node& n, const GraphInfo&) { return no_outputs_beyond(n, 1, "mask"); }

void dropout_op(Call& c) {
  const Value& x = c.v(0);
  const double ratio = c.has(1) ? c.x(1).contiguous_copy().cast(DType::f64).item() : 0.5;
  const bool mode = c.has(2) && c.x(2).contiguous_copy().cast(DType::f64).item() != 0.0;
  if (!c.training || !mode || ratio == 0.0) {
    c.out.push_back(x);
    return;
  }
  if (!(ratio > 0.0 && ratio < 1.0)) c.fail("ratio " + std::to_string(ratio) + " outside [0, 1)");
  need_float(c, 0);
  // keyed as nn::Dropout: (seed, "dropout").sub(its number among the graph's Dropout nodes).sub(step),
  // element row_offset * row size + k (the masks do not depend on the micro-batch split)
  const std::int64_t rows = x.t.ndim() ? x.t.shape()[0] : 1;
  const std::int64_t row_size = rows ? x.t.numel() / rows : 0;
  rng::Stream s = rng::Stream(c.ctx.seed, "dropout").sub(c.node.dropout_id).sub(c.ctx.step);
  if (c.ctx.call) s = s.sub(c.ctx.call);  // the graph called again in one forward (nn::Dropout's rule)
  c.out.push_back(fval(dropout(x.t, ratio, s, static_cast<std::uint64_t>(c.ctx.row_offset * row_size), c.ctx.f32_masks), x.ty));
}

template <int Op>  // 0 mean, 1 sum, 2 max, 3 min, 4 l1, 5 l2, 6 logsumexp, 7 prod, 8 sum of squares, 9 log of the sum
void reduce_op(Call& c) {
  need_float(c, 0);
  const Tensor& x = c.x(0);
  Ints axes = (Op == 1 || c.g.opset >= 18) ? (c.has(1) ? c.int_values(1) : Ints{}) : c.ints("axes");
  const bool keep = c.i("keepdims", 1) != 0;
  if (axes.empty() && c.i("noop_with_empty_axes", 0)) {
    c.out.push_back(c.v(0));
    return;
  }
  std::vector<int> a;
  for (const std::int64_t k : axes) a.push_back(axis_of(c, k, x.ndim()));
  if (a.empty())
    for (int k = 0; k < x.ndim(); ++k) a.push_back(k);
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  Tensor y;
  switch (Op) {
    case 0: y = mean(x, a, keep); break;
    case 1: y = sum(x, a, keep); break;
    case 2: y = amax(x, a, keep); break;
    case 3: y = amin(x, a, keep); break;
    case 4: y = norm_l1(x, a, keep); break;
    case 5: y = norm_l2(x, a, keep); break;
    case 6: y = logsumexp(x, a, keep); break;
    case 7: y = prod(x, a, keep); break;
    case 8: y = sum_square(x, a, keep); break;
    default: y = log_sum(x, a, keep); break;
  }
  c.out.push_back(fval(y, c.v(0).ty));
}

template <bool Max>
void arg_op(Call& c) {
  need_float(c, 0);
  const Tensor& x = c.x(0);
  const int axis = axis_of(c, c.i("axis", 0), x.ndim());
  const bool keep = c.i("keepdims", 1) != 0, last = c.i("select_last_index", 0) != 0;
  NoGradGuard g;
  c.out.push_back(Value{Max ? argmax(x, axis, keep, last) : argmin(x, axis, keep, last), kInt64});
}

template <int Op>  // 0 max, 1 min, 2 sum, 3 mean
void variadic(Call& c) {
  same_type(c);
  need_float(c, 0);
  std::vector<Tensor> xs;
  for (std::size_t k = 0; k < c.ins.size(); ++k) xs.push_back(c.x(k));
  c.out.push_back(fval(Op == 0 ? max_of(xs) : Op == 1 ? min_of(xs) : Op == 2 ? sum_of(xs) : mean_of(xs), c.v(0).ty));
}

void gather_elements_op(Call& c) {
  need_float(c, 0);
  const Tensor& x = c.x(0);
  const int axis = axis_of(c, c.i("axis", 0), x.ndim());
  const Ints idx = indices_on_axis(c, x.shape()[axis]);
  c.out.push_back(fval(gather(x, axis, Tensor::from<std::int64_t>(idx, c.x(1).shape())), c.v(0).ty));
}

void cumsum_op(Call& c) {
  need_float(c, 0);
  const int axis = axis_of(c, scalar_int(c, 1), c.x(0).ndim());
  c.out.push_back(fval(cumsum(c.x(0), axis, c.i("exclusive", 0) != 0, c.i("reverse", 0) != 0), c.v(0).ty));
}

template <int Op>  // 0 elu, 1 selu, 2 celu, 3 hardsigmoid, 4 thresholded_relu
void param_act(Call& c) {
  need_float(c, 0);
  const Tensor& x = c.x(0);
  Tensor y;
  switch (Op) {
    case 0: y = elu(x, c.f("alpha", 1.0)); break;
    case 1: y = selu(x, c.f("alpha", 1.67326319217681884765625), c.f("gamma", 1.05070102214813232421875)); break;
    case 2: y = celu(x, c.f("alpha", 1.0)); break;
    case 3: y = hardsigmoid(x, c.f("alpha", 0.2), c.f("beta", 0.5)); break;
    default: y = thresholded_relu(x, c.f("alpha", 1.0)); break;
  }
  c.out.push_back(fval(y, c.v(0).ty));
}

// ---- recurrent layers: ONNX's weights in PyTorch's gate order, then bitgrad's rnn ---------------
std::string check_recurrent(const Node& n, const GraphInfo&) {
  const bool lstm = n.proto->op_type == "LSTM";
  auto it = n.attrs.find("direction");
  if (it != n.attrs.end() && it->second->s != "forward") return "direction " + printable_excerpt(it->second->s) + " (bitgrad's rnn runs forward)";
  for (const char* a : {"activation_alpha", "activation_beta", "clip"})
    if (n.attrs.count(a)) return std::string("attribute ") + a;
  it = n.attrs.find("activations");
  if (it != n.attrs.end()) {
    const std::vector<std::string> want = lstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : std::vector<std::string>{"Sigmoid", "Tanh"};
    if (it->second->strings != want) return "activations other than the defaults";
  }
  if (lstm) {
    it = n.attrs.find("input_forget");
    if (it != n.attrs.end() && it->second->i) return "input_forget=1";
    if (n.proto->input.size() > 7 && !n.proto->input[7].empty()) return "peepholes (input P)";
  } else {
    it = n.attrs.find("linear_before_reset");
    if (it == n.attrs.end() || it->second->i != 1) return "linear_before_reset=0 (bitgrad's gru is PyTorch's: linear_before_reset=1)";
  }
  if (n.proto->input.size() > 4 && !n.proto->input[4].empty()) return "sequence_lens (bitgrad's rnn runs every sequence to the end)";
  return "";
}

template <bool Lstm>
void recurrent_op(Call& c) {
  same_type(c);
  need_float(c, 0);
  const std::int64_t H = c.i("hidden_size", 0);
  const int G = Lstm ? 4 : 3;
  Tensor X = c.x(0);
  const bool batch_major = c.i("layout", 0) != 0;  // X [N, T, I]
  if (H <= 0) c.fail("hidden_size is required");
  const Tensor &W = c.x(1), &R = c.x(2);
  if (W.ndim() != 3 || W.shape()[0] != 1 || W.shape()[1] != G * H) c.fail("W must be [1, " + std::to_string(G * H) + ", input], got " + W.shape().str());
  if (R.ndim() != 3 || R.shape()[0] != 1 || R.shape()[1] != G * H || R.shape()[2] != H)
    c.fail("R must be [1, " + std::to_string(G * H) + ", " + std::to_string(H) + "], got " + R.shape().str());
  // ONNX's gate blocks (LSTM i o f c, GRU z r h) in PyTorch's order (LSTM i f g o, GRU r z n)
  const std::vector<int> order = Lstm ? std::vector<int>{0, 2, 3, 1} : std::vector<int>{1, 0, 2};
  auto reorder = [&](const Tensor& t) {  // t [G H, ...]
    std::vector<Tensor> parts;
    for (const int k : order) parts.push_back(slice(t, 0, k * H, (k + 1) * H));
    return concat(parts, 0);
  };
  RnnParams p;
  p.w_ih = reorder(reshape(W, Shape{G * H, W.shape()[2]}));
  p.w_hh = reorder(reshape(R, Shape{G * H, H}));
  if (c.has(3)) {
    const Tensor B = reshape(c.x(3), Shape{2 * G * H});
    p.b_ih = reorder(slice(B, 0, 0, G * H));
    p.b_hh = reorder(slice(B, 0, G * H, 2 * G * H));
  }
  auto state = [&](std::size_t i) { return c.has(i) ? (batch_major ? contiguous(transpose(c.x(i), 0, 1)) : c.x(i)) : Tensor(); };
  const RnnResult r = rnn(X, Lstm ? RnnMode::lstm : RnnMode::gru, {p}, state(5), Lstm ? state(6) : Tensor(), batch_major);
  // Y [T, 1, N, H] (layout 1: [N, T, 1, H]); Y_h, Y_c [1, N, H] (layout 1: [N, 1, H])
  const Shape& o = r.output.shape();
  c.out.push_back(fval(batch_major ? reshape(r.output, Shape{o[0], o[1], 1, H}) : reshape(r.output, Shape{o[0], 1, o[1], H}), c.v(0).ty));
  c.out.push_back(fval(batch_major ? contiguous(transpose(r.h_n, 0, 1)) : r.h_n, c.v(0).ty));
  if (Lstm) c.out.push_back(fval(batch_major ? contiguous(transpose(r.c_n, 0, 1)) : r.c_n, c.v(0).ty));
}

// ---- the table ----------------------------------------------------------------------------------
constexpr int kMany = 1 << 20;

const std::vector<OpDef>& table() {
  static const std::vector<OpDef> t = {
      {"Abs", {}, 1, 1, nullptr, unary<bitgrad::abs>, true},
      {"ArgMax", {"axis", "keepdims", "select_last_index"}, 1, 1, nullptr, arg_op<true>, true},
      {"ArgMin", {"axis", "keepdims", "select_last_index"}, 1, 1, nullptr, arg_op<false>, true},
      {"Celu", {"alpha"}, 1, 1, nullptr, param_act<2>, true},
      {"Cos", {}, 1, 1, nullptr, unary<bitgrad::cos>, true},
      {"CumSum", {"exclusive", "reverse"}, 2, 2, nullptr, cumsum_op, true},
      {"Elu", {"alpha"}, 1, 1, nullptr, param_act<0>, true},
      {"GatherElements", {"axis"}, 2, 2, nullptr, gather_elements_op, true},
      {"HardSigmoid", {"alpha", "beta"}, 1, 1, nullptr, param_act<3>, true},
      {"HardSwish", {}, 1, 1, nullptr, unary<bitgrad::hardswish>, true},
      {"Max", {}, 1, kMany, nullptr, variadic<0>, true},
      {"Mean", {}, 1, kMany, nullptr, variadic<3>, true},
      {"Min", {}, 1, kMany, nullptr, variadic<1>, true},
      {"ReduceL1", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<4>, true},
      {"ReduceL2", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<5>, true},
      {"ReduceLogSum", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<9>, true},
      {"ReduceLogSumExp", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<6>, true},
      {"ReduceMin", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<3>, true},
      {"ReduceProd", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<7>, true},
      {"ReduceSumSquare", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<8>, true},
      {"Round", {}, 1, 1, nullptr, unary<bitgrad::round>, true},
      {"Selu", {"alpha", "gamma"}, 1, 1, nullptr, param_act<1>, true},
      {"Sign", {}, 1, 1, nullptr, unary<bitgrad::sign>, true},
      {"Sin", {}, 1, 1, nullptr, unary<bitgrad::sin>, true},
      {"Softsign", {}, 1, 1, nullptr, unary<bitgrad::softsign>, true},
      {"Sum", {}, 1, kMany, nullptr, variadic<2>, true},
      {"Tan", {}, 1, 1, nullptr, unary<bitgrad::tan>, true},
      {"ThresholdedRelu", {"alpha"}, 1, 1, nullptr, param_act<4>, true},
      {"Add", {}, 2, 2, nullptr, arith<0>, true},
      {"And", {}, 2, 2, nullptr, logical<1>, true},
      {"AveragePool", {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}, 1, 1, check_spatial, pool_op<false>, true},
      {"BatchNormalization", {"epsilon", "momentum", "training_mode"}, 5, 5, check_batch_norm, batch_norm_op, false},
      {"Cast", {"to"}, 1, 1, [](const Node& n, const GraphInfo&) -> std::string {
         auto it = n.attrs.find("to");
         if (it == n.attrs.end()) return "attribute to is required";
         const int to = static_cast<int>(it->second->i);
         if (!is_float(to) && !is_int(to) && to != kBool) return std::string("cast to ") + elem_type_name(to) + " (bitgrad holds float, double, int64, int32, bool)";
         return "";
       }, cast_op, true},
      {"Ceil", {}, 1, 1, nullptr, unary<bitgrad::ceil>, true},
      {"Clip", {}, 1, 3, nullptr, clip_op, true},
      {"Concat", {"axis"}, 1, kMany, nullptr, concat_op, true},
      {"Constant", {"value", "value_float", "value_floats", "value_int", "value_ints"}, 0, 0, check_constant, constant_op, true},
      {"ConstantOfShape", {"value"}, 1, 1, nullptr, constant_of_shape, true},
      {"Conv", {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}, 2, 3, check_spatial, conv_op, true},
      {"Div", {}, 2, 2, nullptr, arith<3>, true},
      {"Dropout", {"seed"}, 1, 3, check_dropout, dropout_op, false},
      {"Equal", {}, 2, 2, nullptr, compare<0>, true},
      {"Erf", {}, 1, 1, nullptr, unary<bitgrad::erf>, true},
      {"Exp", {}, 1, 1, nullptr, unary<bitgrad::exp>, true},
      {"Expand", {}, 2, 2, nullptr, expand_op, true},
      {"Flatten", {"axis"}, 1, 1, nullptr, flatten_op, true},
      {"Floor", {}, 1, 1, nullptr, unary<bitgrad::floor>, true},
      {"GRU", {"activations", "direction", "hidden_size", "layout", "linear_before_reset", "activation_alpha", "activation_beta", "clip"}, 3, 6,
       check_recurrent, recurrent_op<false>, true},
      {"Gather", {"axis"}, 2, 2, nullptr, gather_op, true},
      {"Gemm", {"alpha", "beta", "transA", "transB"}, 2, 3, nullptr, gemm_op, true},
      {"GlobalAveragePool", {}, 1, 1, nullptr, global_pool<false>, true},
      {"GlobalMaxPool", {}, 1, 1, nullptr, global_pool<true>, true},
      {"Greater", {}, 2, 2, nullptr, compare<2>, true},
      {"Identity", {}, 1, 1, nullptr, identity, true},
      {"LSTM", {"activations", "direction", "hidden_size", "input_forget", "layout", "activation_alpha", "activation_beta", "clip"}, 3, 8,
       check_recurrent, recurrent_op<true>, true},
      {"LayerNormalization", {"axis", "epsilon", "stash_type"}, 1, 3, check_layer_norm, layer_norm_op, true},
      {"LeakyRelu", {"alpha"}, 1, 1, nullptr, leaky_relu_op, true},
      {"Less", {}, 2, 2, nullptr, compare<1>, true},
      {"Log", {}, 1, 1, nullptr, unary<bitgrad::log>, true},
      {"LogSoftmax", {"axis"}, 1, 1, nullptr, softmax_op<true>, true},
      {"MatMul", {}, 2, 2, nullptr, matmul_op, true},
      {"MaxPool", {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}, 1, 1, check_spatial, pool_op<true>, true},
      {"Mul", {}, 2, 2, nullptr, arith<2>, true},
      {"Neg", {}, 1, 1, nullptr, neg_op, true},
      {"Not", {}, 1, 1, nullptr, logical<0>, true},
      {"Or", {}, 2, 2, nullptr, logical<2>, true},
      {"Pow", {}, 2, 2, nullptr, pow_op, true},
      {"Range", {}, 3, 3, nullptr, range_op, true},
      {"Reciprocal", {}, 1, 1, nullptr, unary<bitgrad::reciprocal>, true},
      {"ReduceMax", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<2>, true},
      {"ReduceMean", {"axes", "keepdims"}, 1, 1, nullptr, reduce_op<0>, true},
      {"ReduceSum", {"keepdims", "noop_with_empty_axes"}, 1, 2, nullptr, reduce_op<1>, true},
      {"Relu", {}, 1, 1, nullptr, unary<bitgrad::relu>, true},
      {"Reshape", {"allowzero"}, 2, 2, nullptr, reshape_op, true},
      {"Shape", {"end", "start"}, 1, 1, nullptr, shape_op, true},
      {"Sigmoid", {}, 1, 1, nullptr, unary<bitgrad::sigmoid>, true},
      {"Size", {}, 1, 1, nullptr, size_op, true},
      {"Slice", {}, 3, 5, nullptr, slice_op, true},
      {"Softmax", {"axis"}, 1, 1, nullptr, softmax_op<false>, true},
      {"Softplus", {}, 1, 1, nullptr, unary<bitgrad::softplus>, true},
      {"Split", {"axis"}, 1, 2, nullptr, split_op, true},
      {"Sqrt", {}, 1, 1, nullptr, unary<bitgrad::sqrt>, true},
      {"Squeeze", {}, 1, 2, nullptr, squeeze_op, true},
      {"Sub", {}, 2, 2, nullptr, arith<1>, true},
      {"Tanh", {}, 1, 1, nullptr, unary<bitgrad::tanh>, true},
      {"Transpose", {"perm"}, 1, 1, nullptr, transpose_op, true},
      {"Trilu", {"upper"}, 1, 2, nullptr, trilu_op, true},
      {"Unsqueeze", {}, 2, 2, nullptr, unsqueeze_op, true},
      {"Where", {}, 3, 3, nullptr, where_op, true},
      {"Xor", {}, 2, 2, nullptr, logical<3>, true},
  };
  return t;
}

}  // namespace

const OpDef* find_op(const std::string& type) {
  for (const OpDef& d : table())
    if (type == d.type) return &d;
  return nullptr;
}

std::vector<std::string> op_types() {
  std::vector<std::string> out;
  for (const OpDef& d : table()) out.emplace_back(d.type);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace bitgrad::onnx
