// matmul and linear: gradients (f64), determinism (f32), shapes and errors.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(MatmulOps, Gradients) {
  std::vector<OpCase> cases = {
      {"matmul", {{3, 4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{3, 4}, {4}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{4}, {4}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{2, 3, 4}, {4, 5}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{3, 4}, {2, 4, 5}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{2, 3, 4}, {2, 4, 5}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul (k crosses a block)", {{3, 40}, {40, 2}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul (k crosses a chunk)", {{2, 300}, {300, 2}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul (m crosses a block)", {{35, 3}, {3, 2}}, [](V x) { return matmul(x[0], x[1]); }},
      {"linear", {{5, 4}, {3, 4}, {3}}, [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear", {{2, 3, 4}, {3, 4}}, [](V x) { return linear(x[0], x[1]); }},
      {"linear", {{37, 2}, {3, 2}, {3}}, [](V x) { return linear(x[0], x[1], x[2]); }},
  };
  run_all_modes(cases);
}

// Big enough for the GEMM's split (kernels/gemm_impl.hpp: panels of at least ~2^18 fmas per
// chunk) and, in the backward, for the batch rule over more than one block of rows; the last two
// have outputs too narrow for the threads and a long k, so their forward splits k (split-K).
TEST(MatmulOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"matmul", {{128, 128}, {128, 160}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{2, 128, 128}, {2, 128, 160}}, [](V x) { return matmul(x[0], x[1]); }},
      {"matmul", {{2, 128, 128}, {128, 160}}, [](V x) { return matmul(x[0], x[1]); }},
      {"linear", {{130, 128}, {160, 128}, {160}}, [](V x) { return linear(x[0], x[1], x[2]); }},
      {"linear (split-K)", {{2, 65536}, {16, 65536}, {16}}, [](V x) { return linear(x[0], x[1], x[2]); }},
      {"matmul (split-K)", {{4, 65536}, {65536, 8}}, [](V x) { return matmul(x[0], x[1]); }},
  };
  check_split_determinism(cases);
}

TEST(MatmulOps, LinearEqualsMatmulPlusBias) {
  auto xv = random_vec<float>(40, 1), wv = random_vec<float>(24, 2), bv = random_vec<float>(3, 3);
  Tensor x = Tensor::from<float>(xv, Shape{5, 8}), w = Tensor::from<float>(wv, Shape{3, 8}), b = Tensor::from<float>(bv, Shape{3});
  Tensor a = linear(x, w, b);
  Tensor c = add(matmul(x, transpose(w, 0, 1)), b);
  EXPECT_TRUE(bitwise_equal(a.to_vector<float>(), c.to_vector<float>())) << "both are the dot order over k, then + bias";
}

// A weight shared by the samples of a 3-d input: matmul's gradient of b [K, N] is linear's of
// its weight [N, K] transposed, value for value (each sample's rows by the tree, then the batch
// rule), with rows per sample within and past the form that stores no sample's product; the
// input's gradient is linear's too (one chain over N per row, however the rows are batched).
TEST(MatmulOps, SharedWeightGradientIsLinears) {
  for (std::int64_t rows : {1, 9, 200}) {
    const std::int64_t S = 37, K = 13, N = 6;
    Tensor x = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(S * rows * K), 4), Shape{S, rows, K});
    Tensor x2 = x.contiguous_copy();
    x.set_requires_grad(true);
    x2.set_requires_grad(true);
    const Tensor seed = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(S * rows * N), 5), Shape{S, rows, N});
    Tensor w = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(N * K), 6), Shape{N, K});
    Tensor b = transpose(w, 0, 1).contiguous_copy();
    w.set_requires_grad(true);
    b.set_requires_grad(true);
    sum(mul(linear(x, w, Tensor()), seed)).backward();
    sum(mul(matmul(x2, b), seed)).backward();
    EXPECT_TRUE(bitwise_equal(transpose(w.grad(), 0, 1).contiguous_copy().to_vector<float>(), b.grad().to_vector<float>())) << rows;
    EXPECT_TRUE(bitwise_equal(x.grad().to_vector<float>(), x2.grad().to_vector<float>())) << rows;  // each row's chain over N
  }
}

TEST(MatmulOps, Errors) {
  try {
    matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul: inner dimensions differ: a is [2, 3], b is [4, 5]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})), Error);
  EXPECT_THROW(linear(Tensor::zeros({2, 5}), Tensor::zeros({4, 5}), Tensor::zeros({3})), Error);
  EXPECT_THROW(matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4})), Error);
}

}  // namespace
}  // namespace bitgrad::test
