// cast: x [..] converted to another dtype, y [..] (numerics.md §32). Conversions are exact or
// one rounding to nearest, elementwise, so there is no order to keep; the rules:
//   float (f32, f64, bf16, f16) -> float: Tensor::cast (round to nearest from the exact value)
//   float -> i64, u8: truncation toward zero (C's conversion, ONNX's Cast); NaN, +-inf and values
//                     whose truncation is out of the target's range are an error naming the element
//   i64 -> u8: the low 8 bits (C's conversion to an unsigned type: the value modulo 256)
//   i64 -> f32: one rounding to nearest; i64 -> bf16 / f16 through f64 (one rounding below 2^53)
//   u8 -> any, i64 -> f64 / i64: the value (i64 -> f64 rounds to nearest beyond 2^53)
// Gradient: between f32 and f64 only, the incoming gradient cast back to x's dtype.
#include <cmath>
#include <cstdint>

#include "ops/op_util.hpp"

namespace bitgrad {
namespace {

bool any_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16 || t == DType::f16; }

struct CastSaved {
  DType from;
};
void cast_bw(autograd::Node& n, const Tensor& g, Tensor* gi) { gi[0] = g.cast(n.payload<CastSaved>().from); }

// every element of f64 values v must truncate into [lo, hi]
void check_truncates(const Tensor& v, double lo, double hi, DType to) {
  const double* p = v.data<double>();
  for (std::int64_t i = 0; i < v.numel(); ++i) {
    const double t = std::trunc(p[i]);
    BITGRAD_CHECK(t >= lo && t <= hi, "cast", "element ", i, " is ", p[i], ", which has no ", dtype_name(to),
                  " value (NaN, infinities and values out of range cannot be cast to an integer)");
  }
}

}  // namespace

Tensor cast(const Tensor& x, DType to, CallSite site) {
  BITGRAD_CHECK(x.defined(), "cast", "the input is undefined");
  const DType from = x.dtype();
  Tensor y;
  if (any_float(from) && (to == DType::i64 || to == DType::u8)) {
    const Tensor v = x.cast(DType::f64);  // exact
    // i64: [-2^63, 2^63 - 1024], the doubles in range; u8: [0, 255]
    if (to == DType::i64) check_truncates(v, -0x1p63, 0x1p63 - 1024.0, to);
    else check_truncates(v, 0.0, 255.0, to);
    y = v.cast(to);  // static_cast of an in-range value: truncation toward zero
  } else if (from == DType::i64 && to == DType::u8) {
    const Tensor xc = x.contiguous_copy();
    y = Tensor::empty(x.shape(), DType::u8);
    const std::int64_t* p = xc.data<std::int64_t>();
    std::uint8_t* q = y.mutable_data<std::uint8_t>();
    for (std::int64_t i = 0; i < x.numel(); ++i) q[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(p[i]) & 0xFFu);
  } else if (from == DType::i64 && to == DType::f32) {
    const Tensor xc = x.contiguous_copy();
    y = Tensor::empty(x.shape(), DType::f32);
    const std::int64_t* p = xc.data<std::int64_t>();
    float* q = y.mutable_data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) q[i] = static_cast<float>(p[i]);  // one rounding
  } else {
    y = x.cast(to);
  }
  if (is_floating(from) && is_floating(to))
    if (autograd::Node* n = ops::record("cast", cast_bw, {&x}, y, site)) n->set_payload(CastSaved{from});
  return y;
}

}  // namespace bitgrad
