// Reductions: gradients (f64), determinism (f32), and the axis rules' documented orders.
#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(ReduceOps, Gradients) {
  std::vector<OpCase> cases = {
      {"sum", {{3, 4}}, [](V x) { return sum(x[0]); }},
      {"sum", {{40}}, [](V x) { return sum(x[0]); }},
      {"sum(axes={0})", {{3, 4}}, [](V x) { return sum(x[0], {0}); }},
      {"sum(axes={1},keepdim)", {{3, 4}}, [](V x) { return sum(x[0], {1}, true); }},
      {"sum(axes={0,2})", {{2, 3, 4}}, [](V x) { return sum(x[0], {0, 2}); }},
      {"sum(axes={-1,1})", {{2, 3, 4}}, [](V x) { return sum(x[0], {-1, 1}); }},
      {"mean", {{5, 3}}, [](V x) { return mean(x[0]); }},
      {"mean(axes={0},keepdim)", {{5, 3}}, [](V x) { return mean(x[0], {0}, true); }},
      {"max", {{13}}, [](V x) { return max(x[0]); }},
      {"max(axis=1)", {{3, 5}}, [](V x) { return max(x[0], 1); }},
      {"max(axis=0,keepdim)", {{4, 3, 2}}, [](V x) { return max(x[0], 0, true); }},
      {"min", {{13}}, [](V x) { return min(x[0]); }},
      {"min(axis=-1)", {{3, 5}}, [](V x) { return min(x[0], -1); }},
      {"norm", {{40}}, [](V x) { return norm(x[0]); }},
      {"norm", {{35, 3}}, [](V x) { return norm(x[0]); }},
  };
  run_all_modes(cases);
}

// Big enough for the grains: the row rule splits rows of 4096 elements per chunk, the batch
// rule column groups of 2^16 elements, argmax 2^12 outputs.
TEST(ReduceOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"sum", {{64, 4096}}, [](V x) { return sum(x[0]); }},
      {"sum(axes={0})", {{512, 1024}}, [](V x) { return sum(x[0], {0}); }},
      {"sum(axes={1},keepdim)", {{1024, 256}}, [](V x) { return sum(x[0], {1}, true); }},
      {"mean(axes={0,2})", {{64, 512, 16}}, [](V x) { return mean(x[0], {0, 2}); }},
      {"max(axis=0)", {{16, 32768}}, [](V x) { return max(x[0], 0); }},
      {"norm", {{64, 4096}}, [](V x) { return norm(x[0]); }},
  };
  check_split_determinism(cases);
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
