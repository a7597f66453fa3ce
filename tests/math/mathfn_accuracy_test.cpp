// Accuracy of the elementary functions against MPFR on a CI-sized sample (the 10^7-input
// figures in docs/numerics.md come from tools/mathfn_accuracy), and their special values.
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
  }
}

}  // namespace
}  // namespace bitgrad::test
