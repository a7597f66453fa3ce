// Elementwise ops: gradients against finite differences (f64) and bitwise determinism (f32).
#include <bit>
#include <cmath>
#include <optional>

#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

// One case per op line of bitgrad/op_list.hpp, its input drawn from the line's range: an op
// appended to the list is checked (gradient, determinism) without a line here.
std::vector<OpCase> listed_unary_cases(Shape simple, Shape math) {
  std::vector<OpCase> cases;
#define BITGRAD_OPLIST_CASE(name, grad, cost, lo, hi, ...)                                                  \
  BITGRAD_OPLIST_IF_OP(grad)(cases.push_back(                                                              \
      {#name, {kern::OpCost::cost == kern::OpCost::math ? math : simple}, [](V x) { return name(x[0]); }, lo, hi});)
  BITGRAD_UNARY_OPS(BITGRAD_OPLIST_CASE)
#undef BITGRAD_OPLIST_CASE
  // the activations with parameters, at their defaults
#define BITGRAD_OPLIST_CASE(name, cost, nparams, a, da, b, db, lo, hi, ...)                                \
  cases.push_back({#name, {kern::OpCost::cost == kern::OpCost::math ? math : simple}, [](V x) { return name(x[0]); }, lo, hi});
  BITGRAD_PARAM_OPS(BITGRAD_OPLIST_CASE)
#undef BITGRAD_OPLIST_CASE
  return cases;
}

TEST(ElementwiseOps, BinaryWithBroadcasting) {
  std::vector<OpCase> cases = {
      {"add", {{3, 4}, {3, 4}}, [](V x) { return add(x[0], x[1]); }},
      {"add", {{3, 4}, {4}}, [](V x) { return add(x[0], x[1]); }},
      {"add", {{3, 4}, {3, 1}}, [](V x) { return add(x[0], x[1]); }},
      {"add", {{4}, {2, 3, 4}}, [](V x) { return add(x[0], x[1]); }},
      {"add", {{2, 1, 4}, {3, 1}}, [](V x) { return add(x[0], x[1]); }},
      {"sub", {{2, 3, 4}, {3, 1}}, [](V x) { return sub(x[0], x[1]); }},
      {"sub", {{}, {5}}, [](V x) { return sub(x[0], x[1]); }},
      {"mul", {{3, 4}, {4}}, [](V x) { return mul(x[0], x[1]); }},
      {"mul", {{2, 1, 4}, {3, 1}}, [](V x) { return mul(x[0], x[1]); }},
      {"mul (x times itself)", {{5}}, [](V x) { return mul(x[0], x[0]); }},
      {"div (by b+2)", {{3, 4}, {3, 1}}, [](V x) { return div(x[0], add(x[1], 2.0)); }},
      {"div (by b+2)", {{4}, {3, 4}}, [](V x) { return div(x[0], add(x[1], 2.0)); }},
      {"pow", {{3, 4}, {4}}, [](V x) { return pow(x[0], x[1]); }, 0.5, 2.0},
      {"maximum", {{3, 4}, {4}}, [](V x) { return maximum(x[0], x[1]); }},
      {"minimum", {{3, 1}, {3, 4}}, [](V x) { return minimum(x[0], x[1]); }},
      {"scalar_ops", {{7}}, [](V x) { return rdiv(3.0, add(rsub(2.5, mul(add(sub(x[0], 1.5), 0.25), 2.0)), 4.0)); }},
  };
  run_all_modes(cases);
}

TEST(ElementwiseOps, Unary) {
  std::vector<OpCase> cases = {
      {"pow(p=2.5)", {{6}}, [](V x) { return pow(x[0], 2.5); }, 0.2, 3},
      {"pow(p=3)", {{6}}, [](V x) { return pow(x[0], 3.0); }, -2, 2},
      {"clamp(lo=-0.5,hi=0.5)", {{20}}, [](V x) { return clamp(x[0], -0.5, 0.5); }},
      {"clamp(lo=0.5,hi=-0.5) (ONNX's Clip: hi everywhere)", {{20}}, [](V x) { return clamp(x[0], 0.5, -0.5); }},
      {"clamp_min(lo=-0.25)", {{20}}, [](V x) { return clamp_min(x[0], -0.25); }},
      {"clamp_max(hi=0.25)", {{20}}, [](V x) { return clamp_max(x[0], 0.25); }},
      {"clamp(hi=0.3) (optional bounds)", {{20}}, [](V x) { return clamp(x[0], std::nullopt, std::optional<double>(0.3)); }},
      {"maximum(s=0.2)", {{20}}, [](V x) { return maximum(x[0], 0.2); }},
      {"minimum(s=-0.2)", {{20}}, [](V x) { return minimum(x[0], -0.2); }},
      {"leaky_relu(alpha=0.3)", {{20}}, [](V x) { return leaky_relu(x[0], 0.3); }},
      {"elu(alpha=0.5)", {{20}}, [](V x) { return elu(x[0], 0.5); }, -3, 3},
      {"celu(alpha=2)", {{20}}, [](V x) { return celu(x[0], 2.0); }, -3, 3},
      {"hardsigmoid(alpha=1/6,beta=0.5) (PyTorch's)", {{20}}, [](V x) { return hardsigmoid(x[0], 1.0 / 6.0, 0.5); }, -4, 4},
      {"thresholded_relu(alpha=0.2)", {{20}}, [](V x) { return thresholded_relu(x[0], 0.2); }},
      {"prelu (slope per channel)", {{2, 3, 4}, {3, 1}}, [](V x) { return prelu(x[0], x[1]); }},
      {"prelu (one slope)", {{5, 4}, {}}, [](V x) { return prelu(x[0], x[1]); }},
      {"masked_fill(value=2.5)", {{3, 4}}, [](V x) { return masked_fill(x[0], x[1], 2.5); }, -1, 1,
       {Tensor::from<std::uint8_t>(std::vector<std::uint8_t>{1, 0, 0, 1}, Shape{4})}},
      {"cast (to f64 and back: the gradient flows through both)", {{7}}, [](V x) { return cast(mul(cast(x[0], DType::f64), 1.5), x[0].dtype()); }},
      {"where (the condition is the last input)", {{3, 4}, {4}}, [](V x) { return where(x[2], x[0], x[1]); }, -1, 1,
       {Tensor::from<std::uint8_t>(std::vector<std::uint8_t>{1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 1}, Shape{3, 4})}},
  };
  for (OpCase& c : listed_unary_cases(Shape{17}, Shape{17})) cases.push_back(c);
  run_all_modes(cases);
}

// Big enough for the elementwise grains (kernels/fast_impl.hpp): 2^15 elements per chunk for
// simple ops, 2^12 for the elementary functions, so 2^18 elements reach 8 threads. Binary ops
// split over the rows of a broadcast only: with operands of the same shape, or a scalar
// (pow(x, 2.5)), they run on one thread today, so they are not listed.
TEST(ElementwiseOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"add", {{512, 512}, {512}}, [](V x) { return add(x[0], x[1]); }},
      {"mul", {{512, 512}, {512, 1}}, [](V x) { return mul(x[0], x[1]); }},
      {"div (by b+2)", {{512, 512}, {512}}, [](V x) { return div(x[0], add(x[1], 2.0)); }},
      {"pow", {{64, 512}, {512}}, [](V x) { return pow(x[0], x[1]); }, 0.5, 2.0},
  };
  for (OpCase& c : listed_unary_cases(Shape{512, 512}, Shape{128, 256})) cases.push_back(c);
  check_split_determinism(cases);
}

TEST(ElementwiseOps, Errors) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  try {
    add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add: shapes [2, 3] and [4] cannot be broadcast"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mul(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), Error);
  EXPECT_THROW(exp(Tensor::zeros({2}, DType::i64)), Error);
  EXPECT_THROW(clamp(a, std::nullopt, std::nullopt), Error);
  EXPECT_THROW(celu(a, 0.0), Error);
  EXPECT_THROW(leaky_relu(a, NAN), Error);
  try {
    prelu(Tensor::zeros({2, 3}), Tensor::zeros({2, 1, 3}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prelu: slope of shape [2, 1, 3] must broadcast to x's shape [2, 3]"), std::string::npos) << e.what();
  }
  // ONNX's Clip: min > max gives max everywhere
  EXPECT_EQ(clamp(Tensor::from<float>(std::vector<float>{-3.0f, 0.0f, 3.0f}, Shape{3}), 1.0, -1.0).to_vector<float>(),
            (std::vector<float>{-1.0f, -1.0f, -1.0f}));
}

TEST(ElementwiseOps, ValuesAndSpecialCases) {
  Tensor x = Tensor::from<float>(std::vector<float>{-1.0f, 0.0f, 2.0f}, Shape{3});
  auto r = relu(x).to_vector<float>();
  EXPECT_EQ(r, (std::vector<float>{0.0f, 0.0f, 2.0f}));
  auto m = maximum(Tensor::from<float>(std::vector<float>{-0.0f}, Shape{1}), Tensor::from<float>(std::vector<float>{0.0f}, Shape{1}));
  EXPECT_FALSE(std::signbit(m.to_vector<float>()[0])) << "maximum(-0, +0) is +0";
  auto n = maximum(Tensor::from<float>(std::vector<float>{NAN}, Shape{1}), Tensor::from<float>(std::vector<float>{1.0f}, Shape{1}));
  EXPECT_TRUE(std::isnan(n.to_vector<float>()[0])) << "maximum propagates NaN";
  // softplus: x itself beyond the threshold 20; log 2 at 0; +0 where e^-|x| underflows and at -inf
  auto sp = softplus(Tensor::from<double>(std::vector<double>{25.0, 0.0, -800.0, -INFINITY}, Shape{4})).to_vector<double>();
  EXPECT_EQ(sp, (std::vector<double>{25.0, math::log1p(1.0), 0.0, 0.0}));
}

// The values the lists cannot say (numerics.md §32): halves, signs of zero, kinks, NaN
TEST(ElementwiseOps, RoundingSignAndKinks) {
  auto f64 = [](std::vector<double> v) { return Tensor::from<double>(v, Shape{static_cast<std::int64_t>(v.size())}); };
  auto bits = [](const std::vector<double>& v) {
    std::vector<std::uint64_t> b;
    for (double d : v) b.push_back(std::bit_cast<std::uint64_t>(d));
    return b;
  };
  const Tensor x = f64({-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, -0.7, 0.7});
  EXPECT_EQ(bits(round(x).to_vector<double>()), bits({-2.0, -2.0, -0.0, -0.0, 0.0, 0.0, 2.0, 2.0, -1.0, 1.0}));
  EXPECT_EQ(bits(floor(x).to_vector<double>()), bits({-3.0, -2.0, -1.0, -0.0, 0.0, 0.0, 1.0, 2.0, -1.0, 0.0}));
  EXPECT_EQ(bits(ceil(x).to_vector<double>()), bits({-2.0, -1.0, -0.0, -0.0, 0.0, 1.0, 2.0, 3.0, -0.0, 1.0}));
  EXPECT_EQ(bits(sign(x).to_vector<double>()), bits({-1.0, -1.0, -1.0, -0.0, 0.0, 1.0, 1.0, 1.0, -1.0, 1.0}));
  EXPECT_TRUE(std::isnan(sign(f64({NAN})).to_vector<double>()[0]));

  // gradients at the kinks: abs'(0) = 0; sign, floor, ceil, round give +0 everywhere;
  // hardswish: PyTorch's x/3 + 0.5 on [-3, 3], 0 below, 1 above
  auto grad_of = [&](Tensor (*op)(const Tensor&, CallSite), std::vector<double> v) {
    Tensor t = f64(v);
    t.set_requires_grad(true);
    sum(op(t, CallSite::current())).backward();
    return t.grad().to_vector<double>();
  };
  EXPECT_EQ(grad_of(abs, {-2.0, -0.0, 0.0, 3.0}), (std::vector<double>{-1.0, 0.0, 0.0, 1.0}));
  for (auto op : {sign, floor, ceil, round}) EXPECT_EQ(bits(grad_of(op, {-1.5, 0.0, 0.5, 2.0})), bits({0.0, 0.0, 0.0, 0.0}));
  EXPECT_EQ(grad_of(hardswish, {-4.0, -3.0, 0.0, 3.0, 4.0}), (std::vector<double>{0.0, -0.5, 0.5, 1.5, 1.0}));
  EXPECT_EQ(hardswish(f64({-4.0, -3.0, 1.0, 3.0, 4.0})).to_vector<double>(), (std::vector<double>{-0.0, -0.0, 4.0 / 6.0, 3.0, 4.0}));
  // softsign, silu, mish at 0 and far out
  EXPECT_EQ(softsign(f64({-3.0, 0.0, 1.0})).to_vector<double>(), (std::vector<double>{-0.75, 0.0, 0.5}));
  EXPECT_EQ(silu(f64({0.0, 800.0, -800.0})).to_vector<double>(), (std::vector<double>{0.0, 800.0, -0.0}));
  EXPECT_EQ(mish(f64({0.0, 30.0})).to_vector<double>(), (std::vector<double>{0.0, 30.0}));
  // tan: odd, -0 kept; reciprocal of +-0
  EXPECT_TRUE(std::signbit(tan(f64({-0.0})).to_vector<double>()[0]));
  EXPECT_EQ(reciprocal(f64({0.0, -0.0, 4.0})).to_vector<double>(), (std::vector<double>{INFINITY, -INFINITY, 0.25}));
}

}  // namespace
}  // namespace bitgrad::test
