// Reductions over any set of axes (ONNX Reduce*), forward and backward side by side
// (numerics.md §28). x [..] -> y [kept dims] (keepdim: ones at the reduced axes); an empty
// axes list reduces over all axes.
//   sum_square: axis rules with fma(x, x, lane) lanes;  backward x * (g * 2)
//   norm_l2:    sqrt(sum_square);                        backward x * (g / y), 0 where y = 0
//   norm_l1:    axis rules over |x|;                     backward g * sign(x) (0 at 0)
//   log_sum:    log(sum(x)) (composed)
//   logsumexp:  m = amax, s = axis rules over exp(x - m), y = m + log(s); backward g * exp(x - y)
//   prod:       a chain per output over the reduced elements in row-major order;
//               backward g * (prefix * suffix) (no division, so zeros are exact)
//   var/stddev: d = x - mean, axis rules with fma(d, d), / (count - correction); backward d * c
//   amax/amin:  exact; gradient to the first extremum (row-major over the reduced elements)
//   any/all:    u8, exact
//   argmax/argmin(select_last): exact
//   sum_of/mean_of/max_of/min_of: left-to-right folds of add / maximum / minimum (composed)
#include <algorithm>
#include <cmath>

#include "bitgrad/math.hpp"
#include "kernels/index.hpp"
#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// The reduced axes (sorted; empty given = all), the shapes, and the permutation that moves the
// reduced axes last (their order kept): x viewed [R, L] after it.
struct Plan {
  std::vector<int> axes;
  Shape in, keep, out;  // input, keepdim shape, result shape
  std::vector<int> perm;
  std::int64_t R = 1, L = 1;
};

Plan make_plan(const Shape& in, const std::vector<int>& axes_in, bool keepdim, const char* op) {
  Plan p;
  p.in = in;
  if (axes_in.empty())
    for (int d = 0; d < in.ndim(); ++d) p.axes.push_back(d);
  else p.axes = ops::normalize_axes(in, axes_in, op);
  p.keep = ops::keepdim_shape(p.in, p.axes);
  Shape kept;
  for (int d = 0; d < in.ndim(); ++d)
    if (!std::binary_search(p.axes.begin(), p.axes.end(), d)) {
      kept.push_back(p.in[d]);
      p.perm.push_back(d);
      p.R *= p.in[d];
    }
  for (int d : p.axes) {
    p.perm.push_back(d);
    p.L *= p.in[d];
  }
  p.out = keepdim ? p.keep : kept;
  return p;
}
Plan make_plan(const Tensor& x, const std::vector<int>& axes, bool keepdim, const char* op) {
  BITGRAD_CHECK(x.defined(), op, "the input is undefined");
  return make_plan(x.shape(), axes, keepdim, op);
}

// What a backward needs to rebuild the plan (a node's payload holds plain values only)
struct PlanSaved {
  std::uint32_t mask = 0;  // bit d: axis d reduced
  bool keepdim = false;
  double den = 0;  // var/stddev: count - correction
};
PlanSaved saved_of(const Plan& p, double den = 0) {
  PlanSaved s;
  for (int a : p.axes) s.mask |= 1u << a;
  s.keepdim = p.out.ndim() == p.in.ndim();
  s.den = den;
  return s;
}
Plan plan_of(Node& n) {
  const PlanSaved& s = n.payload<PlanSaved>();
  std::vector<int> axes;
  for (int d = 0; d < n.in_shape[0].ndim(); ++d)
    if (s.mask & (1u << d)) axes.push_back(d);
  if (axes.empty()) return make_plan(n.in_shape[0], {}, s.keepdim, "backward");  // a 0-d input
  return make_plan(n.in_shape[0], axes, s.keepdim, "backward");
}

// x as a contiguous [R, L] (reduced axes moved last)
Tensor moved(const Tensor& x, const Plan& p) {
  Shape sh, st;
  for (int d : p.perm) {
    sh.push_back(x.shape()[d]);
    st.push_back(x.strides()[d]);
  }
  return kern::contiguous(Tensor::view_of(x, sh, st, x.offset())).contiguous_copy();
}
// the inverse of moved: m [R, L] (contiguous) back to the input's layout
Tensor moved_back(const Tensor& m, const Plan& p) {
  Shape msh;
  for (int d : p.perm) msh.push_back(p.in[d]);
  const Shape mst = contiguous_strides(msh);
  Shape st(p.in);
  for (std::size_t k = 0; k < p.perm.size(); ++k) st[p.perm[k]] = mst[static_cast<int>(k)];
  return kern::contiguous(Tensor::view_of(m, p.in, st, m.offset())).contiguous_copy();
}
Tensor as_shape(const Tensor& t, const Shape& s) { return Tensor::view_of(t, s, contiguous_strides(s), t.offset()); }
// g (result shape) broadcast over the reduced axes, contiguous in the input's layout
Tensor spread(const Tensor& g, const Plan& p) {
  NoGradGuard ng;
  return expand(as_shape(kern::contiguous(g), p.keep), p.in).contiguous_copy();
}

// The sum of x (or of fma squares, sq) over p.axes by the axis rules of numerics.md §6:
// reduced axes other than 0 moved last by the row rule, then axis 0 by the batch rule; a 1-d
// tensor by the row rule. Result contiguous in p.keep's element order.
Tensor rule_sum(const Tensor& x, const Plan& p, bool sq) {
  if (x.ndim() == 0) {
    Plan q = make_plan(Shape{1}, {0}, false, "reduce");
    return as_shape(rule_sum(as_shape(kern::contiguous(x), Shape{1}), q, sq), Shape{});
  }
  if (!sq) return ops::reduce_sum(x, p.axes);
  const Shape& s = x.shape();
  Tensor xc = kern::contiguous(x);
  const bool has0 = p.axes.front() == 0;
  if (x.ndim() == 1 || !has0 || p.axes.size() > 1) {
    // stage 1: the row rule (fma squares) over the reduced axes other than 0 (all of a 1-d tensor)
    std::vector<int> rest;
    for (int a : p.axes)
      if (a != 0 || x.ndim() == 1) rest.push_back(a);
    Plan q = make_plan(x, rest, false, "reduce");
    Tensor m = moved(x, q);
    Tensor r = Tensor::empty(q.out, x.dtype());
    BITGRAD_DISPATCH_FLOAT(x.dtype(), "reduce", T, [&] {
      if (q.L == 0) std::fill(kern::out_ptr<T>(r), kern::out_ptr<T>(r) + r.numel(), T(0));
      else kern::active<T>().sumsq_rows(m.data<T>(), nullptr, q.R, q.L, kern::out_ptr<T>(r));
    });
    if (!has0 || x.ndim() == 1) return r;
    // stage 2: the batch rule over axis 0 of what is left
    Tensor out = Tensor::empty(Shape{p.R}, x.dtype());  // the kept dims, all but axis 0's
    BITGRAD_DISPATCH_FLOAT(x.dtype(), "reduce", T, [&] {
      kern::active<T>().sum_cols(r.data<T>(), s[0], p.R, kern::out_ptr<T>(out));
    });
    return out;
  }
  // axis 0 alone: each square is fma(x, x, +0) = x * x, then the batch rule
  Tensor sqr = Tensor::empty(s, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "reduce", T, [&] {
    kern::active<T>().sumsq_rows(xc.data<T>(), nullptr, xc.numel(), 1, kern::out_ptr<T>(sqr));
  });
  return ops::reduce_sum(sqr, {0});
}

Tensor finish(Tensor y, const Plan& p) { return as_shape(kern::contiguous(y), p.out); }

template <class F>
Tensor map_float(const Tensor& x, F f) {  // y[i] = f(x[i]) elementwise, x's dtype
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "reduce", T, [&] {
    const T* px = xc.data<T>();
    T* py = kern::out_ptr<T>(y);
    for (std::int64_t i = 0; i < xc.numel(); ++i) py[i] = kern::canon(static_cast<T>(f(px[i])));
  });
  return y;
}


// ---- sum_square: saved 0 = x -------------------------------------------------------------
void sum_square_bw(Node& n, const Tensor& g, Tensor* gi) {
  NoGradGuard ng;
  gi[0] = mul(n.saved_tensor(0), spread(mul(g, 2.0), plan_of(n)));
}
// ---- norm_l2: saved 0 = x, 1 = y ---------------------------------------------------------------
void norm_l2_bw(Node& n, const Tensor& g, Tensor* gi) {
  NoGradGuard ng;
  const Tensor& y = n.saved_tensor(1);
  Tensor c = Tensor::empty(y.shape(), y.dtype());  // g / y, 0 where y = 0 (the subgradient at the origin)
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(y.dtype(), "norm_l2", T, [&] {
    for (std::int64_t i = 0; i < y.numel(); ++i)
      kern::out_ptr<T>(c)[i] = y.data<T>()[i] == T(0) ? T(0) : kern::canon(gc.data<T>()[i] / y.data<T>()[i]);
  });
  gi[0] = mul(n.saved_tensor(0), spread(c, plan_of(n)));
}
// ---- norm_l1: saved 0 = x ------------------------------------------------------------------------
void norm_l1_bw(Node& n, const Tensor& g, Tensor* gi) {
  Tensor gs = spread(g, plan_of(n));
  const Tensor& x = n.saved_tensor(0);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "norm_l1", T, [&] {
    const T* px = x.data<T>();
    const T* pg = gs.data<T>();
    T* po = kern::out_ptr<T>(out);
    for (std::int64_t i = 0; i < x.numel(); ++i) po[i] = px[i] > T(0) ? pg[i] : px[i] < T(0) ? kern::canon(-pg[i]) : T(0);
  });
  gi[0] = out;
}
// ---- logsumexp: saved 0 = x, 1 = y (keepdim shape) -------------------------------------------------
void logsumexp_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Plan p = plan_of(n);
  const Tensor& x = n.saved_tensor(0);
  Tensor ys = spread(n.saved_tensor(1), p);
  Tensor e = Tensor::empty(x.shape(), x.dtype());  // exp(x - y), the difference in f64, rounded once
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "logsumexp", T, [&] {
    for (std::int64_t i = 0; i < x.numel(); ++i)
      kern::out_ptr<T>(e)[i] = kern::canon(static_cast<T>(math::exp(static_cast<double>(x.data<T>()[i]) - static_cast<double>(ys.data<T>()[i]))));
  });
  NoGradGuard ng;
  gi[0] = mul(spread(g, p), e);
}
// ---- prod: saved 0 = x moved [R, L] -------------------------------------------------------------------
void prod_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Plan p = plan_of(n);
  const Tensor& m = n.saved_tensor(0);
  Tensor gc = kern::contiguous(g);
  Tensor gm = Tensor::empty(m.shape(), m.dtype());
  BITGRAD_DISPATCH_FLOAT(m.dtype(), "prod", T, [&] {
    const T* pm = m.data<T>();
    const T* pg = gc.data<T>();
    T* po = kern::out_ptr<T>(gm);
    const std::int64_t L = p.L;
    kern::parallel_for(p.R, 64, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const T* row = pm + r * L;
        T* o = po + r * L;
        T pre = T(1);  // the chain over the elements before l
        for (std::int64_t l = 0; l < L; ++l) {
          o[l] = pre;
          pre = pre * row[l];
        }
        T suf = T(1);  // the chain from the right over the elements after l
        for (std::int64_t l = L - 1; l >= 0; --l) {
          o[l] = kern::canon(pg[r] * (o[l] * suf));
          suf = row[l] * suf;
        }
      }
    });
  });
  gi[0] = moved_back(gm, p);
}
// ---- var / stddev: saved 0 = d = x - mean (input layout), 1 = y -------------------------------------------
template <bool Std>
void var_bw(Node& n, const Tensor& g, Tensor* gi) {
  const PlanSaved& s = n.payload<PlanSaved>();
  const Plan p = plan_of(n);
  const Tensor& y = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  Tensor c = Tensor::empty(y.shape(), y.dtype());
  BITGRAD_DISPATCH_FLOAT(y.dtype(), Std ? "stddev" : "var", T, [&] {
    const T den = static_cast<T>(s.den);
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      const T gv = gc.data<T>()[i], yv = y.data<T>()[i];
      // var: (g * 2) / den; stddev: g / (y * den), 0 where y = 0 (PyTorch's convention)
      kern::out_ptr<T>(c)[i] = Std ? (yv == T(0) ? T(0) : kern::canon(gv / (yv * den))) : kern::canon((gv * T(2)) / den);
    }
  });
  NoGradGuard ng;
  gi[0] = mul(n.saved_tensor(0), spread(c, p));
}
// ---- amax / amin: saved 0 = argmax over [R, L] ----------------------------------------------------------
void amax_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Plan p = plan_of(n);
  const Tensor& idx = n.saved_tensor(0);
  Tensor gc = kern::contiguous(g);
  Tensor gm = Tensor::zeros(Shape{p.R, p.L}, g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "amax", T, [&] {
    for (std::int64_t r = 0; r < p.R; ++r) kern::out_ptr<T>(gm)[r * p.L + idx.data<std::int64_t>()[r]] = gc.data<T>()[r];
  });
  gi[0] = moved_back(gm, p);
}

template <bool Max>
Tensor extreme_axes(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  const char* name = Max ? "amax" : "amin";
  ops::check_float(name, x);
  Plan p = make_plan(x, axes, keepdim, name);
  BITGRAD_CHECK(p.L > 0 || p.R == 0, name, "reduction over an empty set of elements (shape ", x.shape().str(), ")");
  Tensor m = moved(x, p);
  Tensor idx = Tensor::empty(Shape{p.R}, DType::i64);
  Tensor y = Tensor::empty(Shape{p.R}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), name, T, [&] {
    if (p.R) kern::argmax_axis<T, Max>(m.data<T>(), p.R, p.L, 1, kern::out_ptr<std::int64_t>(idx));
    for (std::int64_t r = 0; r < p.R; ++r) kern::out_ptr<T>(y)[r] = m.data<T>()[r * p.L + idx.data<std::int64_t>()[r]];
  });
  y = finish(y, p);
  if (Node* n = ops::record(name, amax_bw, {&x}, y, site)) {
    n->save(0, idx);
    n->set_payload(saved_of(p));
  }
  return y;
}

template <bool Std>
Tensor var_op(const Tensor& x, const std::vector<int>& axes, double correction, bool keepdim, CallSite site) {
  const char* name = Std ? "stddev" : "var";
  ops::check_float(name, x);
  Plan p = make_plan(x, axes, keepdim, name);
  BITGRAD_CHECK(p.L > 0, name, "over an empty set of elements (shape ", x.shape().str(), ")");
  Tensor d, y;
  {
    NoGradGuard ng;
    Tensor mean = div(as_shape(rule_sum(x, p, false), p.keep), static_cast<double>(p.L));  // one division
    d = sub(x, mean).contiguous_copy();
    y = div(rule_sum(d, p, true), static_cast<double>(p.L) - correction);
    if (Std) y = sqrt(y);
    y = finish(y.contiguous_copy(), p);
  }
  if (Node* n = ops::record(name, var_bw<Std>, {&x}, y, site)) {
    n->save(0, d);
    n->save(1, y);
    n->set_payload(saved_of(p, static_cast<double>(p.L) - correction));
  }
  return y;
}

template <bool Max>
Tensor arg_last(const Tensor& x, int axis, bool keepdim, CallSite site) {
  const char* name = Max ? "argmax" : "argmin";
  BITGRAD_CHECK(x.defined(), name, "the input is undefined");
  axis = x.shape().normalize_axis(axis, name);
  const Shape& s = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
  const std::int64_t L = s[axis];
  BITGRAD_CHECK(L > 0, name, "reduction over an empty axis ", axis, " of shape ", s.str());
  Tensor idx = Tensor::empty(keepdim ? ops::keepdim_shape(s, {axis}) : s.without(axis), DType::i64);
  auto run = [&]<class T>(const T* px) {
    std::int64_t* pi = kern::out_ptr<std::int64_t>(idx);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        // the first extremum of the axis read backwards: the last NaN, else the last extremum
        std::int64_t best = L - 1;
        T bv = px[(o * L + best) * inner + i];
        for (std::int64_t l = L - 2; l >= 0 && bv == bv; --l) {
          const T v = px[(o * L + l) * inner + i];
          if (v != v || (Max ? v > bv : v < bv)) {
            bv = v;
            best = l;
          }
        }
        pi[o * inner + i] = best;
      }
  };
  Tensor xc = kern::contiguous(x);
  switch (x.dtype()) {
    case DType::f32: run(xc.data<float>()); break;
    case DType::f64: run(xc.data<double>()); break;
    case DType::i64: run(xc.data<std::int64_t>()); break;
    default: detail::fail(name, "unsupported dtype ", dtype_name(x.dtype()), " (f32, f64 or i64)");
  }
  autograd::emit_forward(name, idx, site);
  return idx;
}

template <bool Any>
Tensor any_all(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  const char* name = Any ? "any" : "all";
  Plan p = make_plan(x, axes, keepdim, name);
  Tensor m = moved(x.dtype() == DType::f32 || x.dtype() == DType::f64 ? x : x.cast(DType::f64), p);
  if (m.dtype() == DType::f32) m = m.cast(DType::f64);  // exact: nonzero (and NaN) stay so
  Tensor y = Tensor::empty(Shape{p.R}, DType::u8);
  const double* pm = m.data<double>();
  std::uint8_t* py = kern::out_ptr<std::uint8_t>(y);
  for (std::int64_t r = 0; r < p.R; ++r) {
    bool v = !Any;
    for (std::int64_t l = 0; l < p.L; ++l) {
      const bool nz = pm[r * p.L + l] != 0.0;  // NaN != 0
      v = Any ? (v || nz) : (v && nz);
    }
    py[r] = v ? 1 : 0;
  }
  y = finish(y, p);
  autograd::emit_forward(name, y, site);
  return y;
}

template <class Fold>
Tensor fold(const std::vector<Tensor>& xs, const char* name, Fold f) {
  BITGRAD_CHECK(!xs.empty(), name, "needs at least one tensor");
  Tensor r = xs[0];
  for (std::size_t i = 1; i < xs.size(); ++i) r = f(r, xs[i]);
  return r;
}

}  // namespace

Tensor sum_square(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  ops::check_float("sum_square", x);
  Plan p = make_plan(x, axes, keepdim, "sum_square");
  Tensor y = finish(rule_sum(x, p, true), p);
  if (Node* n = ops::record("sum_square", sum_square_bw, {&x}, y, site)) {
    n->save(0, kern::contiguous(x));
    n->set_payload(saved_of(p));
  }
  return y;
}

Tensor norm_l2(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  ops::check_float("norm_l2", x);
  Plan p = make_plan(x, axes, keepdim, "norm_l2");
  Tensor y;
  {
    NoGradGuard ng;
    y = finish(sqrt(rule_sum(x, p, true)).contiguous_copy(), p);
  }
  if (Node* n = ops::record("norm_l2", norm_l2_bw, {&x}, y, site)) {
    n->save(0, kern::contiguous(x));
    n->save(1, y);
    n->set_payload(saved_of(p));
  }
  return y;
}

Tensor norm_l1(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  ops::check_float("norm_l1", x);
  Plan p = make_plan(x, axes, keepdim, "norm_l1");
  Tensor a = map_float(x, [](auto v) { return v < 0 ? -v : v + 0; });  // |x| (exact; -0 -> +0)
  Tensor y = finish(rule_sum(a, p, false), p);
  if (Node* n = ops::record("norm_l1", norm_l1_bw, {&x}, y, site)) {
    n->save(0, kern::contiguous(x));
    n->set_payload(saved_of(p));
  }
  return y;
}

Tensor log_sum(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  ops::check_float("log_sum", x);
  Plan p = make_plan(x, axes, keepdim, "log_sum");
  return log(sum(x, p.axes, keepdim, site), site);
}

Tensor logsumexp(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  ops::check_float("logsumexp", x);
  Plan p = make_plan(x, axes, keepdim, "logsumexp");
  BITGRAD_CHECK(p.L > 0 || p.R == 0, "logsumexp", "reduction over an empty set of elements (shape ", x.shape().str(), ")");
  Tensor y;
  {
    NoGradGuard ng;
    Tensor m = amax(x, p.axes, true);  // exact; NaN if any NaN
    Tensor ms = expand(m, x.shape()).contiguous_copy();
    Tensor xc = kern::contiguous(x);
    // e = exp(x - m), the difference in f64, rounded once; +0 where m is not finite (unused)
    Tensor e = Tensor::empty(x.shape(), x.dtype());
    BITGRAD_DISPATCH_FLOAT(x.dtype(), "logsumexp", T, [&] {
      for (std::int64_t i = 0; i < x.numel(); ++i) {
        const double mv = static_cast<double>(ms.data<T>()[i]);
        kern::out_ptr<T>(e)[i] = std::isfinite(mv) ? kern::canon(static_cast<T>(math::exp(static_cast<double>(xc.data<T>()[i]) - mv))) : T(0);
      }
    });
    Tensor s = rule_sum(e, p, false);  // by the axis rules
    Tensor mc = kern::contiguous(m);
    y = Tensor::empty(s.shape(), x.dtype());
    BITGRAD_DISPATCH_FLOAT(x.dtype(), "logsumexp", T, [&] {
      for (std::int64_t i = 0; i < s.numel(); ++i) {
        const double mv = static_cast<double>(mc.data<T>()[i]);
        // m + log(s) in f64, rounded once; m itself when it is infinite or NaN
        kern::out_ptr<T>(y)[i] = std::isfinite(mv) ? kern::canon(static_cast<T>(mv + math::log(static_cast<double>(s.data<T>()[i])))) : kern::canon(mc.data<T>()[i]);
      }
    });
    y = finish(y, p);
  }
  if (Node* n = ops::record("logsumexp", logsumexp_bw, {&x}, y, site)) {
    n->save(0, kern::contiguous(x));
    n->save(1, y);
    n->set_payload(saved_of(p));
  }
  return y;
}

Tensor prod(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) {
  ops::check_float("prod", x);
  Plan p = make_plan(x, axes, keepdim, "prod");
  Tensor m = moved(x, p);
  Tensor y = Tensor::empty(Shape{p.R}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "prod", T, [&] {
    const T* pm = m.data<T>();
    T* py = kern::out_ptr<T>(y);
    kern::parallel_for(p.R, 256, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        T acc = T(1);  // a chain from +1 in row-major order of the reduced elements
        for (std::int64_t l = 0; l < p.L; ++l) acc = acc * pm[r * p.L + l];
        py[r] = kern::canon(acc);
      }
    });
  });
  y = finish(y, p);
  if (Node* n = ops::record("prod", prod_bw, {&x}, y, site)) {
    n->save(0, m);
    n->set_payload(saved_of(p));
  }
  return y;
}

Tensor var(const Tensor& x, const std::vector<int>& axes, double correction, bool keepdim, CallSite site) {
  return var_op<false>(x, axes, correction, keepdim, site);
}
Tensor stddev(const Tensor& x, const std::vector<int>& axes, double correction, bool keepdim, CallSite site) {
  return var_op<true>(x, axes, correction, keepdim, site);
}
Tensor amax(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) { return extreme_axes<true>(x, axes, keepdim, site); }
Tensor amin(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) { return extreme_axes<false>(x, axes, keepdim, site); }
Tensor any(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) { return any_all<true>(x, axes, keepdim, site); }
Tensor all(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) { return any_all<false>(x, axes, keepdim, site); }

Tensor argmax(const Tensor& x, int axis, bool keepdim, bool select_last, CallSite site) {
  return select_last ? arg_last<true>(x, axis, keepdim, site) : argmax(x, axis, keepdim, site);
}
Tensor argmin(const Tensor& x, int axis, bool keepdim, bool select_last, CallSite site) {
  return select_last ? arg_last<false>(x, axis, keepdim, site) : argmin(x, axis, keepdim, site);
}

Tensor sum_of(const std::vector<Tensor>& xs, CallSite site) {
  return fold(xs, "sum_of", [&](const Tensor& a, const Tensor& b) { return add(a, b, site); });
}
Tensor mean_of(const std::vector<Tensor>& xs, CallSite site) {
  return div(sum_of(xs, site), static_cast<double>(xs.size()), site);
}
namespace {
// max_of / min_of of integer tensors (i64, u8; ONNX Max/Min take them): exact, not differentiable
template <bool Max>
Tensor int_extreme(const Tensor& a, const Tensor& b, const char* op) {
  BITGRAD_CHECK(a.dtype() == b.dtype(), op, "dtypes differ: ", dtype_name(a.dtype()), " ", a.shape().str(), " and ",
                dtype_name(b.dtype()), " ", b.shape().str());
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  NoGradGuard ng;
  Tensor ac = expand(a, s).contiguous_copy(), bc = expand(b, s).contiguous_copy();
  auto run = [&]<class T>(T) {
    T* pa = kern::out_ptr<T>(ac);
    const T* pb = bc.data<T>();
    for (std::int64_t i = 0; i < ac.numel(); ++i) pa[i] = Max ? std::max(pa[i], pb[i]) : std::min(pa[i], pb[i]);
  };
  if (a.dtype() == DType::i64) run(std::int64_t{});
  else if (a.dtype() == DType::u8) run(std::uint8_t{});
  else detail::fail(op, "unsupported dtype ", dtype_name(a.dtype()));
  return ac;
}
}  // namespace

Tensor max_of(const std::vector<Tensor>& xs, CallSite site) {
  return fold(xs, "max_of", [&](const Tensor& a, const Tensor& b) {
    return is_floating(a.dtype()) ? maximum(a, b, site) : int_extreme<true>(a, b, "max_of");
  });
}
Tensor min_of(const std::vector<Tensor>& xs, CallSite site) {
  return fold(xs, "min_of", [&](const Tensor& a, const Tensor& b) {
    return is_floating(a.dtype()) ? minimum(a, b, site) : int_extreme<false>(a, b, "min_of");
  });
}

}  // namespace bitgrad
