// matmul and linear: gradients (f64), determinism (f32), shapes and errors.
#include "ops/fused.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

// an f32 leaf of `s` that requires its gradient, values from `seed`
Tensor leaf(const Shape& s, std::uint64_t seed) {
  Tensor t = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(s.numel()), seed), s);
  t.set_requires_grad(true);
  return t;
}

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
      // operands read through their strides, no copy (a's rows 3 apart; b^T; k^T per batch)
      {"matmul of views", {{4, 3}, {5, 4}}, [](V x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); }},
      {"matmul of views", {{2, 3, 4}, {2, 5, 4}}, [](V x) { return matmul(x[0], permute(x[1], {0, 2, 1})); }},
      {"matmul of views", {{3, 2, 4}, {4, 5}}, [](V x) { return matmul(permute(x[0], {1, 0, 2}), x[1]); }},
      {"matmul_add", {{3, 4}, {4, 5}, {5}}, [](V x) { return matmul_add(x[0], x[1], x[2]); }},
      {"matmul_add", {{2, 3, 4}, {5, 4}, {5}}, [](V x) { return matmul_add(x[0], transpose(x[1], 0, 1), x[2]); }},
      {"matmul_add", {{2, 3, 4}, {2, 4, 5}, {5}}, [](V x) { return matmul_add(x[0], x[1], x[2]); }},
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

// A view is read where it lies (a transposed weight, an attention's k^T, a permuted batch, a
// batch broadcast with stride 0, one row per batch) or copied where its rows do not lie one
// stride apart: either way the output and both gradients have the bits of the same product of
// contiguous copies, on every ISA and thread count.
TEST(MatmulOps, ViewsGiveTheBitsOfTheirContiguousCopies) {
  RuntimeGuard guard;
  using Make = std::function<Tensor(const Tensor&)>;
  const Make id = [](const Tensor& t) { return t; };
  struct Case {
    const char* name;
    Shape a, b;
    Make va, vb;
  };
  const std::vector<Case> cases = {
      {"b = W^T", {2, 37, 19}, {23, 19}, id, [](const Tensor& t) { return transpose(t, 0, 1); }},
      {"a = x^T", {19, 37}, {19, 23}, [](const Tensor& t) { return transpose(t, 0, 1); }, id},
      {"a time-major (rows not one stride apart: copied)", {5, 7, 19}, {19, 23}, [](const Tensor& t) { return permute(t, {1, 0, 2}); }, id},
      {"attention's k^T", {6, 17, 9}, {6, 17, 9}, id, [](const Tensor& t) { return permute(t, {0, 2, 1}); }},
      {"a permuted over its batch, b batched", {17, 6, 9}, {6, 9, 11}, [](const Tensor& t) { return permute(t, {1, 0, 2}); }, id},
      {"a broadcast over the batch (stride 0)", {1, 17, 9}, {6, 9, 11}, [](const Tensor& t) { return expand(t, Shape{6, 17, 9}); }, id},
      {"one row a batch, b shared", {6, 3, 9}, {9, 11}, [](const Tensor& t) { return slice(t, 1, 1, 2); }, id},
      {"one transposed row a batch, b shared", {9, 1, 6}, {9, 11}, [](const Tensor& t) { return permute(t, {2, 1, 0}); }, id},
      {"a vector sliced from a matrix", {9, 2}, {9, 11}, [](const Tensor& t) { return reshape(slice(t, 1, 1, 2), Shape{9}); }, id},
      {"two batch dimensions, b^T", {2, 3, 5, 9}, {2, 3, 11, 9}, id, [](const Tensor& t) { return transpose(t, 2, 3); }},
  };
  for (const Case& c : cases) {
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int threads : thread_counts()) {
        set_num_threads(threads);
        Tensor a1 = leaf(c.a, 1), b1 = leaf(c.b, 2), a2 = leaf(c.a, 1), b2 = leaf(c.b, 2);
        const Tensor y1 = matmul(c.va(a1), c.vb(b1));
        const Tensor y2 = matmul(contiguous(c.va(a2)), contiguous(c.vb(b2)));
        const std::string where = std::string(c.name) + " isa=" + isa_name(isa) + " threads=" + std::to_string(threads);
        ASSERT_EQ(y1.shape(), y2.shape()) << where;
        EXPECT_TRUE(bitwise_equal(y1.contiguous_copy().to_vector<float>(), y2.contiguous_copy().to_vector<float>())) << where;
        const Tensor w = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(y1.numel()), 3), y1.shape());
        sum(mul(y1, w)).backward();
        sum(mul(y2, w)).backward();
        EXPECT_TRUE(bitwise_equal(a1.grad().to_vector<float>(), a2.grad().to_vector<float>())) << where << " (a's gradient)";
        EXPECT_TRUE(bitwise_equal(b1.grad().to_vector<float>(), b2.grad().to_vector<float>())) << where << " (b's gradient)";
      }
    }
  }
}

// matmul_add is add(matmul(a, b), bias) in one GEMM: the output and the three gradients have
// that composition's bits (bias first or second makes no difference to an IEEE sum), with b
// shared (one GEMM over the batch's rows) or batched, on every ISA and thread count.
TEST(MatmulOps, MatmulAddHasTheBitsOfMatmulThenAdd) {
  RuntimeGuard guard;
  const std::vector<std::pair<Shape, Shape>> shapes = {{{37, 19}, {19, 23}}, {{5, 33, 19}, {19, 70}}, {{4, 9, 19}, {4, 19, 23}}};
  for (const auto& [sa, sb] : shapes) {
    const Shape sbias{sb[sb.ndim() - 1]};
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int threads : thread_counts()) {
        set_num_threads(threads);
        Tensor a1 = leaf(sa, 1), b1 = leaf(sb, 2), c1 = leaf(sbias, 3), a2 = leaf(sa, 1), b2 = leaf(sb, 2), c2 = leaf(sbias, 3);
        const Tensor y1 = matmul_add(a1, b1, c1), y2 = add(c2, matmul(a2, b2));
        const std::string where = sa.str() + " x " + sb.str() + " isa=" + isa_name(isa) + " threads=" + std::to_string(threads);
        ASSERT_EQ(y1.shape(), y2.shape()) << where;
        EXPECT_TRUE(bitwise_equal(y1.to_vector<float>(), y2.to_vector<float>())) << where;
        const Tensor w = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(y1.numel()), 4), y1.shape());
        sum(mul(y1, w)).backward();
        sum(mul(y2, w)).backward();
        EXPECT_TRUE(bitwise_equal(a1.grad().to_vector<float>(), a2.grad().to_vector<float>())) << where << " (a)";
        EXPECT_TRUE(bitwise_equal(b1.grad().to_vector<float>(), b2.grad().to_vector<float>())) << where << " (b)";
        EXPECT_TRUE(bitwise_equal(c1.grad().to_vector<float>(), c2.grad().to_vector<float>())) << where << " (bias)";
      }
    }
  }
  EXPECT_THROW(matmul_add(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}), Tensor::zeros({3})), Error);
  EXPECT_THROW(matmul_add(Tensor::zeros({2, 3}), Tensor::zeros({3}), Tensor::zeros({1})), Error);
  EXPECT_THROW(matmul_add(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}), Tensor()), Error);
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
