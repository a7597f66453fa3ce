// Reductions, forward and backward side by side.
//   sum/mean: x [..] -> y [kept dims] (keepdim: ones at reduced axes); order: the axis rules
//   max(axis): x [.., L, ..] -> y [.., ..], gradient to the first maximum
#include <algorithm>
#include <cmath>

#include "kernels/index.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

std::vector<int> all_axes(const Tensor& x) {
  std::vector<int> a;
  for (int d = 0; d < x.ndim(); ++d) a.push_back(d);
  return a;
}

// g (kept shape) broadcast back over the reduced axes of the input
Tensor spread(const Tensor& g, const Shape& in_shape, const Shape& keep_shape) {
  Tensor gk = reshape(g, keep_shape);
  return ops::fresh_copy(expand(gk, in_shape));
}

struct SumSaved {
  std::int64_t count;  // elements summed into each output
  Shape keepdim_shape;
};
void sum_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = spread(g, n.in_shape[0], n.payload<SumSaved>().keepdim_shape); }
void mean_bw(Node& n, const Tensor& g, Tensor* gi) {
  const SumSaved& s = n.payload<SumSaved>();
  gi[0] = spread(div(g, static_cast<double>(s.count)), n.in_shape[0], s.keepdim_shape);
}

Tensor reduce_op(const Tensor& x, std::vector<int> axes, bool keepdim, bool is_mean, CallSite site) {
  const char* name = is_mean ? "mean" : "sum";
  ops::check_float(name, x);
  axes = ops::normalize_axes(x.shape(), axes, name);
  Tensor y = ops::reduce_sum(x, axes);
  std::int64_t count = 1;
  for (int a : axes) count *= x.shape()[a];
  if (is_mean) {
    BITGRAD_CHECK(count > 0, "mean", "mean over an empty set of elements (shape ", x.shape().str(), ")");
    NoGradGuard ng;
    y = div(y, static_cast<double>(count));
  }
  const Shape keep = ops::keepdim_shape(x.shape(), axes);
  if (keepdim) y = Tensor::view_of(y, keep, contiguous_strides(keep), y.offset());
  if (Node* n = ops::record(name, is_mean ? mean_bw : sum_bw, {&x}, y, site)) n->set_payload(SumSaved{count, keep});
  return y;
}

// x viewed [outer, L, inner], reduced over L
struct ExtremeSaved {
  std::int64_t outer, L, inner;
};
// saved 0 = argmax indices
void max_bw(Node& n, const Tensor& g, Tensor* gi) {
  const ExtremeSaved& s = n.payload<ExtremeSaved>();
  const std::int64_t outer = s.outer, L = s.L, inner = s.inner;
  const Tensor& idx = n.saved_tensor(0);
  Tensor gc = kern::contiguous(g);
  Tensor out = Tensor::zeros(n.in_shape[0], g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "max", T, [&] {
    const T* pg = gc.data<T>();
    const std::int64_t* pi = idx.data<std::int64_t>();
    T* po = kern::out_ptr<T>(out);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) po[(o * L + pi[o * inner + i]) * inner + i] = pg[o * inner + i];
  });
  gi[0] = out;
}

// argmax (argmin) along `axis` of x viewed [outer, L, inner]
template <bool Max>
Tensor argmax_raw(const Tensor& x, int axis, std::int64_t& outer, std::int64_t& L, std::int64_t& inner) {
  const Shape& s = x.shape();
  outer = 1;
  inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
  L = s[axis];
  BITGRAD_CHECK(L > 0, Max ? "max" : "min", "reduction over an empty axis ", axis, " of shape ", s.str());
  Tensor xc = kern::contiguous(x);
  Tensor idx = Tensor::empty(s.without(axis), DType::i64);
  switch (x.dtype()) {
    case DType::f32: kern::argmax_axis<float, Max>(xc.data<float>(), outer, L, inner, kern::out_ptr<std::int64_t>(idx)); break;
    case DType::f64: kern::argmax_axis<double, Max>(xc.data<double>(), outer, L, inner, kern::out_ptr<std::int64_t>(idx)); break;
    case DType::i64: kern::argmax_axis<std::int64_t, Max>(xc.data<std::int64_t>(), outer, L, inner, kern::out_ptr<std::int64_t>(idx)); break;
    default: detail::fail(Max ? "argmax" : "argmin", "unsupported dtype ", dtype_name(x.dtype()));
  }
  return idx;
}

}  // namespace

Tensor sum(const Tensor& x, CallSite site) { return reduce_op(x, all_axes(x), false, false, site); }
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) { return reduce_op(x, axes, keepdim, false, site); }
Tensor mean(const Tensor& x, CallSite site) { return reduce_op(x, all_axes(x), false, true, site); }
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim, CallSite site) { return reduce_op(x, axes, keepdim, true, site); }

namespace {
template <bool Max>
Tensor arg_op(const Tensor& x, int axis, bool keepdim, CallSite site) {
  const char* name = Max ? "argmax" : "argmin";
  BITGRAD_CHECK(x.defined(), name, "the input is undefined");
  axis = x.shape().normalize_axis(axis, name);
  std::int64_t outer, L, inner;
  Tensor idx = argmax_raw<Max>(x, axis, outer, L, inner);
  if (keepdim) {
    Shape k = x.shape();
    k[axis] = 1;
    idx = Tensor::view_of(idx, k, contiguous_strides(k), 0);
  }
  autograd::emit_forward(name, idx, site);
  return idx;
}

template <bool Max>
Tensor extreme_op(const Tensor& x, int axis, bool keepdim, CallSite site) {
  const char* name = Max ? "max" : "min";
  ops::check_float(name, x);
  axis = x.shape().normalize_axis(axis, name);
  std::int64_t outer, L, inner;
  Tensor idx = argmax_raw<Max>(x, axis, outer, L, inner);
  Tensor xc = kern::contiguous(x);
  Shape out_shape = x.shape().without(axis);
  Tensor y = Tensor::empty(out_shape, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), name, T, [&] {
    const T* px = xc.data<T>();
    const std::int64_t* pi = idx.data<std::int64_t>();
    T* py = kern::out_ptr<T>(y);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) py[o * inner + i] = px[(o * L + pi[o * inner + i]) * inner + i];
  });
  if (keepdim) {
    Shape k = x.shape();
    k[axis] = 1;
    y = Tensor::view_of(y, k, contiguous_strides(k), 0);
  }
  if (Node* n = ops::record(name, max_bw, {&x}, y, site)) {
    n->save(0, idx);
    n->set_payload(ExtremeSaved{outer, L, inner});
  }
  return y;
}

template <bool Max>
Tensor extreme_all(const Tensor& x, CallSite site) {
  const char* name = Max ? "max" : "min";
  ops::check_float(name, x);
  BITGRAD_CHECK(x.numel() > 0, name, "the ", Max ? "maximum" : "minimum", " of an empty tensor (shape ", x.shape().str(),
                ") is undefined");
  return extreme_op<Max>(reshape(x, Shape{x.numel()}), 0, false, site);
}

// saved 0 = x, 1 = the norm (scalar)
void norm_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor& x = n.saved_tensor(0);
  const Tensor& nr = n.saved_tensor(1);
  // g * x / norm, with 0 where the norm is 0 (the subgradient at the origin)
  Tensor scale = nr.item() == 0.0 ? Tensor::zeros(Shape{}, x.dtype()) : div(g, nr);
  gi[0] = mul(x, scale);
}
}  // namespace

Tensor argmax(const Tensor& x, int axis, bool keepdim, CallSite site) { return arg_op<true>(x, axis, keepdim, site); }
Tensor argmin(const Tensor& x, int axis, bool keepdim, CallSite site) { return arg_op<false>(x, axis, keepdim, site); }
Tensor max(const Tensor& x, int axis, bool keepdim, CallSite site) { return extreme_op<true>(x, axis, keepdim, site); }
Tensor min(const Tensor& x, int axis, bool keepdim, CallSite site) { return extreme_op<false>(x, axis, keepdim, site); }
Tensor max(const Tensor& x, CallSite site) { return extreme_all<true>(x, site); }
Tensor min(const Tensor& x, CallSite site) { return extreme_all<false>(x, site); }

Tensor norm(const Tensor& x, CallSite site) {
  ops::check_float("norm", x);
  Tensor xc = kern::contiguous(x);
  // sum of squares: row rule (fma) per sample of axis 0, then the batch rule over samples;
  // a 1-d (or 0-d) tensor: the row rule over all of it
  const bool rows = x.ndim() >= 2;
  const std::int64_t N = rows ? x.shape()[0] : 1;
  const std::int64_t L = N ? x.numel() / N : 0;
  Tensor per = Tensor::empty(Shape{N}, x.dtype());
  Tensor y = Tensor::empty(Shape{}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "norm", T, [&] {
    kern::active<T>().sumsq_rows(xc.data<T>(), nullptr, N, L, kern::out_ptr<T>(per));
    T ss = per.data<T>()[0];
    if (rows) kern::active<T>().sum_cols(per.data<T>(), N, 1, &ss);
    kern::out_ptr<T>(y)[0] = kern::canon(std::sqrt(ss));
  });
  if (Node* n = ops::record("norm", norm_bw, {&x}, y, site)) {
    n->save(0, xc);
    n->save(1, y);
  }
  return y;
}

}  // namespace bitgrad
