// Accuracy of the elementary functions against MPFR on a CI-sized sample (the 10^7-input
// figures in docs/numerics.md come from tools/mathfn_accuracy), and their special values.
#include <bit>
#include <cmath>
#include <limits>

#include "mpfr_oracle.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using tools::Fn;

TEST(MathAccuracy, WithinOneUlpOfMpfr) {
  for (const auto& f : tools::all_functions()) {
    auto d = tools::make_inputs<double>(f.fn, 20000, 0xabc + static_cast<unsigned>(f.fn));
    auto s = tools::make_inputs<float>(f.fn, 20000, 0xdef + static_cast<unsigned>(f.fn));
    tools::Accuracy ad = tools::measure<double>(f.fn, d, 0, d.size());
    tools::Accuracy as = tools::measure<float>(f.fn, s, 0, s.size());
    EXPECT_LE(ad.max_ulp, 1.0) << f.name << " f64, worst at (" << ad.worst_a << ", " << ad.worst_b << ")";
    EXPECT_LE(as.max_ulp, 1.0) << f.name << " f32, worst at (" << as.worst_a << ", " << as.worst_b << ")";
  }
}

TEST(MathAccuracy, SpecialValues) {
  namespace m = bitgrad::math;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(m::exp(-inf), 0.0);
  EXPECT_EQ(m::exp(inf), inf);
  EXPECT_EQ(m::exp(0.0), 1.0);
  EXPECT_EQ(m::exp(710.0), inf);
  EXPECT_EQ(m::exp(-746.0), 0.0);
  EXPECT_EQ(m::exp(-745.0), 0x1p-1074);
  EXPECT_EQ(m::log(0.0), -inf);
  EXPECT_TRUE(std::isnan(m::log(-1.0)));
  EXPECT_EQ(m::log(1.0), 0.0);
  EXPECT_EQ(m::log(inf), inf);
  EXPECT_TRUE(std::signbit(m::log1p(-0.0)));
  EXPECT_TRUE(std::signbit(m::expm1(-0.0)));
  EXPECT_EQ(m::expm1(-inf), -1.0);
  EXPECT_EQ(m::tanh(inf), 1.0);
  EXPECT_EQ(m::tanh(-inf), -1.0);
  EXPECT_TRUE(std::signbit(m::tanh(-0.0)));
  EXPECT_EQ(m::sigmoid(inf), 1.0);
  EXPECT_EQ(m::sigmoid(-inf), 0.0);
  EXPECT_EQ(m::sigmoid(0.0), 0.5);
  EXPECT_EQ(m::erf(inf), 1.0);
  EXPECT_TRUE(std::signbit(m::erf(-0.0)));
  EXPECT_TRUE(std::isnan(m::sin(inf)));
  EXPECT_TRUE(std::signbit(m::sin(-0.0)));
  EXPECT_EQ(m::cos(0.0), 1.0);
  EXPECT_EQ(m::pow(0.0, -1.0), inf);
  EXPECT_EQ(m::pow(-0.0, -1.0), -inf);
  EXPECT_EQ(m::pow(-2.0, 3.0), -8.0);
  EXPECT_TRUE(std::isnan(m::pow(-2.0, 0.5)));
  EXPECT_EQ(m::pow(std::nan(""), 0.0), 1.0);
  EXPECT_EQ(m::pow(1.0, std::nan("")), 1.0);
  EXPECT_EQ(m::pow(-1.0, inf), 1.0);
  EXPECT_EQ(m::pow(0.5, inf), 0.0);
  EXPECT_EQ(m::pow(2.0, -inf), 0.0);
  EXPECT_EQ(m::rsqrt(0.0), inf);
  EXPECT_EQ(m::rsqrt(-0.0), -inf);
  EXPECT_EQ(m::rsqrt(4.0), 0.5);
  for (double x : {std::nan(""), -std::nan("")}) {
    EXPECT_TRUE(std::isnan(m::exp(x)));
    EXPECT_TRUE(std::isnan(m::tanh(x)));
    EXPECT_TRUE(std::isnan(m::erf(x)));
    EXPECT_TRUE(std::isnan(m::sigmoid(x)));
    EXPECT_TRUE(std::isnan(m::tan(x)));
    EXPECT_TRUE(std::isnan(m::floor(x)));
  }
  // the f32 formulas of sigmoid and tanh (numerics §8): their own special values
  const float inff = std::numeric_limits<float>::infinity();
  EXPECT_EQ(m::sigmoid(inff), 1.0f);
  EXPECT_EQ(m::sigmoid(-inff), 0.0f);
  EXPECT_EQ(m::sigmoid(0.0f), 0.5f);
  EXPECT_EQ(m::sigmoid(-0.0f), 0.5f);
  EXPECT_EQ(m::sigmoid(-1e30f), 0.0f);
  EXPECT_EQ(m::sigmoid(-104.0f), 0.0f);                          // e^-104 < 2^-150
  EXPECT_EQ(m::sigmoid(-103.0f), std::numeric_limits<float>::denorm_min());  // e^-103 rounds to 2^-149
  EXPECT_EQ(m::sigmoid(100.0f), 1.0f);
  EXPECT_EQ(m::tanh(inff), 1.0f);
  EXPECT_EQ(m::tanh(-inff), -1.0f);
  EXPECT_EQ(m::tanh(10.0f), 1.0f);
  EXPECT_TRUE(std::signbit(m::tanh(-0.0f)) && m::tanh(-0.0f) == 0.0f);
  EXPECT_FALSE(std::signbit(m::tanh(0.0f)));
  EXPECT_EQ(m::tanh(std::numeric_limits<float>::denorm_min()), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(m::tanh(-1e-30f), -1e-30f);
  for (float x : {std::nanf(""), -std::nanf("")}) {
    EXPECT_TRUE(std::isnan(m::sigmoid(x)));
    EXPECT_TRUE(std::isnan(m::tanh(x)));
  }
  EXPECT_TRUE(std::isnan(m::tan(inf)));
  EXPECT_TRUE(std::signbit(m::tan(-0.0)));
  EXPECT_EQ(m::tan(0.0), 0.0);
}

// floor, ceil and round (halves to even) are exact: compared with the C library's on halves,
// near-integers, the signs of zero, 2^52 and beyond, and infinities
TEST(MathAccuracy, RoundingToIntegers) {
  namespace m = bitgrad::math;
  const double inf = std::numeric_limits<double>::infinity();
  const double xs[] = {0.0, -0.0, 0.3, -0.3, 0.5, -0.5, 0.7, -0.7, 1.5, -1.5, 2.5, -2.5, 3.0, -3.0,
                       0x1p52 - 0.5, -(0x1p52 - 0.5), 0x1p52, 0x1p52 + 1, 0x1p60, -0x1p60, 1e-310, -1e-310,
                       0.49999999999999994, -0.49999999999999994, inf, -inf};
  for (double x : xs) {
    const double want[3] = {std::floor(x), std::ceil(x), std::nearbyint(x)};
    const double got[3] = {m::floor(x), m::ceil(x), m::round_even(x)};
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(got[k]), std::bit_cast<std::uint64_t>(want[k]))
          << (k == 0 ? "floor(" : k == 1 ? "ceil(" : "round_even(") << x << ") = " << got[k] << ", expected " << want[k];
    }
  }
}

}  // namespace
}  // namespace bitgrad::test
