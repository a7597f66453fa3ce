// Reductions: gradients (f64), determinism (f32), and the axis rules' documented orders.
#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(ReduceOps, Gradients) {
  std::vector<OpCase> cases = {
      {"sum(x=[3,4])", {{3, 4}}, [](V x) { return sum(x[0]); }},
      {"sum(x=[40])", {{40}}, [](V x) { return sum(x[0]); }},
      {"sum(x=[3,4],axes={0})", {{3, 4}}, [](V x) { return sum(x[0], {0}); }},
      {"sum(x=[3,4],axes={1},keepdim)", {{3, 4}}, [](V x) { return sum(x[0], {1}, true); }},
      {"sum(x=[2,3,4],axes={0,2})", {{2, 3, 4}}, [](V x) { return sum(x[0], {0, 2}); }},
      {"sum(x=[2,3,4],axes={-1,1})", {{2, 3, 4}}, [](V x) { return sum(x[0], {-1, 1}); }},
      {"mean(x=[5,3])", {{5, 3}}, [](V x) { return mean(x[0]); }},
      {"mean(x=[5,3],axes={0},keepdim)", {{5, 3}}, [](V x) { return mean(x[0], {0}, true); }},
      {"max(x=[13])", {{13}}, [](V x) { return max(x[0]); }},
      {"max(x=[3,5],axis=1)", {{3, 5}}, [](V x) { return max(x[0], 1); }},
      {"max(x=[4,3,2],axis=0,keepdim)", {{4, 3, 2}}, [](V x) { return max(x[0], 0, true); }},
      {"min(x=[13])", {{13}}, [](V x) { return min(x[0]); }},
      {"min(x=[3,5],axis=-1)", {{3, 5}}, [](V x) { return min(x[0], -1); }},
      {"norm(x=[40])", {{40}}, [](V x) { return norm(x[0]); }},
      {"norm(x=[35,3])", {{35, 3}}, [](V x) { return norm(x[0]); }},
  };
  run_all_modes(cases);
}

TEST(ReduceOps, AxisRules) {
  // [N, D] full sum: the row rule over D per sample, then the batch rule over N
  const std::int64_t N = 70, D = 20;
  auto v = random_vec<float>(static_cast<std::size_t>(N * D), 31);
  Tensor x = Tensor::from<float>(v, Shape{N, D});
  float rows[N];
  kern::table<float>(Isa::scalar).sum_rows(v.data(), N, D, rows);
  float blk[3] = {0, 0, 0};
  for (std::int64_t n = 0; n < N; ++n) blk[n / 32] = blk[n / 32] + rows[n];
  const float want = (blk[0] + blk[1]) + blk[2];
  EXPECT_EQ(std::bit_cast<std::uint32_t>(want), std::bit_cast<std::uint32_t>(static_cast<float>(sum(x).item())));
  // axis 0 of [N, D]: the batch rule per column
  Tensor s0 = sum(x, {0});
  for (std::int64_t d = 0; d < D; ++d) {
    float b[3] = {0, 0, 0};
    for (std::int64_t n = 0; n < N; ++n) b[n / 32] = b[n / 32] + v[static_cast<std::size_t>(n * D + d)];
    EXPECT_EQ(std::bit_cast<std::uint32_t>((b[0] + b[1]) + b[2]), std::bit_cast<std::uint32_t>(s0.to_vector<float>()[static_cast<std::size_t>(d)]));
  }
}

TEST(ReduceOps, MaxSemantics) {
  Tensor x = Tensor::from<float>(std::vector<float>{1, 3, 3, -2}, Shape{4});
  x.set_requires_grad(true);
  Tensor m = max(x);
  EXPECT_EQ(m.item(), 3.0);
  m.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 1, 0, 0})) << "gradient goes to the first maximum";
  Tensor y = Tensor::from<float>(std::vector<float>{1, NAN, 5}, Shape{3});
  EXPECT_TRUE(std::isnan(max(y).item()));
  EXPECT_EQ(argmax(y, 0).item(), 1.0);
  EXPECT_THROW(max(Tensor::zeros({0})), Error);
  EXPECT_EQ(min(x).item(), -2.0);
  EXPECT_EQ(argmin(Tensor::from<float>(std::vector<float>{2, -1, -1}, Shape{3}), 0).item(), 1.0) << "first minimum";
  EXPECT_EQ(norm(Tensor::from<float>(std::vector<float>{3, 4}, Shape{2})).item(), 5.0);
  Tensor z = Tensor::zeros({3}, DType::f64);
  z.set_requires_grad(true);
  norm(z).backward();
  EXPECT_EQ(z.grad().to_vector<double>(), (std::vector<double>{0, 0, 0})) << "subgradient 0 at the origin";
  EXPECT_THROW(mean(Tensor::zeros({0, 3})), Error);
}

}  // namespace
}  // namespace bitgrad::test
