// Payne-Hanek reduction of a huge argument by pi/2 (|x| >= 2^20), shared by every code
// path: SIMD lanes that need it call this scalar function, so all paths agree bit for bit.
// Integer arithmetic on a 192-bit window of the bits of 2/pi; see docs/numerics.md.
#include <bit>
#include <cmath>
#include <cstdint>

#include "math/mathfn.hpp"

namespace bitgrad::math {
namespace {
#include "math/tables.inc"

// Returns 64 bits of the padded 2/pi bit stream starting at global bit g (MSB first).
std::uint64_t window64(int g) {
  int w = g / 64, b = g % 64;
  std::uint64_t hi = kTwoOverPiBits[w];
  if (b == 0) return hi;
  return (hi << b) | (kTwoOverPiBits[w + 1] >> (64 - b));
}
}  // namespace

int reduce_pio2_large(double x, double* rh, double* rl) {
  using u128 = unsigned __int128;
  std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  const bool negative = (bits >> 63) != 0;
  const int ex = static_cast<int>((bits >> 52) & 0x7ff);
  const std::uint64_t m = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
  const int s = ex - 1075;  // |x| = m 2^s, s >= -32 for |x| >= 2^20
  // Bits of 2/pi with weight 2^-i for i <= s - 2 only add multiples of 4 to x*2/pi.
  const int i0 = s - 1;
  const int g0 = i0 - 1 + 64 * kTwoOverPiPad;
  const std::uint64_t w0 = window64(g0), w1 = window64(g0 + 64), w2 = window64(g0 + 128);
  // P = m * (w0 w1 w2), value x*2/pi (mod 4) = P * 2^-190
  u128 a2 = static_cast<u128>(m) * w2;
  u128 a1 = static_cast<u128>(m) * w1;
  u128 a0 = static_cast<u128>(m) * w0;
  std::uint64_t p0 = static_cast<std::uint64_t>(a2);
  u128 t = (a2 >> 64) + static_cast<std::uint64_t>(a1);
  std::uint64_t p1 = static_cast<std::uint64_t>(t);
  t = (t >> 64) + (a1 >> 64) + static_cast<std::uint64_t>(a0);
  std::uint64_t p2 = static_cast<std::uint64_t>(t);
  int k = static_cast<int>((p2 >> 62) & 3);
  std::uint64_t fh = (p2 << 2) | (p1 >> 62);
  std::uint64_t fl = (p1 << 2) | (p0 >> 62);
  // round to the nearest quadrant: a fraction >= 1/2 becomes negative (two's complement)
  k += static_cast<int>(fh >> 63);
  __int128 fs = static_cast<__int128>((static_cast<u128>(fh) << 64) | fl);
  double hi = static_cast<double>(fs);
  double lo = static_cast<double>(fs - static_cast<__int128>(hi));
  hi *= 0x1p-128;
  lo *= 0x1p-128;
  // r = f * pi/2 in double-double
  double ph = hi * kPio2Hi;
  double pl = std::fma(hi, kPio2Hi, -ph);
  pl = std::fma(hi, kPio2Lo, std::fma(lo, kPio2Hi, pl));
  double h = ph + pl;
  double l = pl - (h - ph);
  if (negative) {
    h = -h;
    l = -l;
    k = -k;
  }
  *rh = h;
  *rl = l;
  return k & 3;
}
}  // namespace bitgrad::math
