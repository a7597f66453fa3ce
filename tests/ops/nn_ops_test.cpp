// conv2d, pooling, layer_norm, dropout, embedding: gradients (f64), determinism (f32), errors.
#include <bit>
#include <cmath>
#include <limits>

#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(NnOps, Gradients) {
  Tensor idx = i64_tensor({4, 0, 4, 2, 1, 4}, Shape{2, 3});
  rng::Stream drop(5, "dropout");
  std::vector<OpCase> cases = {
      {"conv2d(pad=1)", {{2, 2, 5, 5}, {3, 2, 3, 3}, {3}}, [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d(stride=2)", {{2, 3, 7, 6}, {2, 3, 3, 2}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 2, 0); }},
      {"conv2d (batch crosses a block)", {{35, 1, 4, 4}, {2, 1, 2, 2}, {2}}, [](V x) { return conv2d(x[0], x[1], x[2]); }},
      // output rows shorter than the kernel's: lowered as rows (im2row), the GEMM reading them transposed
      {"conv2d(2x2 image, 3x3 kernel, pad=1)", {{3, 2, 2, 2}, {4, 2, 3, 3}, {4}}, [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d(stride=2, output 2 wide)", {{2, 3, 4, 5}, {2, 3, 3, 3}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 2, 1); }},
      // more than 128 positions a sample and 64+ taps: the weight gradient's input lowered as cols
      {"conv2d(12x12, 8 channels)", {{2, 8, 12, 12}, {2, 8, 3, 3}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 1, 1); }},
      {"max_pool2d(k=2)", {{2, 2, 4, 4}}, [](V x) { return max_pool2d(x[0], 2); }},
      {"max_pool2d(k=3,s=1)", {{1, 2, 5, 5}}, [](V x) { return max_pool2d(x[0], 3, 1); }},
      {"avg_pool2d(k=2)", {{2, 2, 4, 6}}, [](V x) { return avg_pool2d(x[0], 2); }},
      {"avg_pool2d(k=3,s=1)", {{1, 1, 5, 5}}, [](V x) { return avg_pool2d(x[0], 3, 1); }},
      {"layer_norm", {{3, 5}, {5}, {5}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {"layer_norm", {{2, 2, 4}}, [](V x) { return layer_norm(x[0], Tensor(), Tensor()); }},
      {"layer_norm (rows cross a block)", {{34, 3}, {3}}, [](V x) { return layer_norm(x[0], x[1], Tensor()); }},
      {"embedding", {{5, 3}}, [](V x) { return embedding(x[0], x[1]); }, -1, 1, {idx}},
      {"dropout(p=0.3)", {{4, 6}}, [drop](V x) { return dropout(x[0], 0.3, drop, 100); }},
  };
  run_all_modes(cases);
}

// Big enough for the grains: conv2d splits over samples (grain 1), pooling over planes (8),
// layer_norm over rows (16), embedding over rows of at least 4096 elements. Not dropout: its
// multiplications have operands of the same shape, which run on one thread today.
TEST(NnOps, DeterminismSplitOverThreads) {
  std::vector<std::int64_t> iv(1024);
  rng::Stream st(6, "indices");
  for (std::size_t i = 0; i < iv.size(); ++i) iv[i] = st.u32(i) % 1000;
  Tensor idx = i64_tensor(iv, Shape{64, 16});
  std::vector<OpCase> cases = {
      {"conv2d(pad=1)", {{8, 3, 12, 12}, {4, 3, 3, 3}, {4}}, [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d(stride=2)", {{16, 2, 11, 11}, {3, 2, 3, 3}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 2, 0); }},
      // sample blocks: 10 of 3 samples (to the threads), and a 1x1 convolution's one block (its GEMM to the threads)
      {"conv2d(many blocks)", {{30, 16, 16, 16}, {5, 16, 3, 3}, {5}}, [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d(1x1)", {{12, 24, 7, 7}, {40, 24, 1, 1}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 1, 0); }},
      {"conv2d(1x1 image, 3x3 kernel)", {{33, 40, 1, 1}, {36, 40, 3, 3}, {36}}, [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d(2x2 image, stride 2)", {{19, 12, 4, 4}, {20, 12, 3, 3}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 2, 1); }},
      // masks over the threads, starting mid-block
      {"dropout", {{64, 1500}}, [](V x) { return dropout(x[0], 0.3, rng::Stream(3, "dropout"), 5); }},
      {"max_pool2d(k=2)", {{8, 8, 8, 8}}, [](V x) { return max_pool2d(x[0], 2); }},
      {"max_pool2d(k=3,s=1)", {{4, 16, 9, 9}}, [](V x) { return max_pool2d(x[0], 3, 1); }},
      {"avg_pool2d(k=2)", {{8, 8, 8, 8}}, [](V x) { return avg_pool2d(x[0], 2); }},
      {"layer_norm", {{1024, 32}, {32}, {32}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {"layer_norm", {{16, 128, 24}}, [](V x) { return layer_norm(x[0], Tensor(), Tensor()); }},
      {"embedding", {{1000, 64}}, [](V x) { return embedding(x[0], x[1]); }, -1, 1, {idx}},
  };
  check_split_determinism(cases);
}

TEST(NnOps, ConvolutionOfAKnownImage) {
  // 3x3 image, 2x2 all-ones kernel, bias 1: each output is its window's sum + 1
  Tensor x = Tensor::from<float>(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9}, Shape{1, 1, 3, 3});
  Tensor w = Tensor::ones(Shape{1, 1, 2, 2});
  Tensor b = Tensor::ones(Shape{1});
  EXPECT_EQ(conv2d(x, w, b).to_vector<float>(), (std::vector<float>{13, 17, 25, 29}));
  EXPECT_EQ(max_pool2d(x, 2, 1).to_vector<float>(), (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(avg_pool2d(x, 2, 1).to_vector<float>(), (std::vector<float>{3, 4, 6, 7}));
}

TEST(NnOps, MaxPoolTakesTheFirstMaximumAndTheFirstNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // one 2x2 window per row pair: [3 5; 5 1] (tie: the first 5), [2 nan; 9 nan] (the first NaN)
  Tensor x = Tensor::from<float>(std::vector<float>{3, 5, 2, nan, 5, 1, 9, nan}, Shape{1, 1, 2, 4});
  x.set_requires_grad(true);
  Tensor y = max_pool2d(x, 2);
  const std::vector<float> v = y.to_vector<float>();
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  y.backward(Tensor::from<float>(std::vector<float>{10, 20}, y.shape()));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 10, 0, 20, 0, 0, 0, 0})) << "the gradient goes to the chosen pixels";
}

TEST(NnOps, MaxPoolMatchesTheRowMajorScanOnTiesZerosAndNaNs) {
  // values from {-0, +0, 1, 2, NaN}: most windows hold ties, signed zeros or NaNs; the 2x2
  // stride-2 path and the general scan must both pick the scan's element, bit for bit
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[5] = {-0.0f, 0.0f, 1.0f, 2.0f, nan};
  struct Case {
    std::int64_t h, w;
    int k, s;
  };
  for (const Case& c : {Case{8, 10, 2, 2}, Case{9, 11, 2, 2}, Case{7, 9, 3, 2}, Case{6, 6, 2, 1}}) {
    const std::int64_t P = 3, OH = (c.h - c.k) / c.s + 1, OW = (c.w - c.k) / c.s + 1;
    std::vector<float> xv(static_cast<std::size_t>(P * c.h * c.w));
    rng::Stream st(12, "pool");
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = pool[st.u32(i) % 5];
    Tensor x = Tensor::from<float>(xv, Shape{1, P, c.h, c.w});
    x.set_requires_grad(true);
    Tensor y = max_pool2d(x, c.k, c.s);
    const std::vector<float> yv = y.to_vector<float>();
    std::vector<float> gx(xv.size(), 0.0f);
    for (std::int64_t q = 0; q < P; ++q)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          std::int64_t best = -1;
          for (std::int64_t kh = 0; kh < c.k; ++kh)
            for (std::int64_t kw = 0; kw < c.k; ++kw) {
              const std::int64_t at = (q * c.h + oh * c.s + kh) * c.w + ow * c.s + kw;
              const float v = xv[static_cast<std::size_t>(at)], b = best < 0 ? 0.0f : xv[static_cast<std::size_t>(best)];
              if (best < 0 || (b == b && (v != v || v > b))) best = at;
            }
          const std::size_t o = static_cast<std::size_t>((q * OH + oh) * OW + ow);
          ASSERT_EQ(std::bit_cast<std::uint32_t>(yv[o]), std::bit_cast<std::uint32_t>(xv[static_cast<std::size_t>(best)]))
              << "k=" << c.k << " s=" << c.s << " output " << o;
          gx[static_cast<std::size_t>(best)] += static_cast<float>(o + 1);
        }
    std::vector<float> g(yv.size());
    for (std::size_t o = 0; o < g.size(); ++o) g[o] = static_cast<float>(o + 1);
    y.backward(Tensor::from<float>(g, y.shape()));
    EXPECT_EQ(x.grad().to_vector<float>(), gx) << "k=" << c.k << " s=" << c.s << ": the gradient goes to the chosen pixels";
  }
}

TEST(NnOps, DropoutMaskIsAFunctionOfTheStreamAndIndex) {
  rng::Stream s(1, "dropout");
  Tensor x = Tensor::ones(Shape{2, 50});
  Tensor a = dropout(x, 0.5, s, 0);
  Tensor b = dropout(x, 0.5, s, 0);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  // the second row of a batch is the first row of a batch that starts 50 elements later
  Tensor c = dropout(Tensor::ones(Shape{1, 50}), 0.5, s, 50);
  EXPECT_EQ(slice(a, 0, 1, 2).to_vector<float>(), c.to_vector<float>());
  int kept = 0;
  for (float v : a.to_vector<float>()) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f);
    kept += v != 0.0f;
  }
  EXPECT_GT(kept, 30);
  EXPECT_LT(kept, 70);
  EXPECT_EQ(dropout(x, 0.0, s, 0).storage().get(), x.storage().get()) << "p = 0 is the identity";
  EXPECT_THROW(dropout(x, 1.0, s, 0), Error);
}

TEST(NnOps, Errors) {
  EXPECT_THROW(conv2d(Tensor::zeros({1, 2, 5, 5}), Tensor::zeros({3, 1, 3, 3})), Error);
  EXPECT_THROW(conv2d(Tensor::zeros({1, 1, 2, 2}), Tensor::zeros({1, 1, 3, 3})), Error);
  EXPECT_THROW(conv2d(Tensor::zeros({2, 5, 5}), Tensor::zeros({3, 2, 3, 3})), Error);
  EXPECT_THROW(max_pool2d(Tensor::zeros({1, 1, 2, 2}), 3), Error);
  EXPECT_THROW(layer_norm(Tensor::zeros({2, 3}), Tensor::zeros({4}), Tensor()), Error);
  EXPECT_THROW(embedding(Tensor::zeros({3, 2}), i64_tensor({3}, Shape{1})), Error);
}

}  // namespace
}  // namespace bitgrad::test
