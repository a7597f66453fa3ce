// softmax, log_softmax and the losses: gradients (f64), determinism (f32), errors.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(SoftmaxLossOps, Gradients) {
  Tensor t5 = i64_tensor({0, 3, 1, 2, 3}, Shape{5});
  Tensor t40(i64_tensor(std::vector<std::int64_t>(40, 1), Shape{40}));
  std::vector<OpCase> cases = {
      {"softmax", {{3, 5}}, [](V x) { return softmax(x[0]); }, -3, 3},
      {"softmax(axis=0)", {{4, 3}}, [](V x) { return softmax(x[0], 0); }, -3, 3},
      {"log_softmax", {{3, 5}}, [](V x) { return log_softmax(x[0]); }, -3, 3},
      {"log_softmax(axis=1)", {{2, 3, 4}}, [](V x) { return log_softmax(x[0], 1); }, -3, 3},
      {"cross_entropy(mean)", {{5, 4}}, [](V x) { return cross_entropy(x[0], x[1]); }, -3, 3, {t5}},
      {"cross_entropy(sum)", {{5, 4}}, [](V x) { return cross_entropy(x[0], x[1], Reduction::sum); }, -3, 3, {t5}},
      {"cross_entropy(none)", {{5, 4}}, [](V x) { return cross_entropy(x[0], x[1], Reduction::none); }, -3, 3, {t5}},
      {"cross_entropy(mean) (two blocks)", {{40, 3}}, [](V x) { return cross_entropy(x[0], x[1]); }, -3, 3, {t40}},
      {"mse_loss(mean)", {{4, 3}, {4, 3}}, [](V x) { return mse_loss(x[0], x[1]); }},
      {"mse_loss(sum)", {{6}, {6}}, [](V x) { return mse_loss(x[0], x[1], Reduction::sum); }},
      {"mse_loss(none)", {{2, 3}, {2, 3}}, [](V x) { return mse_loss(x[0], x[1], Reduction::none); }},
  };
  run_all_modes(cases);
}

// Big enough for the row kernels' grains (about 1024 elements of rows per chunk).
TEST(SoftmaxLossOps, DeterminismSplitOverThreads) {
  std::vector<std::int64_t> tv(1024);
  rng::Stream st(4, "targets");
  for (std::size_t i = 0; i < tv.size(); ++i) tv[i] = st.u32(i) % 10;
  Tensor t = i64_tensor(tv, Shape{1024});
  std::vector<OpCase> cases = {
      {"softmax", {{256, 64}}, [](V x) { return softmax(x[0]); }, -3, 3},
      {"log_softmax(axis=1)", {{8, 64, 32}}, [](V x) { return log_softmax(x[0], 1); }, -3, 3},
      {"cross_entropy(mean)", {{1024, 10}}, [](V x) { return cross_entropy(x[0], x[1]); }, -3, 3, {t}},
      {"cross_entropy(none)", {{1024, 10}}, [](V x) { return cross_entropy(x[0], x[1], Reduction::none); }, -3, 3, {t}},
      {"mse_loss(mean)", {{256, 256}, {256, 256}}, [](V x) { return mse_loss(x[0], x[1]); }},
  };
  check_split_determinism(cases);
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
