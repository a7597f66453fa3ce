// Philox-4x32-10 against the Random123 known-answer vectors, and bitgrad's streams and
// distributions.
#include <cmath>
#include <set>

#include "bitgrad/math.hpp"
#include "bitgrad/rng.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(Philox, Random123KnownAnswers) {
  // kat_vectors of Random123: counter (4 words), key (2 words) -> output (4 words)
  struct Kat {
    rng::Block ctr;
    std::array<std::uint32_t, 2> key;
    rng::Block out;
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}, {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}, {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const auto& k : kats) EXPECT_EQ(rng::philox4x32_10(k.ctr, k.key), k.out);
}

TEST(Philox, StreamsArePureFunctionsOfSeedStreamAndIndex) {
  rng::Stream a(42, "init"), b(42, "init"), c(43, "init"), d(42, "dropout");
  EXPECT_EQ(a.u64(1000), b.u64(1000));
  EXPECT_NE(a.u64(1000), c.u64(1000));
  EXPECT_NE(a.u64(1000), d.u64(1000));
  EXPECT_NE(a.sub(1).u64(0), a.sub(2).u64(0));
  EXPECT_EQ(a.sub(7).u64(5), b.sub(7).u64(5));
  // the documented layout: block i has counter {lo(i), hi(i), lo(id), hi(id)}, key {lo(seed), hi(seed)}
  const std::uint64_t id = rng::stream_id("init");
  rng::Block want = rng::philox4x32_10({5, 0, static_cast<std::uint32_t>(id), static_cast<std::uint32_t>(id >> 32)}, {42, 0});
  EXPECT_EQ(a.block(5), want);
  EXPECT_EQ(a.u32(21), want[1]);
  EXPECT_EQ(rng::stream_id(""), 0xcbf29ce484222325ULL) << "FNV-1a offset basis";
}

TEST(Philox, Distributions) {
  rng::Stream s(7, "test");
  double sum = 0, sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = s.uniform_f64(static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const float uf = s.uniform_f32(static_cast<std::uint64_t>(i));
    ASSERT_GE(uf, 0.0f);
    ASSERT_LT(uf, 1.0f);
    const double z = s.normal_f64(static_cast<std::uint64_t>(i));
    sum += z;
    sq += z * z;
    ASSERT_LT(s.below(static_cast<std::uint64_t>(i), 10), 10u);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.01);
  // Box-Muller as documented, against libm. The bound, per side (u = 2^-53, A = sqrt(-2 log u1)):
  // log and sqrt within 1 ulp each and their rounding, 1.5 u of A; the angle 2 pi u2 within 2 u of
  // 2 pi, so cos/sin off by up to 4 pi u, plus their own ulp; the product's rounding: A (4 pi + 3.5) u.
  // Both sides (bitgrad's functions are within 1 ulp, numerics.md §8; glibc documents the same):
  // twice that. A wrong formula (a swapped cos/sin, a missing factor) is off by O(A).
  rng::Block b = s.block(3);
  const double u1 = static_cast<double>(((static_cast<std::uint64_t>(b[1]) << 32 | b[0]) >> 11) + 1) * 0x1p-53;
  const double u2 = static_cast<double>((static_cast<std::uint64_t>(b[3]) << 32 | b[2]) >> 11) * 0x1p-53;
  const double a = std::sqrt(-2 * std::log(u1)), bound = 2 * a * (4 * M_PI + 3.5) * 0x1p-53;
  EXPECT_NEAR(s.normal_f64(6), a * std::cos(2 * M_PI * u2), bound);
  EXPECT_NEAR(s.normal_f64(7), a * std::sin(2 * M_PI * u2), bound);
}

// The block-wise fills give the element-wise words from any start (mid-block too) and length,
// and fill_uniform the element-wise uniforms.
TEST(Philox, FillsAreTheElementWiseWords) {
  const rng::Stream s(9, "fill");
  for (std::uint64_t first : {0ULL, 1ULL, 2ULL, 3ULL, 4ULL, 5ULL, (1ULL << 32) - 3})
    for (std::int64_t n : {0, 1, 2, 3, 5, 8, 13, 300}) {
      std::vector<std::uint32_t> a(static_cast<std::size_t>(n) + 1, 7u);
      std::vector<std::uint64_t> b(static_cast<std::size_t>(n) + 1, 7u);
      std::vector<float> f(static_cast<std::size_t>(n));
      std::vector<double> d(static_cast<std::size_t>(n));
      s.fill_u32(a.data(), n, first);
      s.fill_u64(b.data(), n, first);
      s.fill_uniform(f.data(), n, first, -2.0f, 3.0f);
      s.fill_uniform(d.data(), n, first, -2.0, 3.0);
      for (std::int64_t j = 0; j < n; ++j) {
        const std::uint64_t i = first + static_cast<std::uint64_t>(j);
        EXPECT_EQ(a[static_cast<std::size_t>(j)], s.u32(i)) << first << " " << j;
        EXPECT_EQ(b[static_cast<std::size_t>(j)], s.u64(i)) << first << " " << j;
        EXPECT_EQ(f[static_cast<std::size_t>(j)], -2.0f + 5.0f * s.uniform_f32(i));
        EXPECT_EQ(d[static_cast<std::size_t>(j)], -2.0 + 5.0 * s.uniform_f64(i));
      }
      EXPECT_EQ(a.back(), 7u);  // nothing written past n
      EXPECT_EQ(b.back(), 7u);
    }
}

TEST(Philox, Permutation) {
  rng::Stream s(1, "shuffle");
  auto p = s.permutation(1000);
  std::set<std::int64_t> seen(p.begin(), p.end());
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 999);
  EXPECT_EQ(p, s.permutation(1000));
  EXPECT_NE(p, rng::Stream(2, "shuffle").permutation(1000));
  EXPECT_TRUE(s.permutation(0).empty());
}

}  // namespace
}  // namespace bitgrad::test
