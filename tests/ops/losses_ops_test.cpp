// The losses of src/ops/losses.cpp (numerics.md §30): gradients (f64 finite differences),
// contract T5 over micro-batches, semantics against the definitions, errors.
#include <cmath>

#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

Tensor targets_of(std::int64_t n, std::int64_t C, std::uint64_t seed, const Shape& s, std::int64_t ignore = -100, int every = 0) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  rng::Stream st(seed, "targets");
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = every && i % static_cast<std::size_t>(every) == 1 ? ignore : st.u32(i) % C;
  return i64_tensor(v, s);
}

TEST(LossOps, Gradients) {
  Tensor t5 = targets_of(5, 4, 1, Shape{5});
  Tensor t5i = targets_of(5, 4, 2, Shape{5}, 2, 3);  // every third target is ignore_index 2 (a valid class)
  Tensor t23 = targets_of(6, 3, 3, Shape{2, 3}, -1, 4);
  Tensor t40 = targets_of(40, 3, 4, Shape{40});
  auto w4 = [](const Tensor& r) { return tensor_like(r, {0.5, 2.0, 1.0, 0.25}, Shape{4}); };
  auto w3 = [](const Tensor& r) { return tensor_like(r, {1.5, 0.5, 2.0}, Shape{3}); };
  std::vector<OpCase> cases = {
      {"nll_loss(mean)", {{5, 4}}, [](V x) { return nll_loss(x[0], x[1]); }, -3, 0, {t5}},
      {"nll_loss(mean,weight,ignore=2)", {{5, 4}}, [&](V x) { return nll_loss(x[0], x[1], w4(x[0]), 2); }, -3, 0, {t5i}},
      {"nll_loss(sum,weight)", {{5, 4}}, [&](V x) { return nll_loss(x[0], x[1], w4(x[0]), -100, Reduction::sum); }, -3, 0, {t5}},
      {"nll_loss(none,Nd,ignore=-1)", {{2, 3, 3}}, [&](V x) { return nll_loss(x[0], x[1], Tensor(), -1, Reduction::none); }, -3, 0, {t23}},
      {"nll_loss(mean) (two blocks)", {{40, 3}}, [&](V x) { return nll_loss(x[0], x[1], w3(x[0])); }, -3, 0, {t40}},
      {"softmax_cross_entropy(mean)", {{5, 4}}, [](V x) { return softmax_cross_entropy(x[0], x[1]); }, -3, 3, {t5}},
      {"softmax_cross_entropy(mean,weight,ignore=2,smoothing=0.1)", {{5, 4}},
       [&](V x) { return softmax_cross_entropy(x[0], x[1], w4(x[0]), 2, 0.1); }, -3, 3, {t5i}},
      {"softmax_cross_entropy(sum,Nd,ignore=-1,smoothing=0.2)", {{2, 3, 3}},
       [&](V x) { return softmax_cross_entropy(x[0], x[1], w3(x[0]), -1, 0.2, Reduction::sum); }, -3, 3, {t23}},
      {"softmax_cross_entropy(none,Nd)", {{2, 3, 3}}, [&](V x) { return softmax_cross_entropy(x[0], x[1], Tensor(), -1, 0.0, Reduction::none); }, -3, 3, {t23}},
      {"binary_cross_entropy(mean)", {{4, 3}, {4, 3}}, [](V x) { return binary_cross_entropy(x[0], x[1]); }, 0.1, 0.9},
      {"binary_cross_entropy(sum,weight)", {{4, 3}, {4, 3}},
       [](V x) { return binary_cross_entropy(x[0], x[1], tensor_like(x[0], {0.5, 1.0, 2.0}, Shape{3}), Reduction::sum); }, 0.1, 0.9},
      {"binary_cross_entropy_with_logits(mean)", {{4, 3}, {4, 3}}, [](V x) { return binary_cross_entropy_with_logits(x[0], x[1]); }},
      {"binary_cross_entropy_with_logits(none,pos_weight,weight)", {{4, 3}, {4, 3}},
       [](V x) {
         return binary_cross_entropy_with_logits(x[0], x[1], tensor_like(x[0], {2.0, 1.0, 0.5, 1.5}, Shape{4, 1}),
                                                 tensor_like(x[0], {3.0, 0.5, 1.0}, Shape{3}), Reduction::none);
       }},
      {"l1_loss(mean)", {{4, 3}, {4, 3}}, [](V x) { return l1_loss(x[0], x[1]); }},
      {"l1_loss(none)", {{5}, {5}}, [](V x) { return l1_loss(x[0], x[1], Reduction::none); }},
      {"smooth_l1_loss(sum,beta=0.5)", {{4, 3}, {4, 3}}, [](V x) { return smooth_l1_loss(x[0], x[1], Reduction::sum, 0.5); }},
      {"huber_loss(mean,delta=0.7)", {{4, 3}, {4, 3}}, [](V x) { return huber_loss(x[0], x[1], Reduction::mean, 0.7); }},
      {"kl_div(batchmean)", {{4, 3}, {4, 3}}, [](V x) { return kl_div(x[0], x[1], Reduction::sum, false, true); }, 0.1, 1},
      {"kl_div(none,log_target)", {{4, 3}, {4, 3}}, [](V x) { return kl_div(x[0], x[1], Reduction::none, true); }, -2, 0},
  };
  run_all_modes(cases);
}

// Big enough that the losses' row and batch kernels split over all threads.
TEST(LossOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"l1_loss(mean)", {{256, 256}, {256, 256}}, [](V x) { return l1_loss(x[0], x[1]); }},
      {"binary_cross_entropy_with_logits(sum)", {{256, 256}, {256, 256}},
       [](V x) { return binary_cross_entropy_with_logits(x[0], x[1], Tensor(), Tensor(), Reduction::sum); }, 0, 1},
      {"softmax_cross_entropy(mean,weight,smoothing=0.1)", {{1024, 10}},
       [](V x) {
         return softmax_cross_entropy(x[0], x[1], tensor_like(x[0], {1, 2, 0.5, 1, 1, 3, 1, 0.25, 1, 1}, Shape{10}), 3, 0.1);
       },
       -3, 3, {targets_of(1024, 10, 8, Shape{1024})}},
  };
  check_split_determinism(cases);
}

// Contract T5 for the losses: the sum over 64 samples is the sum of its two 32-sample blocks.
TEST(LossOps, MicroBatchesCombineToTheWholeBatch) {
  const std::int64_t N = 64, C = 5;
  Tensor x = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(N * C * 3), 5, -3, 3), Shape{N, C, 3});
  Tensor y = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(N * C * 3), 6, -3, 3), Shape{N, C, 3});
  Tensor t = targets_of(N * 3, C, 7, Shape{N, 3}, -100, 5);
  Tensor w = Tensor::from<float>(std::vector<float>{0.5f, 1.0f, 2.0f, 0.75f, 1.25f}, Shape{C});
  auto halves = [&](auto f) {
    const float whole = static_cast<float>(f(x, y, t).item());
    const float a = static_cast<float>(f(slice(x, 0, 0, 32), slice(y, 0, 0, 32), slice(t, 0, 0, 32)).item());
    const float b = static_cast<float>(f(slice(x, 0, 32, 64), slice(y, 0, 32, 64), slice(t, 0, 32, 64)).item());
    EXPECT_EQ(bits(whole), bits(a + b));
  };
  halves([&](const Tensor& a, const Tensor&, const Tensor& tt) { return nll_loss(a, tt, w, -100, Reduction::sum); });
  halves([&](const Tensor& a, const Tensor&, const Tensor& tt) { return softmax_cross_entropy(a, tt, w, -100, 0.1, Reduction::sum); });
  halves([&](const Tensor& a, const Tensor&, const Tensor& tt) { return softmax_cross_entropy(a, tt, Tensor(), -100, 0.3, Reduction::sum); });
  halves([&](const Tensor& a, const Tensor& b, const Tensor&) { return l1_loss(a, b, Reduction::sum); });
  halves([&](const Tensor& a, const Tensor& b, const Tensor&) { return huber_loss(a, b, Reduction::sum, 0.5); });
  halves([&](const Tensor& a, const Tensor& b, const Tensor&) { return binary_cross_entropy_with_logits(a, sigmoid(b), Tensor(), Tensor(), Reduction::sum); });
}

TEST(LossOps, Semantics) {
  // nll mean: the weighted sum over non-ignored targets / the sum of their weights
  Tensor lp = Tensor::from<double>(std::vector<double>{-1, -2, -3, -4, -5, -6}, Shape{3, 2});
  Tensor t = i64_tensor({1, 7, 0}, Shape{3});
  Tensor w = Tensor::from<double>(std::vector<double>{2, 3}, Shape{2});
  EXPECT_EQ(nll_loss(lp, t, w, 7).item(), (3 * 2 + 2 * 5) / 5.0);
  EXPECT_EQ(nll_loss(lp, t, w, 7, Reduction::none).to_vector<double>(), (std::vector<double>{6, 0, 10}));
  // cross entropy with the class axis 1 equals log_softmax + nll; with smoothing as PyTorch
  Tensor x = Tensor::from<double>(std::vector<double>{0.5, -1, 2, 0.25, 0, 1}, Shape{2, 3});
  Tensor t2 = i64_tensor({2, 0}, Shape{2});
  EXPECT_EQ(softmax_cross_entropy(x, t2).item(), nll_loss(log_softmax(x, 1), t2).item());
  Tensor logp;
  softmax_cross_entropy(x, t2, Tensor(), -100, 0.0, Reduction::mean, &logp);
  EXPECT_EQ(logp.to_vector<double>(), log_softmax(x, 1).to_vector<double>());
  // huber and smooth L1 at the edges
  Tensor a = Tensor::from<double>(std::vector<double>{0, 0.5, 3}, Shape{3});
  Tensor z = Tensor::zeros({3}, DType::f64);
  EXPECT_EQ(huber_loss(a, z, Reduction::none, 1.0).to_vector<double>(), (std::vector<double>{0, 0.125, 2.5}));
  EXPECT_EQ(smooth_l1_loss(a, z, Reduction::none, 1.0).to_vector<double>(), (std::vector<double>{0, 0.125, 2.5}));
  EXPECT_EQ(smooth_l1_loss(a, z, Reduction::none, 0.0).to_vector<double>(), (std::vector<double>{0, 0.5, 3}));
  // BCE clamps its logs at -100
  EXPECT_EQ(binary_cross_entropy(Tensor::zeros({1}, DType::f64), Tensor::ones({1}, DType::f64)).item(), 100.0);
}

TEST(LossOps, Errors) {
  Tensor x = Tensor::zeros({3, 4});
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([&] { nll_loss(x, i64_tensor({0, 4, 1}, Shape{3})); }).find("target 4 at flat position 1 is out of range [0, 4)"), std::string::npos);
  EXPECT_NE(msg([&] { nll_loss(x, i64_tensor({0, 1}, Shape{2})); }).find("targets must be i64 [3]"), std::string::npos);
  EXPECT_NE(msg([&] { nll_loss(x, i64_tensor({0, 1, 2}, Shape{3}), Tensor::ones({3})); }).find("weight must be [4]"), std::string::npos);
  EXPECT_NE(msg([&] { l1_loss(x, Tensor::zeros({4, 3})); }).find("must have the same shape"), std::string::npos);
  EXPECT_NE(msg([&] { softmax_cross_entropy(x, i64_tensor({0, 1, 2}, Shape{3}), Tensor(), -100, 1.5); }).find("label_smoothing"), std::string::npos);
}

}  // namespace
}  // namespace bitgrad::test
