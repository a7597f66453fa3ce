// The 16-bit formats (docs/numerics.md §23): bf16 (8 significand bits, f32's exponent range)
// and f16 (IEEE binary16: 11 significand bits, normal exponents -14..15, subnormals down to
// 2^-24). Conversion to them rounds the exact value once (an f64 is never rounded through
// f32 first):
//   nearest:    round to nearest, ties to even; a value at or beyond the largest finite value
//               plus half an ulp becomes +-inf; subnormal results are kept (no flushing);
//   stochastic: the fraction below the last kept bit, as its top 32 bits t (exact when 32 or
//               fewer bits are dropped), plus 32 random bits u; a carry (u + t >= 2^32) rounds
//               away from zero, so a value rounds up with probability t / 2^32;
//   both:       +-0 and +-inf keep their sign; NaN stays NaN with its sign, its quiet bit set
//               and the top bits of its payload; f64 subnormals become +-0.
// Conversion from them is exact (to f32 or f64).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "bitgrad/dtype.hpp"

// The inline conversions below are part of the numerics; a program compiled with -ffast-math
// (or -Ofast) would compile them differently, and its copies could replace the library's at
// link time. The library's own build refuses such flags (cmake/NoFastMath.cmake).
#ifdef __FAST_MATH__
#error "bitgrad: -ffast-math / -Ofast changes floating-point results; compile code that includes bitgrad's headers without it"
#endif

namespace bitgrad {

// The precision of a mixed-precision run's matmul operands and outputs (docs/numerics.md §24).
enum class Precision : std::uint8_t { fp32, bf16, fp16 };
Precision parse_precision(const std::string& name);  // throws naming the choices
const char* precision_name(Precision p);

namespace half {

// P significand bits (the implicit one included), normal exponents EMIN..EMAX.
template <int P, int EMIN, int EMAX>
inline std::uint16_t encode(double x, bool stochastic, std::uint32_t u) {
  constexpr int kFrac = P - 1;
  constexpr std::uint64_t kInf = static_cast<std::uint64_t>(2 * EMAX + 1) << kFrac;
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  const auto sign = static_cast<std::uint16_t>((b >> 63) << 15);
  const int E = static_cast<int>((b >> 52) & 0x7FF);
  const std::uint64_t frac = b & ((std::uint64_t{1} << 52) - 1);
  if (E == 0x7FF) {
    if (frac == 0) return static_cast<std::uint16_t>(sign | kInf);
    return static_cast<std::uint16_t>(sign | kInf | (std::uint64_t{1} << (kFrac - 1)) | (frac >> (52 - kFrac)));
  }
  if (E == 0) return sign;  // +-0 or an f64 subnormal: far below half the smallest subnormal
  const int e = E - 1023;
  const std::uint64_t m = frac | (std::uint64_t{1} << 52);
  int d = 52 - kFrac;  // bits of m dropped
  if (e < EMIN) d += EMIN - e;
  std::uint64_t keep = d >= 64 ? 0 : m >> d;
  const std::uint64_t rem = d >= 64 ? m : m & ((std::uint64_t{1} << d) - 1);
  if (stochastic) {
    // the dropped fraction rem / 2^d as 32 bits
    const std::uint64_t t = d <= 32 ? rem << (32 - d) : (d - 32 >= 64 ? 0 : rem >> (d - 32));
    if (static_cast<std::uint64_t>(u) + t >= (std::uint64_t{1} << 32)) ++keep;
  } else if (d < 64) {
    const std::uint64_t halfway = std::uint64_t{1} << (d - 1);
    if (rem > halfway || (rem == halfway && (keep & 1))) ++keep;
  }
  // a normal's exponent field plus its significand (a carry moves into the exponent); a
  // subnormal's significand alone (a carry makes the smallest normal)
  const std::uint64_t enc = e >= EMIN ? (static_cast<std::uint64_t>(e + EMAX) << kFrac) + keep - (std::uint64_t{1} << kFrac) : keep;
  return static_cast<std::uint16_t>(sign | (enc >= kInf ? kInf : enc));
}

template <int P, int EMAX>
inline double decode(std::uint16_t h) {
  constexpr int kFrac = P - 1, kExpBits = 15 - kFrac;
  const std::uint64_t sign = static_cast<std::uint64_t>(h >> 15) << 63;
  const int ex = (h >> kFrac) & ((1 << kExpBits) - 1);
  const std::uint64_t frac = h & ((1u << kFrac) - 1);
  std::uint64_t b;
  if (ex == (1 << kExpBits) - 1) {
    b = sign | (std::uint64_t{0x7FF} << 52) | (frac << (52 - kFrac));
  } else if (ex == 0) {  // subnormal: frac * 2^(1 - EMAX - kFrac), exact
    double v = static_cast<double>(frac);
    std::uint64_t sb = static_cast<std::uint64_t>(1023 + 1 - EMAX - kFrac) << 52;
    double scale;
    std::memcpy(&scale, &sb, sizeof scale);
    v *= scale;
    std::memcpy(&b, &v, sizeof b);
    b |= sign;
  } else {
    b = sign | (static_cast<std::uint64_t>(ex - EMAX + 1023) << 52) | (frac << (52 - kFrac));
  }
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

inline std::uint16_t bf16_bits(double x) { return encode<8, -126, 127>(x, false, 0); }
inline std::uint16_t f16_bits(double x) { return encode<11, -14, 15>(x, false, 0); }
inline std::uint16_t bf16_bits_stochastic(double x, std::uint32_t u) { return encode<8, -126, 127>(x, true, u); }
inline std::uint16_t f16_bits_stochastic(double x, std::uint32_t u) { return encode<11, -14, 15>(x, true, u); }
inline double bf16_value(std::uint16_t h) { return decode<8, 127>(h); }
inline double f16_value(std::uint16_t h) { return decode<11, 15>(h); }

// f32 -> bf16, nearest: the same bits as bf16_bits, on the f32's bit pattern (the fast path).
inline std::uint16_t bf16_bits_f32(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((b >> 16) | 0x0040u);  // NaN: quiet
  return static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
inline float bf16_to_f32(std::uint16_t h) {
  const std::uint32_t b = static_cast<std::uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// f32 -> f16 -> f32, nearest: the value of f16_bits(x) as an f32, on the bit pattern (the fast
// path). f16 normals: the bf16 trick with 13 dropped bits; below 2^-14 the f16 ulp is 2^-24,
// so x 2^24 (exact) is rounded to an integer by adding and subtracting 2^23 (ties to even).
// All three cases are computed and one is selected, so that loops over it vectorize.
inline float f16_round_f32(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  const std::uint32_t s = b & 0x80000000u, a = b & 0x7FFFFFFFu;
  const std::uint32_t nan = 0x7FC00000u | (a & 0x007FE000u);  // quiet, the top 9 payload bits
  std::uint32_t normal = (a + 0xFFFu + ((a >> 13) & 1u)) & ~0x1FFFu;
  normal = normal >= 0x47800000u ? 0x7F800000u : normal;  // 65520 and beyond: inf
  float m;
  std::memcpy(&m, &a, sizeof m);
  const float q = m * 16777216.0f + 8388608.0f;  // m 2^24 is exact; the sum rounds to an integer
  const float n = (q - 8388608.0f) * 5.9604644775390625e-8f;
  std::uint32_t sub;
  std::memcpy(&sub, &n, sizeof sub);
  std::uint32_t r = a > 0x7F800000u ? nan : (a >= 0x38800000u ? normal : sub);
  r |= s;
  float v;
  std::memcpy(&v, &r, sizeof v);
  return v;
}

}  // namespace half
}  // namespace bitgrad
