// softmax, log_softmax and the losses: gradients (f64), determinism (f32), errors.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(SoftmaxLossOps, Gradients) {
  Tensor t5 = i64_tensor({0, 3, 1, 2, 3}, Shape{5});
  Tensor t40(i64_tensor(std::vector<std::int64_t>(40, 1), Shape{40}));
  std::vector<OpCase> cases = {
      {"softmax(x=[3,5])", {{3, 5}}, [](V x) { return softmax(x[0]); }, -3, 3},
      {"softmax(x=[4,3],axis=0)", {{4, 3}}, [](V x) { return softmax(x[0], 0); }, -3, 3},
      {"log_softmax(x=[3,5])", {{3, 5}}, [](V x) { return log_softmax(x[0]); }, -3, 3},
      {"log_softmax(x=[2,3,4],axis=1)", {{2, 3, 4}}, [](V x) { return log_softmax(x[0], 1); }, -3, 3},
      {"cross_entropy(x=[5,4],mean)", {{5, 4}}, [](V x) { return cross_entropy(x[0], x[1]); }, -3, 3, {t5}},
      {"cross_entropy(x=[5,4],sum)", {{5, 4}}, [](V x) { return cross_entropy(x[0], x[1], Reduction::sum); }, -3, 3, {t5}},
      {"cross_entropy(x=[5,4],none)", {{5, 4}}, [](V x) { return cross_entropy(x[0], x[1], Reduction::none); }, -3, 3, {t5}},
      {"cross_entropy(x=[40,3],mean) (two blocks)", {{40, 3}}, [](V x) { return cross_entropy(x[0], x[1]); }, -3, 3, {t40}},
      {"mse_loss(a=[4,3],b=[4,3],mean)", {{4, 3}, {4, 3}}, [](V x) { return mse_loss(x[0], x[1]); }},
      {"mse_loss(a=[6],b=[6],sum)", {{6}, {6}}, [](V x) { return mse_loss(x[0], x[1], Reduction::sum); }},
      {"mse_loss(a=[2,3],b=[2,3],none)", {{2, 3}, {2, 3}}, [](V x) { return mse_loss(x[0], x[1], Reduction::none); }},
  };
  run_all_modes(cases);
}

TEST(SoftmaxLossOps, CrossEntropyIsStable) {
  Tensor x = Tensor::from<float>(std::vector<float>{1000.0f, 0.0f, -1000.0f}, Shape{1, 3});
  Tensor l = cross_entropy(x, i64_tensor({0}, Shape{1}));
  EXPECT_EQ(l.item(), 0.0);
  Tensor l2 = cross_entropy(x, i64_tensor({2}, Shape{1}));
  EXPECT_EQ(l2.item(), 2000.0);
  Tensor s = softmax(x);
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1.0f, 0.0f, 0.0f}));
}

TEST(SoftmaxLossOps, Errors) {
  Tensor x = Tensor::zeros({3, 4});
  try {
    cross_entropy(x, i64_tensor({0, 4, 1}, Shape{3}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 4 of sample 1 is out of range [0, 4)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cross_entropy(x, i64_tensor({0, 1}, Shape{2})), Error);
  EXPECT_THROW(cross_entropy(x, Tensor::zeros({3})), Error);
  EXPECT_THROW(mse_loss(x, Tensor::zeros({4, 3})), Error);
}

}  // namespace
}  // namespace bitgrad::test
