// Comparisons, logical ops, isnan / isinf and masked_fill. Shapes: a [..] and b [..] broadcast
// to y [broadcast(a, b)]; a number compares with every element; unary tests keep x's shape.
// Results are u8 masks (1 true, 0 false) with no gradient: a comparison is exact (no rounding,
// no order), so one implementation serves every code path (numerics.md §32).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/op_util.hpp"
#include "tensor/strided.hpp"

namespace bitgrad {
namespace {

// f(T{}) for the dtypes a mask can be made from
template <class F>
void dispatch_mask_input(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::i64: f(std::int64_t{}); break;
    case DType::u8: f(std::uint8_t{}); break;
    default: detail::fail(op, "expected an f32, f64, i64 or u8 tensor, got ", dtype_name(t));
  }
}

// y[o] = f(a[..], b[..]) over the broadcast of a and b (both of dtype T), row-major
template <class T, class F>
Tensor broadcast_mask(const Tensor& a, const Tensor& b, const char* op, F f) {
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  const Tensor av = expand(a.detach(), s), bv = expand(b.detach(), s);
  Tensor y = Tensor::empty(s, DType::u8);
  std::uint8_t* py = y.mutable_data<std::uint8_t>();
  const T *pa = av.data<T>(), *pb = bv.data<T>();
  std::int64_t o = 0;
  detail::for_each_strided2(s, av.strides(), bv.strides(), [&](std::int64_t ia, std::int64_t ib) {
    py[o++] = f(pa[ia], pb[ib]) ? 1 : 0;
  });
  return y;
}

template <class Cmp>
Tensor compare(const Tensor& a, const Tensor& b, const char* op, Cmp cmp) {
  BITGRAD_CHECK(a.dtype() == b.dtype(), op, "dtypes differ: ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  Tensor y;
  dispatch_mask_input(a.dtype(), op, [&](auto z) {
    using T = decltype(z);
    y = broadcast_mask<T>(a, b, op, cmp);
  });
  return y;
}

// a number: rounded to a float tensor's dtype first (as the binary ops' numbers, and PyTorch);
// an integer tensor's elements are compared as f64 with the number itself
template <class Cmp>
Tensor compare(const Tensor& a, double s, const char* op, Cmp cmp) {
  const Tensor ac = kern::contiguous(a.detach());
  Tensor y = Tensor::empty(a.shape(), DType::u8);
  std::uint8_t* py = y.mutable_data<std::uint8_t>();
  dispatch_mask_input(a.dtype(), op, [&](auto z) {
    using T = decltype(z);
    const T* pa = ac.data<T>();
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      if constexpr (std::is_floating_point_v<T>) py[i] = cmp(pa[i], static_cast<T>(s)) ? 1 : 0;
      else py[i] = cmp(static_cast<double>(pa[i]), s) ? 1 : 0;
    }
  });
  return y;
}

// 1 where x is nonzero (NaN included), else 0
Tensor truth(const Tensor& x, const char* op) {
  const Tensor xc = kern::contiguous(x.detach());
  Tensor y = Tensor::empty(x.shape(), DType::u8);
  std::uint8_t* py = y.mutable_data<std::uint8_t>();
  dispatch_mask_input(x.dtype(), op, [&](auto z) {
    using T = decltype(z);
    const T* px = xc.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = px[i] != T(0) ? 1 : 0;
  });
  return y;
}

template <class F>
Tensor logical(const Tensor& a, const Tensor& b, const char* op, F f) {
  return broadcast_mask<std::uint8_t>(truth(a, op), truth(b, op), op, [&](std::uint8_t u, std::uint8_t v) { return f(u != 0, v != 0); });
}

// f(x) for float x; integer tensors hold no NaN or infinity: all 0
template <class F>
Tensor float_test(const Tensor& x, const char* op, F f) {
  Tensor y = Tensor::zeros(x.shape(), DType::u8);
  if (!is_floating(x.dtype())) {
    dispatch_mask_input(x.dtype(), op, [](auto) {});  // the dtype check
    return y;
  }
  const Tensor xc = kern::contiguous(x.detach());
  std::uint8_t* py = y.mutable_data<std::uint8_t>();
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] {
    const T* px = xc.data<T>();
    for (std::int64_t i = 0; i < x.numel(); ++i) py[i] = f(px[i]) ? 1 : 0;
  });
  return y;
}

}  // namespace

#define BITGRAD_OPLIST_DEFINE_COMPARE(name, op, doc)                                                   \
  Tensor name(const Tensor& a, const Tensor& b, CallSite) {                                          \
    return compare(a, b, #name, [](auto u, auto v) { return u op v; });                              \
  }                                                                                                  \
  Tensor name(const Tensor& a, double s, CallSite) { return compare(a, s, #name, [](auto u, auto v) { return u op v; }); }
BITGRAD_COMPARE_OPS(BITGRAD_OPLIST_DEFINE_COMPARE)
#undef BITGRAD_OPLIST_DEFINE_COMPARE

Tensor logical_and(const Tensor& a, const Tensor& b, CallSite) {
  return logical(a, b, "logical_and", [](bool u, bool v) { return u && v; });
}
Tensor logical_or(const Tensor& a, const Tensor& b, CallSite) {
  return logical(a, b, "logical_or", [](bool u, bool v) { return u || v; });
}
Tensor logical_xor(const Tensor& a, const Tensor& b, CallSite) {
  return logical(a, b, "logical_xor", [](bool u, bool v) { return u != v; });
}
Tensor logical_not(const Tensor& x, CallSite) {
  Tensor y = truth(x, "logical_not");
  std::uint8_t* p = y.mutable_data<std::uint8_t>();
  for (std::int64_t i = 0; i < y.numel(); ++i) p[i] = p[i] ? 0 : 1;
  return y;
}

Tensor isnan(const Tensor& x, CallSite) {
  return float_test(x, "isnan", [](auto v) { return v != v; });
}
Tensor isinf(const Tensor& x, bool detect_positive, bool detect_negative, CallSite) {
  return float_test(x, "isinf", [&](auto v) {
    using T = decltype(v);
    return (detect_positive && v == std::numeric_limits<T>::infinity()) || (detect_negative && v == -std::numeric_limits<T>::infinity());
  });
}

// value where mask is nonzero, else x: where(mask, value, x), so x's gradient is +0 where filled
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, CallSite site) {
  ops::check_float("masked_fill", x);
  BITGRAD_CHECK(mask.defined(), "masked_fill", "the mask is undefined");
  const Shape s = broadcast_shapes(mask.shape(), x.shape(), "masked_fill");
  BITGRAD_CHECK(s == x.shape(), "masked_fill", "mask of shape ", mask.shape().str(), " must broadcast to x's shape ", x.shape().str());
  return where(mask, ops::scalar_like(x, value), x, site);
}

}  // namespace bitgrad
