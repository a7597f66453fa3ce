// Elementwise ops, forward and backward side by side.
// Shapes: binary ops broadcast a [..] and b [..] to y [broadcast(a, b)]; unary ops keep x's.
// The gradient of a broadcast input is summed down to its shape by the axis rules.
#include <cmath>

#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"
#include "tensor/strided.hpp"

// A line of bitgrad/op_list.hpp without its case in a switch below does not build
#pragma GCC diagnostic error "-Wswitch"

namespace bitgrad {
namespace {
using autograd::Node;
using kern::Bcast;
using kern::Binary;
using kern::Unary;

// ---- raw forward: y = a op b with broadcasting ------------------------------------------
// Finds a kernel pattern for `small` broadcast against the full shape `out`.
bool pattern(const Shape& small, const Shape& out, bool& row, std::int64_t& outer, std::int64_t& inner) {
  const int n = out.ndim(), lead = n - small.ndim();
  auto dim = [&](int d) { return d < lead ? std::int64_t(1) : small[d - lead]; };
  if (small.numel() == 1) {
    row = false;
    outer = 1;
    inner = out.numel();
    return true;
  }
  // row: ones then equal trailing dims
  int k = 0;
  while (k < n && dim(k) == 1 && out[k] != 1) ++k;
  bool ok = true;
  for (int d = k; d < n; ++d) ok = ok && dim(d) == out[d];
  if (ok) {
    row = true;
    inner = 1;
    for (int d = k; d < n; ++d) inner *= out[d];
    outer = inner ? out.numel() / inner : 0;
    return true;
  }
  // col: equal leading dims then ones
  k = n;
  while (k > 0 && dim(k - 1) == 1 && out[k - 1] != 1) --k;
  ok = true;
  for (int d = 0; d < k; ++d) ok = ok && dim(d) == out[d];
  if (ok) {
    row = false;
    outer = 1;
    for (int d = 0; d < k; ++d) outer *= out[d];
    inner = outer ? out.numel() / outer : 0;
    return true;
  }
  return false;
}

// A broadcast that no single kernel pattern covers, such as [N, C, H, W] op [1, C, 1, 1]:
// out's dimensions (ones dropped) collapse into runs where `small` is
// either whole or 1. The last two runs are one row or col kernel call; it repeats over the
// outer runs, the repeats split over the kernel threads (a call inside a chunk runs serially).
// Each element is still one operation on the same two operands: the bits of the expanded copy.
struct Repeated {
  bool row = false;
  std::int64_t outer = 0, inner = 0;   // of one kernel call
  std::vector<std::int64_t> small_at;  // small's offset for each repeat
};
bool repeated_pattern(const Shape& small, const Shape& out, Repeated& r) {
  const int n = out.ndim(), lead = n - small.ndim();
  std::vector<std::pair<bool, std::int64_t>> runs;  // (whole in small, size)
  for (int d = 0; d < n; ++d) {
    if (out[d] == 1) continue;
    const std::int64_t sd = d < lead ? 1 : small[d - lead];
    const bool whole = sd == out[d];
    if (!whole && sd != 1) return false;
    if (!runs.empty() && runs.back().first == whole) runs.back().second *= out[d];
    else runs.emplace_back(whole, out[d]);
  }
  if (runs.size() < 3) return false;
  const std::size_t k = runs.size() - 2;  // runs[k], runs[k + 1]: the kernel call
  r.row = runs[k + 1].first;             // [1, W] pattern: small repeats over the call's rows
  r.outer = runs[k].second;
  r.inner = runs[k + 1].second;
  const std::int64_t call_small = r.row ? r.inner : r.outer;
  std::int64_t reps = 1;
  for (std::size_t j = 0; j < k; ++j) reps *= runs[j].second;
  r.small_at.assign(static_cast<std::size_t>(reps), 0);
  for (std::int64_t i = 0; i < reps; ++i) {  // mixed radix over the outer runs, the last fastest
    std::int64_t rem = i, at = 0, stride = call_small;
    for (std::size_t j = k; j-- > 0;) {
      const std::int64_t idx = rem % runs[j].second;
      rem /= runs[j].second;
      if (runs[j].first) {
        at += idx * stride;
        stride *= runs[j].second;
      }
    }
    r.small_at[static_cast<std::size_t>(i)] = at;
  }
  return true;
}

template <class T>
void binary_repeated(Binary op, bool small_left, const Repeated& r, const T* big, const T* small, T* y) {
  const kern::Table<T>& t = kern::active<T>();
  const Bcast bc = r.row ? (small_left ? Bcast::rrow : Bcast::row) : (small_left ? Bcast::rcol : Bcast::col);
  const std::int64_t per = r.outer * r.inner, reps = static_cast<std::int64_t>(r.small_at.size());
  const std::int64_t grain = per >= 32768 ? 1 : 32768 / (per ? per : 1);
  kern::parallel_for(reps, grain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) t.binary(op, bc, big + i * per, small + r.small_at[static_cast<std::size_t>(i)], y + i * per, r.outer, r.inner);
  });
}

Tensor binary_raw(Binary op, const Tensor& a, const Tensor& b, const char* name) {
  ops::check_same_dtype(name, a, b);
  const Shape out_shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor y = Tensor::empty(out_shape, a.dtype());
  if (out_shape.numel() == 0) return y;
  Tensor big = a, small = b;
  Bcast bc = Bcast::same;
  std::int64_t outer = 1, inner = out_shape.numel();
  bool row = false;
  if (a.shape() == b.shape()) {
    bc = Bcast::same;
  } else if (a.shape() == out_shape && pattern(b.shape(), out_shape, row, outer, inner)) {
    bc = row ? Bcast::row : Bcast::col;
  } else if (b.shape() == out_shape && pattern(a.shape(), out_shape, row, outer, inner)) {
    big = b;
    small = a;
    bc = row ? Bcast::rrow : Bcast::rcol;
  } else {
    Repeated rep;
    const bool b_small = a.shape() == out_shape && repeated_pattern(b.shape(), out_shape, rep);
    if (b_small || (b.shape() == out_shape && repeated_pattern(a.shape(), out_shape, rep))) {
      Tensor bg = kern::contiguous(b_small ? a : b), sm = kern::contiguous(b_small ? b : a);
      BITGRAD_DISPATCH_FLOAT(a.dtype(), name, T, [&] {
        binary_repeated<T>(op, !b_small, rep, bg.data<T>(), sm.data<T>(), kern::out_ptr<T>(y));
      });
      return y;
    }
    big = expand(a, out_shape).contiguous_copy();
    small = expand(b, out_shape).contiguous_copy();
  }
  Tensor bg = kern::contiguous(big), sm = kern::contiguous(small);
  BITGRAD_DISPATCH_FLOAT(a.dtype(), name, T, [&] {
    kern::active<T>().binary(op, bc, bg.data<T>(), sm.data<T>(), kern::out_ptr<T>(y), outer, inner);
  });
  return y;
}

Tensor unary_raw(Unary op, const Tensor& x, const char* name) {
  ops::check_float(name, x);
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), name, T, [&] { kern::active<T>().unary(op, xc.data<T>(), kern::out_ptr<T>(y), x.numel()); });
  return y;
}

Tensor act_grad_raw(kern::ActGrad op, const Tensor& v, const Tensor& g) {
  Tensor vc = kern::contiguous(v), gc = kern::contiguous(g);
  Tensor out = Tensor::empty(v.shape(), v.dtype());
  BITGRAD_DISPATCH_FLOAT(v.dtype(), "activation backward", T, [&] {
    kern::active<T>().act_grad(op, vc.data<T>(), gc.data<T>(), kern::out_ptr<T>(out), v.numel());
  });
  return out;
}

// ---- add / sub --------------------------------------------------------------------------
void add_bw(Node& n, const Tensor& g, Tensor* gi) {
  if (n.in[0].needs_grad()) gi[0] = ops::sum_to(g, n.in_shape[0]);
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(g, n.in_shape[1]);
}
void sub_bw(Node& n, const Tensor& g, Tensor* gi) {
  if (n.in[0].needs_grad()) gi[0] = ops::sum_to(g, n.in_shape[0]);
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(neg(g), n.in_shape[1]);
}

// ---- mul: ga = g*b, gb = g*a ------------------------------------------------------------
void mul_bw(Node& n, const Tensor& g, Tensor* gi) {
  if (n.in[0].needs_grad()) gi[0] = ops::sum_to(mul(g, n.saved_tensor(1)), n.in_shape[0]);
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(mul(g, n.saved_tensor(0)), n.in_shape[1]);
}

// ---- div: t = g/b; ga = t, gb = -(t*y) with y = a/b ----------------------------------------
void div_bw(Node& n, const Tensor& g, Tensor* gi) {
  Tensor t = div(g, n.saved_tensor(1));
  if (n.in[0].needs_grad()) gi[0] = ops::sum_to(t, n.in_shape[0]);
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(neg(mul(t, n.saved_tensor(2))), n.in_shape[1]);
}

// ---- pow: ga = g*(b*a^(b-1)), gb = g*(y*log a) ---------------------------------------------
void pow_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor& a = n.saved_tensor(0);
  const Tensor& b = n.saved_tensor(1);
  if (n.in[0].needs_grad()) gi[0] = ops::sum_to(mul(g, mul(b, pow(a, sub(b, 1.0)))), n.in_shape[0]);
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(mul(g, mul(n.saved_tensor(2), log(a))), n.in_shape[1]);
}

// ---- maximum / minimum: the larger (smaller) input takes g; ties give g/2 to each ----------
template <bool Max>
void minmax_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Shape& ys = g.shape();
  Tensor a = expand(n.saved_tensor(0), ys).contiguous_copy();
  Tensor b = expand(n.saved_tensor(1), ys).contiguous_copy();
  Tensor gc = kern::contiguous(g);
  Tensor ga = Tensor::empty(ys, g.dtype()), gb = Tensor::empty(ys, g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), Max ? "maximum" : "minimum", T, [&] {
    const T *pa = a.data<T>(), *pb = b.data<T>(), *pg = gc.data<T>();
    T *qa = kern::out_ptr<T>(ga), *qb = kern::out_ptr<T>(gb);
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      const bool a_wins = Max ? pa[i] > pb[i] : pa[i] < pb[i];
      const bool b_wins = Max ? pb[i] > pa[i] : pb[i] < pa[i];
      const bool tie = pa[i] == pb[i];
      const T half = pg[i] * T(0.5);
      qa[i] = a_wins ? pg[i] : (tie ? half : T(0));
      qb[i] = b_wins ? pg[i] : (tie ? half : T(0));
    }
  });
  if (n.in[0].needs_grad()) gi[0] = ops::sum_to(ga, n.in_shape[0]);
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(gb, n.in_shape[1]);
}

Tensor binary_op(Binary op, const Tensor& a, const Tensor& b, const char* name, CallSite site) {
  Tensor y = binary_raw(op, a, b, name);
  switch (op) {
    case Binary::add: ops::record(name, add_bw, {&a, &b}, y, site); break;
    case Binary::sub: ops::record(name, sub_bw, {&a, &b}, y, site); break;
    case Binary::mul:
      if (Node* n = ops::record(name, mul_bw, {&a, &b}, y, site)) {
        n->save(0, a);
        n->save(1, b);
      }
      break;
    case Binary::div:
      if (Node* n = ops::record(name, div_bw, {&a, &b}, y, site)) {
        n->save(1, b);
        n->save(2, y);
      }
      break;
    case Binary::pow:
      if (Node* n = ops::record(name, pow_bw, {&a, &b}, y, site)) {
        n->save(0, a);
        n->save(1, b);
        n->save(2, y);
      }
      break;
    case Binary::maximum:
    case Binary::minimum:
      if (Node* n = ops::record(name, op == Binary::maximum ? minmax_bw<true> : minmax_bw<false>, {&a, &b}, y, site)) {
        n->save(0, a);
        n->save(1, b);
      }
      break;
    case Binary::count: break;
  }
  return y;
}

// ---- unary ---------------------------------------------------------------------------
void neg_bw(Node&, const Tensor& g, Tensor* gi) { gi[0] = neg(g); }
void exp_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = mul(g, n.saved_tensor(0)); }          // g*y
void log_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = div(g, n.saved_tensor(0)); }          // g/x
void sqrt_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = div(g, mul(n.saved_tensor(0), 2.0)); }  // g/(2y)
// act_x / act_y lines of op_list.hpp: the activation's gradient kernel on the saved x or y
template <kern::ActGrad A>
void act_bw(Node& n, const Tensor& g, Tensor* gi) {
  gi[0] = act_grad_raw(A, n.saved_tensor(0), g);
}
// zero lines (sign, floor, ceil, round): piecewise constant, the gradient is +0 everywhere
// (numerics.md §32); a node is still recorded, so y requires grad as in PyTorch
void zero_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = Tensor::zeros(n.in_shape[0], g.dtype()); }
// saved: x and e = erf(x/sqrt 2) in f64 from the forward (gelu_keep), so the backward's
// Phi(x) = 0.5 (1 + e) costs no second erf
void gelu_bw(Node& n, const Tensor& g, Tensor* gi) {
  Tensor x = kern::contiguous(n.saved_tensor(0));
  const Tensor& e = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "gelu backward", T, [&] {
    kern::active<T>().gelu_grad_kept(x.data<T>(), e.data<double>(), gc.data<T>(), kern::out_ptr<T>(out), x.numel());
  });
  gi[0] = out;
}

Tensor unary_op(Unary op, const Tensor& x, const char* name, autograd::BackwardFn bw, bool save_output, CallSite site) {
  Tensor y = unary_raw(op, x, name);
  if (Node* n = ops::record(name, bw, {&x}, y, site)) n->save(0, save_output ? y : x);
  return y;
}

// ---- pow with a scalar exponent: g*(p*x^(p-1)) -------------------------------------------
struct PowScalarSaved {
  double exponent;
};
void pow_scalar_bw(Node& n, const Tensor& g, Tensor* gi) {
  const double p = n.payload<PowScalarSaved>().exponent;
  gi[0] = mul(g, mul(pow(n.saved_tensor(0), p - 1.0), p));
}

// ---- clamp: g where lo <= x <= hi, else 0 --------------------------------------------------
struct ClampSaved {
  double lo, hi;
};
void clamp_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor x = kern::contiguous(n.saved_tensor(0));
  const Tensor gc = kern::contiguous(g);
  Tensor out = Tensor::empty(g.shape(), g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "clamp", T, [&] {
    const ClampSaved& s = n.payload<ClampSaved>();
    const T lo = static_cast<T>(s.lo), hi = static_cast<T>(s.hi);
    const T *px = x.data<T>(), *pg = gc.data<T>();
    T* po = kern::out_ptr<T>(out);
    kern::parallel_for(g.numel(), 1 << 15, [&](std::int64_t b, std::int64_t e) {
      const T* __restrict xs = px + b;  // restrict: the loop vectorises
      const T* __restrict gs = pg + b;
      T* __restrict os = po + b;
      const T l = lo, h = hi;  // by value: a reference could alias os
      for (std::int64_t i = 0; i < e - b; ++i) {
        const T v = xs[i], gv = gs[i];  // both loaded: a select, no branch
        os[i] = ((v >= l) & (v <= h)) ? gv : T(0);
      }
    });
  });
  gi[0] = out;
}

// ---- where: ga = g where cond, gb = g where not cond ----------------------------------------
void where_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor& cond = n.saved_tensor(0);
  Tensor zero = Tensor::zeros(Shape{}, g.dtype());
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(where(cond, g, zero), n.in_shape[1]);
  if (n.in[2].needs_grad()) gi[2] = ops::sum_to(where(cond, zero, g), n.in_shape[2]);
}

}  // namespace

#define BITGRAD_OPLIST_DEFINE_BINARY(name, ...) \
  Tensor name(const Tensor& a, const Tensor& b, CallSite site) { return binary_op(Binary::name, a, b, #name, site); }
BITGRAD_BINARY_OPS(BITGRAD_OPLIST_DEFINE_BINARY)
#undef BITGRAD_OPLIST_DEFINE_BINARY

Tensor add(const Tensor& a, double s, CallSite site) { return add(a, ops::scalar_like(a, s), site); }
Tensor sub(const Tensor& a, double s, CallSite site) { return sub(a, ops::scalar_like(a, s), site); }
Tensor rsub(double s, const Tensor& a, CallSite site) { return sub(ops::scalar_like(a, s), a, site); }
Tensor mul(const Tensor& a, double s, CallSite site) { return mul(a, ops::scalar_like(a, s), site); }
Tensor div(const Tensor& a, double s, CallSite site) { return div(a, ops::scalar_like(a, s), site); }
Tensor rdiv(double s, const Tensor& a, CallSite site) { return div(ops::scalar_like(a, s), a, site); }
// the number rounded to a's dtype; ties with it split the gradient as maximum(a, b) does
Tensor maximum(const Tensor& a, double s, CallSite site) { return maximum(a, ops::scalar_like(a, s), site); }
Tensor minimum(const Tensor& a, double s, CallSite site) { return minimum(a, ops::scalar_like(a, s), site); }

Tensor pow(const Tensor& a, double p, CallSite site) {
  Tensor y = binary_raw(Binary::pow, a, ops::scalar_like(a, p), "pow");
  if (Node* n = ops::record("pow", pow_scalar_bw, {&a}, y, site)) {
    n->save(0, a);
    n->set_payload(PowScalarSaved{p});
  }
  return y;
}

Tensor neg(const Tensor& x, CallSite site) { return unary_op(Unary::neg, x, "neg", neg_bw, false, site); }
Tensor exp(const Tensor& x, CallSite site) { return unary_op(Unary::exp, x, "exp", exp_bw, true, site); }
Tensor log(const Tensor& x, CallSite site) { return unary_op(Unary::log, x, "log", log_bw, false, site); }
Tensor sqrt(const Tensor& x, CallSite site) { return unary_op(Unary::sqrt, x, "sqrt", sqrt_bw, true, site); }
// The act_x / act_y lines: forward kernel, and backward act_grad of the same name on x or y
#define BITGRAD_OPLIST_ACT_SAVES_act_x false
#define BITGRAD_OPLIST_ACT_SAVES_act_y true
#define BITGRAD_OPLIST_DEFINE_ACT(name, grad, ...)                                                             \
  BITGRAD_OPLIST_IF_ACT(grad)(Tensor name(const Tensor& x, CallSite site) {                                  \
    return unary_op(Unary::name, x, #name, act_bw<kern::ActGrad::name>, BITGRAD_OPLIST_ACT_SAVES_##grad, site); \
  })
BITGRAD_UNARY_OPS(BITGRAD_OPLIST_DEFINE_ACT)
#undef BITGRAD_OPLIST_DEFINE_ACT
// The zero lines: forward kernel, a backward of zeros (nothing saved)
#define BITGRAD_OPLIST_DEFINE_ZERO(name, grad, ...)                           \
  BITGRAD_OPLIST_IF_ZERO(grad)(Tensor name(const Tensor& x, CallSite site) { \
    Tensor y = unary_raw(Unary::name, x, #name);                              \
    ops::record(#name, zero_bw, {&x}, y, site);                               \
    return y;                                                                 \
  })
BITGRAD_UNARY_OPS(BITGRAD_OPLIST_DEFINE_ZERO)
#undef BITGRAD_OPLIST_DEFINE_ZERO
// y [..] = x (0.5)(1 + erf(x/sqrt 2)); backward gelu_bw. When the graph records, the forward
// also keeps erf(x/sqrt 2) in f64 (8 bytes an element) for the backward.
Tensor gelu(const Tensor& x, CallSite site) {
  if (!grad_enabled() || !x.requires_grad()) return unary_op(Unary::gelu, x, "gelu", gelu_bw, false, site);
  ops::check_float("gelu", x);
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor e = Tensor::empty(x.shape(), DType::f64);
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "gelu", T, [&] {
    kern::active<T>().gelu_keep(xc.data<T>(), kern::out_ptr<T>(y), kern::out_ptr<double>(e), x.numel());
  });
  if (Node* n = ops::record("gelu", gelu_bw, {&x}, y, site)) {
    n->save(0, x);
    n->save(1, e);
  }
  return y;
}

// ONNX's Clip (and PyTorch's clamp): with lo > hi every element is hi, and the gradient +0
Tensor clamp(const Tensor& x, double lo, double hi, CallSite site) {
  ops::check_float("clamp", x);
  Tensor y = minimum(maximum(x.detach(), ops::scalar_like(x, lo)), ops::scalar_like(x, hi)).detach();
  if (Node* n = ops::record("clamp", clamp_bw, {&x}, y, site)) {
    n->save(0, x);
    n->set_payload(ClampSaved{lo, hi});
  }
  return y;
}

// an absent side is an infinite bound: maximum(x, -inf) and minimum(x, +inf) are x itself (NaN
// included), so clamp_min(x, lo) has the bits of maximum(x, lo) and the gradient of clamp
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi, CallSite site) {
  BITGRAD_CHECK(lo || hi, "clamp", "needs a lower bound, an upper bound or both");
  return clamp(x, lo ? *lo : -INFINITY, hi ? *hi : INFINITY, site);
}
Tensor clamp_min(const Tensor& x, double lo, CallSite site) { return clamp(x, lo, INFINITY, site); }
Tensor clamp_max(const Tensor& x, double hi, CallSite site) { return clamp(x, -INFINITY, hi, site); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, CallSite site) {
  BITGRAD_CHECK(a.defined() && b.defined() && cond.defined(), "where", "an input is undefined");
  BITGRAD_CHECK(a.dtype() == b.dtype(), "where", "dtypes differ: ", dtype_name(a.dtype()), " ", a.shape().str(), " and ",
                dtype_name(b.dtype()), " ", b.shape().str());
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  // broadcast views (stride 0), walked in place: no expanded copies of a mask or a scalar
  const Tensor c = expand(cond.detach(), s), av = expand(a.detach(), s), bv = expand(b.detach(), s);
  Tensor y = Tensor::empty(s, a.dtype());
  // a and b may also be i64 or u8 (ONNX's Where on integers): then there is no gradient
  auto body = [&](auto z) {
    using T = decltype(z);
    const T *pa = av.data<T>(), *pb = bv.data<T>();
    T* py = kern::out_ptr<T>(y);
    auto select = [&](const auto* pc) {  // nonzero (and NaN) is true, whatever the dtype
      detail::for_each_strided3(s, c.strides(), av.strides(), bv.strides(),
                                [&](std::int64_t o, std::int64_t ic, std::int64_t ia, std::int64_t ib) {
                                  py[o] = pc[ic] != 0 ? pa[ia] : pb[ib];
                                });
    };
    switch (c.dtype()) {
      case DType::f32: select(c.data<float>()); break;
      case DType::f64: select(c.data<double>()); break;
      case DType::i64: select(c.data<std::int64_t>()); break;
      case DType::u8: select(c.data<std::uint8_t>()); break;
      default: bitgrad::detail::fail("where", "the condition must be f32, f64, i64 or u8, got ", dtype_name(c.dtype()));
    }
  };
  switch (a.dtype()) {
    case DType::f32: body(float{}); break;
    case DType::f64: body(double{}); break;
    case DType::i64: body(std::int64_t{}); break;
    case DType::u8: body(std::uint8_t{}); break;
    default: bitgrad::detail::fail("where", "a and b must be f32, f64, i64 or u8, got ", dtype_name(a.dtype()));
  }
  if (!is_floating(a.dtype())) return y;
  Tensor condt = cond;
  if (Node* n = ops::record("where", where_bw, {&condt, &a, &b}, y, site)) n->save(0, cond);
  return y;
}

}  // namespace bitgrad
