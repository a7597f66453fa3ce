// The configure step's probe (cmake/NoFastMath.cmake): built with the compiler command and flags
// the library is built with, however they were passed (CMake, CXX, CXXFLAGS, pip), and run. Each
// check computes, from inputs the compiler cannot see (volatile), a value that IEEE 754 fixes and
// that a value-changing option changes; the exit code names the first that differs (0: none).
#include <cstdio>
#include <cstring>

namespace {
volatile double v_zero = 0.0, v_neg_zero = -0.0, v_one = 1.0, v_three = 3.0, v_tiny = 0x1p-1070, v_big = 0x1p53;
volatile double v_a = 1.0 + 0x1p-30;
volatile float v_f[4] = {1e8f, 1.0f, -1e8f, 1.0f};

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

int fail(int code, const char* what) {
  std::printf("%s\n", what);
  return code;
}
}  // namespace

int main() {
  // contraction: a*a - 1 rounds the product first (2^-29); fused it keeps 2^-60 more
  const double a = v_a;
  if (!same_bits(a * a - v_one, 0x1p-29)) return fail(2, "contraction: a*b+c was fused into fma (-ffp-contract=fast, -ffast-math)");
  // finite math: 0/0 is a NaN and compares unequal to itself
  const double nan = v_zero / v_zero;
  if (nan == nan) return fail(3, "finite math: NaN compared equal to itself (-ffinite-math-only, -ffast-math)");
  // signed zeros: -0 + 0 is +0
  const double z = v_neg_zero + 0.0;
  if (!same_bits(z, 0.0) || !same_bits(v_neg_zero + v_zero, 0.0))
    return fail(4, "signed zeros: -0 + 0 was not +0 (-fno-signed-zeros, -ffast-math)");
  // subnormals: 2^-1070 / 2 is 2^-1071, not flushed to zero (-ffast-math links crtfastmath: FTZ/DAZ)
  if (!same_bits(v_tiny * 0.5, 0x1p-1071) || v_tiny + v_zero == 0.0)
    return fail(5, "subnormals flushed to zero (FTZ/DAZ: -ffast-math, -Ofast, -mdaz-ftz)");
  // reciprocal: 10 / 3 divided, not multiplied by a rounded 1/3 (3.333333333333333)
  const double d = 10.0 * v_one;
  if (!same_bits(d / 3.0, 3.3333333333333335)) return fail(6, "reciprocal math: x / 3 became x * (1/3) (-freciprocal-math, -ffast-math)");
  // reassociation: a sequential sum of 64 terms, vectorisable into lanes if reassociation is allowed
  // (1e8, 1, -1e8, 1) repeated: in order each group ends at 1 (1e8 + 1 rounds to 1e8); in lanes
  // the ones add up to 32
  float f[64];
  for (int i = 0; i < 64; ++i) f[i] = v_f[i % 4];
  float s = 0.0f;
  for (int i = 0; i < 64; ++i) s += f[i];
  float want = 0.0f;
  for (int i = 0; i < 64; ++i) {  // the same chain with each addition forced to memory
    volatile float t = want + f[i];
    want = t;
  }
  if (!same_bits(s, want)) return fail(7, "reassociation: a sum's order was changed (-fassociative-math, -funsafe-math-optimizations, -ffast-math)");
  // x + big - big must round (2^53 + 1 is not a double)
  if (!same_bits((v_one + v_big) - v_big, 0.0)) return fail(8, "reassociation: (1 + 2^53) - 2^53 was simplified to 1");
  return 0;
}
