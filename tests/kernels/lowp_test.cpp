// The 16-bit formats (numerics.md §23): rounding to nearest checked against an oracle that knows
// nothing of bit tricks (every finite value of the format, sorted, nearest by search, ties to the
// even pattern), the fast f32 paths against the general one, stochastic rounding's exact rule,
// and the rounding kernel at every thread count and chunking.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <limits>
#include <vector>

#include "bitgrad/half.hpp"
#include "bitgrad/ops.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/tensor.hpp"
#include "kernels/lowp.hpp"
#include "support/kernel_check.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// The oracle: the format's non-negative finite values in increasing order, with their patterns.
struct Oracle {
  std::vector<std::pair<double, std::uint16_t>> v;
  double max_finite = 0, ulp_at_max = 0;
  explicit Oracle(bool bf16) {
    for (std::uint32_t h = 0; h < 0x8000; ++h) {
      const double d = bf16 ? half::bf16_value(static_cast<std::uint16_t>(h)) : half::f16_value(static_cast<std::uint16_t>(h));
      if (std::isfinite(d)) v.emplace_back(d, static_cast<std::uint16_t>(h));
    }
    std::sort(v.begin(), v.end());
    max_finite = v.back().first;
    ulp_at_max = max_finite - v[v.size() - 2].first;
  }
  std::uint16_t nearest(double x) const {
    const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    const double a = std::fabs(x);
    const std::uint16_t inf = static_cast<std::uint16_t>(v.back().second + 1);  // the pattern after the largest finite
    if (a >= max_finite + ulp_at_max / 2) return sign | inf;
    auto hi = std::lower_bound(v.begin(), v.end(), std::make_pair(a, std::uint16_t{0}));
    if (hi == v.end()) return sign | v.back().second;
    if (hi->first == a || hi == v.begin()) return sign | hi->second;
    auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl < dh) return sign | lo->second;
    if (dh < dl) return sign | hi->second;
    return sign | ((lo->second & 1) ? hi->second : lo->second);  // a tie: the even pattern
  }
};

// Values that reach every corner: all patterns of the top 16 bits of an f32 with low halves
// that are 0, ties, just off ties and random.
std::vector<float> f32_probe() {
  std::vector<float> out;
  const std::uint32_t lows[] = {0, 1, 0x0FFF, 0x1000, 0x1001, 0x2000, 0x3000, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF};
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (std::uint32_t lo : lows) out.push_back(float_of((hi << 16) | lo));
  rng::Stream s(7, "lowp-probe");
  for (std::uint64_t i = 0; i < 200000; ++i) out.push_back(float_of(s.u32(i)));
  return out;
}

TEST(Half, NearestMatchesTheOracleFromF32AndF64) {
  const Oracle ob(true), oh(false);
  std::int64_t checked = 0;
  for (float x : f32_probe()) {
    if (std::isnan(x)) continue;
    const double d = x;
    ASSERT_EQ(half::bf16_bits(d), ob.nearest(d)) << std::hexfloat << d;
    ASSERT_EQ(half::f16_bits(d), oh.nearest(d)) << std::hexfloat << d;
    ++checked;
  }
  // f64 values are rounded once: a value just above a bf16 tie rounds up, where rounding
  // through f32 first would land on the tie and go to even
  rng::Stream s(8, "lowp-probe-f64");
  for (std::uint64_t i = 0; i < 200000; ++i) {
    double d;
    const std::uint64_t b = s.u64(i);
    std::memcpy(&d, &b, sizeof d);
    if (std::isnan(d)) continue;
    // pull the exponent into the formats' ranges
    int ex = 0;
    d = std::ldexp(std::frexp(d, &ex), static_cast<int>(i % 300) - 150);
    ASSERT_EQ(half::bf16_bits(d), ob.nearest(d)) << std::hexfloat << d;
    ASSERT_EQ(half::f16_bits(d), oh.nearest(d)) << std::hexfloat << d;
  }
  const double above_tie = 1.0 + 0x1p-8 + 0x1p-40;  // 1 + half a bf16 ulp + a little
  EXPECT_EQ(half::bf16_bits(above_tie), 0x3F81);
  EXPECT_EQ(half::bf16_bits_f32(static_cast<float>(above_tie)), 0x3F80);  // through f32: the tie, to even
  EXPECT_GT(checked, 700000);
}

TEST(Half, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(half::bf16_bits(0.0), 0x0000);
  EXPECT_EQ(half::bf16_bits(-0.0), 0x8000);
  EXPECT_EQ(half::f16_bits(-0.0), 0x8000);
  EXPECT_EQ(half::bf16_bits(inf), 0x7F80);
  EXPECT_EQ(half::f16_bits(-inf), 0xFC00);
  EXPECT_EQ(half::f16_bits(65504.0), 0x7BFF);
  EXPECT_EQ(half::f16_bits(65519.99), 0x7BFF);
  EXPECT_EQ(half::f16_bits(65520.0), 0x7C00);  // the tie above the largest: to even, which is inf
  EXPECT_EQ(half::f16_bits(0x1p-24), 0x0001);  // the smallest subnormal
  EXPECT_EQ(half::f16_bits(0x1p-25), 0x0000);  // half of it: a tie, to even (zero)
  EXPECT_EQ(half::f16_bits(0x1.0000000000001p-25), 0x0001);
  EXPECT_EQ(half::bf16_bits(0x1p-133), 0x0001);  // bf16's smallest subnormal (no flushing)
  EXPECT_EQ(half::bf16_bits(std::numeric_limits<double>::denorm_min()), 0x0000);
  EXPECT_EQ(half::bf16_bits(-std::numeric_limits<double>::denorm_min()), 0x8000);
  // NaN: sign and quiet bit, the top payload bits
  const double snan = float_of(0xFFA12345u);  // a signalling f32 NaN, negative, widened (hardware quiets it)
  EXPECT_EQ(half::bf16_bits(snan) & 0xFFC0, 0xFFC0);
  EXPECT_EQ(half::bf16_bits_f32(float_of(0xFFA12345u)), 0xFFE1);  // quiet bit set, payload's top bits kept
  EXPECT_TRUE(std::isnan(half::f16_value(half::f16_bits(snan))));
  EXPECT_TRUE(std::signbit(half::f16_value(half::f16_bits(snan))));
  // decoding is exact
  EXPECT_EQ(half::f16_value(0x0001), 0x1p-24);
  EXPECT_EQ(half::f16_value(0x3C01), 1.0 + 0x1p-10);
  EXPECT_EQ(half::bf16_value(0x0001), 0x1p-133);
  EXPECT_EQ(half::bf16_value(0x7F7F), 0x1.FEp127);
}

TEST(Half, TheF32FastPathsGiveTheGeneralBits) {
  for (float x : f32_probe()) {
    const std::uint16_t b = half::bf16_bits(static_cast<double>(x));
    ASSERT_EQ(half::bf16_bits_f32(x), b) << std::hex << bits_of(x);
    const float r16 = half::f16_round_f32(x);
    const float want16 = static_cast<float>(half::f16_value(half::f16_bits(static_cast<double>(x))));
    ASSERT_EQ(bits_of(r16), bits_of(want16)) << std::hex << bits_of(x);
    ASSERT_EQ(bits_of(half::bf16_to_f32(b)), bits_of(static_cast<float>(half::bf16_value(b)))) << std::hex << bits_of(x);
  }
}

TEST(Half, StochasticRoundingRule) {
  // 1 + 3/4 of a bf16 ulp: the dropped fraction is 0.75, t = 0.75 * 2^32; up iff u + t >= 2^32
  const double x = 1.0 + 0.75 * 0x1p-7;
  const std::uint32_t t = 0xC0000000u;
  EXPECT_EQ(half::bf16_bits_stochastic(x, 0), 0x3F80);
  EXPECT_EQ(half::bf16_bits_stochastic(x, 0xFFFFFFFFu - t), 0x3F80);
  EXPECT_EQ(half::bf16_bits_stochastic(x, 0xFFFFFFFFu - t + 1), 0x3F81);
  EXPECT_EQ(half::bf16_bits_stochastic(-x, 0xFFFFFFFFu), 0xBF81);  // away from zero, the sign kept
  // representable values never move
  for (std::uint32_t u : {0u, 1u, 0x80000000u, 0xFFFFFFFFu}) {
    EXPECT_EQ(half::bf16_bits_stochastic(1.5, u), half::bf16_bits(1.5));
    EXPECT_EQ(half::f16_bits_stochastic(0x1p-24, u), 0x0001);
    EXPECT_EQ(half::f16_bits_stochastic(0.0, u), 0x0000);
  }
  // far below the smallest f16 subnormal: t keeps 32 bits of the fraction (2^-30 of an ulp = 4 of 2^32)
  EXPECT_EQ(half::f16_bits_stochastic(0x1p-54, 0xFFFFFFFBu), 0x0000);
  EXPECT_EQ(half::f16_bits_stochastic(0x1p-54, 0xFFFFFFFCu), 0x0001);
  // the frequency of rounding up is the dropped fraction (to within sampling noise)
  rng::Stream s(9, "sr-frequency");
  int up = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) up += half::f16_bits_stochastic(1.0 + 0.3 * 0x1p-10, s.u32(static_cast<std::uint64_t>(i))) == 0x3C01;
  EXPECT_NEAR(static_cast<double>(up) / n, 0.3, 0.01);
}

TEST(LowpKernel, SameBitsAtEveryThreadCountAndOffset) {
  RuntimeGuard g;
  const std::int64_t n = 100003;
  std::vector<float> x(static_cast<std::size_t>(n));
  rng::Stream src(10, "lowp-kernel");
  for (std::int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = float_of(src.u32(static_cast<std::uint64_t>(i)) & 0xBFFFFFFFu);  // finite, mixed
  const rng::Stream sr(11, "round");
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    for (const rng::Stream* stream : {static_cast<const rng::Stream*>(nullptr), &sr}) {
      std::vector<float> want(x.size());
      set_num_threads(1);
      kern::round_to_precision(x.data(), want.data(), n, p, stream, 0);
      for (std::int64_t i = 0; i < n; i += 997) {
        const double d = x[static_cast<std::size_t>(i)];
        const std::uint16_t h = stream ? (p == Precision::bf16 ? half::bf16_bits_stochastic(d, sr.u32(static_cast<std::uint64_t>(i)))
                                                               : half::f16_bits_stochastic(d, sr.u32(static_cast<std::uint64_t>(i))))
                                       : (p == Precision::bf16 ? half::bf16_bits(d) : half::f16_bits(d));
        const double v = p == Precision::bf16 ? half::bf16_value(h) : half::f16_value(h);
        ASSERT_EQ(bits_of(static_cast<double>(want[static_cast<std::size_t>(i)])), bits_of(v)) << i;
      }
      for (int t : {2, 3, 4, 7, 8}) {
        set_num_threads(t);
        std::vector<float> got(x.size());
        kern::round_to_precision(x.data(), got.data(), n, p, stream, 0);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << precision_name(p) << " threads " << t;
      }
      // a part rounded on its own, from its first index, gives the whole's bits (micro-batches)
      const std::int64_t a = 4099, b = 77777;
      std::vector<float> part(static_cast<std::size_t>(b - a));
      kern::round_to_precision(x.data() + a, part.data(), b - a, p, stream, static_cast<std::uint64_t>(a));
      ASSERT_EQ(std::memcmp(part.data(), want.data() + a, part.size() * sizeof(float)), 0) << precision_name(p);
    }
  }
}

// Rounding to nearest is a table kernel (AVX-512: vcvtps2ph for fp16, the bit trick on 16 lanes
// for bf16): every code path gives the reference's bits at threads 1-8. The inputs: every
// sign / exponent / top-mantissa half (NaNs, infinities, subnormals among them) with the low
// halves that decide the rounding (ties, one below and above, sticky bits), an odd count so
// that the paths' tails run, and the same through pieces of 1 to 37 elements.
TEST(LowpKernel, FastRoundingToNearestHasTheReferencesBits) {
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF, 0x2000, 0x2001,
                                0x3000, 0x5A5A, 0x7FFF, 0x8000, 0x8001, 0xBFFF, 0xC000, 0xFFFF};
  std::vector<float> x;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (std::uint32_t lo : lows) x.push_back(float_of(hi << 16 | lo));
  x.resize(x.size() - 5);
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    expect_fast_equals_reference<float>(std::string("round_nearest ") + precision_name(p), [&](const kern::Table<float>& tb) {
      std::vector<float> y(x.size() * 2);
      kern::round_to_precision(x.data(), y.data(), n, p, nullptr, 0);  // the context's table, in parallel chunks
      for (std::int64_t a = 0, len = 1; a < n; a += len, len = len % 37 + 1)
        tb.round_nearest(p, x.data() + a, y.data() + n + a, std::min(len, n - a));
      return y;
    });
  }
}

// The same on every one of the 2^32 f32 patterns, each code path against the scalar one at 1
// thread: seconds at -O3, so only when asked (BITGRAD_EXHAUSTIVE=1; docs/numerics.md §23).
TEST(LowpKernel, ExhaustiveRoundingToNearestHasTheReferencesBits) {
  const char* on = std::getenv("BITGRAD_EXHAUSTIVE");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "set BITGRAD_EXHAUSTIVE=1 to compare all 2^32 f32 patterns";
  const std::int64_t block = 1 << 16;
  std::vector<float> x(block), want(block), got(block);
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) continue;
    const auto& fast = kern::table<float>(isa);
    const auto& ref = kern::table<float>(Isa::scalar);
    for (Precision p : {Precision::bf16, Precision::fp16}) {
      for (std::uint64_t hi = 0; hi < 0x10000; ++hi) {
        for (std::int64_t lo = 0; lo < block; ++lo) x[static_cast<std::size_t>(lo)] = float_of(static_cast<std::uint32_t>(hi << 16 | static_cast<std::uint64_t>(lo)));
        ref.round_nearest(p, x.data(), want.data(), block);
        fast.round_nearest(p, x.data(), got.data(), block);
        ASSERT_EQ(std::memcmp(want.data(), got.data(), sizeof(float) * static_cast<std::size_t>(block)), 0)
            << isa_name(isa) << " " << precision_name(p) << " high half " << hi;
      }
    }
  }
}

TEST(LowpKernel, F64ContainersRoundOnce) {
  const double x[] = {1.0 + 0x1p-8 + 0x1p-40, -3.0e-8, 70000.0, 0.1};
  double y[4];
  kern::round_to_precision(x, y, 4, Precision::bf16, nullptr, 0);
  EXPECT_EQ(y[0], 1.0 + 0x1p-7);
  kern::round_to_precision(x, y, 4, Precision::fp16, nullptr, 0);
  EXPECT_EQ(y[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(y[3], half::f16_value(half::f16_bits(0.1)));
  EXPECT_EQ(y[1], half::f16_value(half::f16_bits(-3.0e-8)));
}

TEST(StorageDtypes, CastRoundsAndWidensExactly) {
  Tensor x = Tensor::from(std::vector<float>{1.0f + 0x1p-8f, -2.5f, 65520.0f, 1e-30f, 3.0f}, Shape{5});
  Tensor b = x.cast(DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.0f, -2.5f, 65536.0f, static_cast<float>(half::bf16_value(half::bf16_bits(1e-30))), 3.0f}));
  Tensor h = x.cast(DType::f16);
  const std::vector<double> hv = h.to_vector<double>();
  EXPECT_EQ(hv[0], 1.0 + 0x1p-8);  // representable in f16 (10 fraction bits)
  EXPECT_EQ(hv[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(hv[3], 0.0);
  // an f64 source is rounded once
  Tensor d = Tensor::from(std::vector<double>{1.0 + 0x1p-8 + 0x1p-40}, Shape{1});
  EXPECT_EQ(d.cast(DType::bf16).item(), 1.0 + 0x1p-7);
  // storage only: ops refuse them, naming the dtype
  EXPECT_THROW_MSG(add(b, b), "bf16");
  // bits survive a copy
  Tensor c = Tensor::empty(Shape{5}, DType::bf16);
  c.copy_from(b);
  EXPECT_EQ(std::memcmp(c.data<bf16_t>(), b.data<bf16_t>(), 10), 0);
}

TEST(RoundTo, ForwardRoundsAndBackwardRoundsActivationsOnly) {
  Tensor x = Tensor::from(std::vector<float>{1.0f + 0x1p-9f, 3.0f, -0.1f, 1e5f}, Shape{2, 2});
  x.set_requires_grad(true);
  Tensor y = round_to(x, Precision::bf16);
  EXPECT_EQ(y.to_vector<float>()[0], 1.0f);
  Tensor g = Tensor::from(std::vector<float>{1.0f + 0x1p-9f, 1.0f, 1.0f, 1.0f}, Shape{2, 2});
  y.backward(g);
  EXPECT_EQ(x.grad().to_vector<float>()[0], 1.0f) << "an activation's gradient is rounded";
  Tensor w = Tensor::from(std::vector<float>{1.0f + 0x1p-9f, 3.0f, -0.1f, 1e5f}, Shape{2, 2});
  w.set_requires_grad(true);
  round_to(w, Precision::fp16, nullptr, 0, false).backward(g);
  EXPECT_EQ(w.grad().to_vector<float>()[0], 1.0f + 0x1p-9f) << "a parameter copy's gradient reaches the master unrounded";
  EXPECT_EQ(round_to(w, Precision::fp16).to_vector<float>()[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_to(x, Precision::fp32).to_vector<float>(), x.to_vector<float>());
  EXPECT_THROW_MSG(round_to(Tensor::zeros(Shape{2}, DType::i64), Precision::bf16), "round_to");
}

}  // namespace
}  // namespace bitgrad::test
