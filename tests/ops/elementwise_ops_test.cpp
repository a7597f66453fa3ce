// Elementwise ops: gradients against finite differences (f64) and bitwise determinism (f32).
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
  EXPECT_THROW(clamp(a, 1.0, -1.0), Error);
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

}  // namespace
}  // namespace bitgrad::test
