// conv2d, pooling, layer_norm, dropout, embedding: gradients (f64), determinism (f32), errors.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(NnOps, Gradients) {
  Tensor idx = i64_tensor({4, 0, 4, 2, 1, 4}, Shape{2, 3});
  rng::Stream drop(5, "dropout");
  std::vector<OpCase> cases = {
      {"conv2d(x=[2,2,5,5],w=[3,2,3,3],b,pad=1)", {{2, 2, 5, 5}, {3, 2, 3, 3}, {3}}, [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d(x=[2,3,7,6],w=[2,3,3,2],stride=2)", {{2, 3, 7, 6}, {2, 3, 3, 2}}, [](V x) { return conv2d(x[0], x[1], Tensor(), 2, 0); }},
      {"conv2d(x=[35,1,4,4],w=[2,1,2,2],b) (batch crosses a block)", {{35, 1, 4, 4}, {2, 1, 2, 2}, {2}}, [](V x) { return conv2d(x[0], x[1], x[2]); }},
      {"max_pool2d(x=[2,2,4,4],k=2)", {{2, 2, 4, 4}}, [](V x) { return max_pool2d(x[0], 2); }},
      {"max_pool2d(x=[1,2,5,5],k=3,s=1)", {{1, 2, 5, 5}}, [](V x) { return max_pool2d(x[0], 3, 1); }},
      {"avg_pool2d(x=[2,2,4,6],k=2)", {{2, 2, 4, 6}}, [](V x) { return avg_pool2d(x[0], 2); }},
      {"avg_pool2d(x=[1,1,5,5],k=3,s=1)", {{1, 1, 5, 5}}, [](V x) { return avg_pool2d(x[0], 3, 1); }},
      {"layer_norm(x=[3,5],gamma,beta)", {{3, 5}, {5}, {5}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {"layer_norm(x=[2,2,4])", {{2, 2, 4}}, [](V x) { return layer_norm(x[0], Tensor(), Tensor()); }},
      {"layer_norm(x=[34,3],gamma) (rows cross a block)", {{34, 3}, {3}}, [](V x) { return layer_norm(x[0], x[1], Tensor()); }},
      {"embedding(w=[5,3],idx=[2,3])", {{5, 3}}, [](V x) { return embedding(x[0], x[1]); }, -1, 1, {idx}},
      {"dropout(x=[4,6],p=0.3)", {{4, 6}}, [drop](V x) { return dropout(x[0], 0.3, drop, 100); }},
  };
  run_all_modes(cases);
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
