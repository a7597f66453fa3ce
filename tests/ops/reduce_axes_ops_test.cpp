// Reductions over axes (ONNX Reduce*), cumsum and the new losses: gradients (f64 finite
// differences), determinism (f32: the scalar reference at 1 thread == every code path at threads
// 1, 2, 3, 4, 7, 8), the documented orders (numerics.md §28-§30), semantics and errors.
#include <cmath>

#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

Tensor like(const Tensor& ref, const std::vector<double>& v, const Shape& s) { return Tensor::from<double>(v, s).cast(ref.dtype()); }

TEST(ReduceAxesOps, Gradients) {
  std::vector<OpCase> cases = {
      {"prod", {{3, 4}}, [](V x) { return prod(x[0]); }, 0.5, 1.5},
      {"prod(axes={1},keepdim)", {{3, 4, 2}}, [](V x) { return prod(x[0], {1}, true); }, -1.5, 1.5},
      {"prod(axes={0,2})", {{3, 4, 2}}, [](V x) { return prod(x[0], {0, 2}); }, -1.5, 1.5},
      {"logsumexp", {{4, 5}}, [](V x) { return logsumexp(x[0]); }, -3, 3},
      {"logsumexp(axes={1})", {{4, 5}}, [](V x) { return logsumexp(x[0], {1}); }, -3, 3},
      {"logsumexp(axes={0,2},keepdim)", {{3, 2, 4}}, [](V x) { return logsumexp(x[0], {0, 2}, true); }, -3, 3},
      {"sum_square", {{35, 3}}, [](V x) { return sum_square(x[0]); }},
      {"sum_square(axes={0})", {{5, 3}}, [](V x) { return sum_square(x[0], {0}); }},
      {"sum_square(axes={0,2},keepdim)", {{3, 2, 4}}, [](V x) { return sum_square(x[0], {0, 2}, true); }},
      {"sum_square(axes={-1})", {{3, 2, 4}}, [](V x) { return sum_square(x[0], {-1}); }},
      {"norm_l1(axes={1})", {{3, 6}}, [](V x) { return norm_l1(x[0], {1}); }},
      {"norm_l1", {{2, 3, 4}}, [](V x) { return norm_l1(x[0]); }},
      {"norm_l2(axes={2},keepdim)", {{2, 3, 4}}, [](V x) { return norm_l2(x[0], {2}, true); }},
      {"norm_l2(axes={0,1})", {{2, 3, 4}}, [](V x) { return norm_l2(x[0], {0, 1}); }},
      {"log_sum(axes={1})", {{3, 4}}, [](V x) { return log_sum(x[0], {1}); }, 0.2, 2},
      {"var", {{4, 5}}, [](V x) { return var(x[0]); }},
      {"var(axes={1},correction=0,keepdim)", {{4, 5}}, [](V x) { return var(x[0], {1}, 0.0, true); }},
      {"var(axes={0,2})", {{3, 2, 4}}, [](V x) { return var(x[0], {0, 2}); }},
      {"stddev(axes={0})", {{6, 3}}, [](V x) { return stddev(x[0], {0}); }},
      {"stddev(axes={1,2},correction=0)", {{2, 3, 4}}, [](V x) { return stddev(x[0], {1, 2}, 0.0); }},
      {"amax(axes={0,2})", {{3, 2, 4}}, [](V x) { return amax(x[0], {0, 2}); }},
      {"amin(axes={1},keepdim)", {{3, 5}}, [](V x) { return amin(x[0], {1}, true); }},
      {"amax", {{3, 5}}, [](V x) { return amax(x[0]); }},
      {"sum_of", {{3, 1, 4}, {2, 1}, {4}}, [](V x) { return sum_of({x[0], x[1], x[2]}); }},
      {"mean_of", {{3, 4}, {4}}, [](V x) { return mean_of({x[0], x[1]}); }},
      {"max_of", {{3, 4}, {3, 1}, {4}}, [](V x) { return max_of({x[0], x[1], x[2]}); }},
      {"min_of", {{3, 4}, {3, 4}}, [](V x) { return min_of({x[0], x[1]}); }},
  };
  run_all_modes(cases);
}

TEST(ScanOps, Gradients) {
  std::vector<OpCase> cases = {
      {"cumsum(axis=0)", {{7}}, [](V x) { return cumsum(x[0], 0); }},
      {"cumsum(axis=1)", {{3, 5, 2}}, [](V x) { return cumsum(x[0], 1); }},
      {"cumsum(axis=-1,exclusive)", {{3, 5}}, [](V x) { return cumsum(x[0], -1, true); }},
      {"cumsum(axis=0,reverse)", {{4, 3}}, [](V x) { return cumsum(x[0], 0, false, true); }},
      {"cumsum(axis=2,exclusive,reverse)", {{2, 3, 4}}, [](V x) { return cumsum(x[0], 2, true, true); }},
  };
  run_all_modes(cases);
}

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
  auto w4 = [](const Tensor& r) { return like(r, {0.5, 2.0, 1.0, 0.25}, Shape{4}); };
  auto w3 = [](const Tensor& r) { return like(r, {1.5, 0.5, 2.0}, Shape{3}); };
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
       [](V x) { return binary_cross_entropy(x[0], x[1], like(x[0], {0.5, 1.0, 2.0}, Shape{3}), Reduction::sum); }, 0.1, 0.9},
      {"binary_cross_entropy_with_logits(mean)", {{4, 3}, {4, 3}}, [](V x) { return binary_cross_entropy_with_logits(x[0], x[1]); }},
      {"binary_cross_entropy_with_logits(none,pos_weight,weight)", {{4, 3}, {4, 3}},
       [](V x) {
         return binary_cross_entropy_with_logits(x[0], x[1], like(x[0], {2.0, 1.0, 0.5, 1.5}, Shape{4, 1}),
                                                 like(x[0], {3.0, 0.5, 1.0}, Shape{3}), Reduction::none);
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

// Big enough that the row and batch kernels, prod's and cumsum's loops split over all threads.
TEST(ReduceAxesOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"sum_square", {{64, 4096}}, [](V x) { return sum_square(x[0]); }},
      {"sum_square(axes={0})", {{512, 1024}}, [](V x) { return sum_square(x[0], {0}); }},
      {"logsumexp(axes={1})", {{256, 4096}}, [](V x) { return logsumexp(x[0], {1}); }},
      {"var(axes={0,2})", {{64, 512, 16}}, [](V x) { return var(x[0], {0, 2}); }},
      {"prod(axes={1})", {{16384, 8}}, [](V x) { return prod(x[0], {1}); }, 0.5, 1.5},
      {"cumsum(axis=1)", {{4096, 64}}, [](V x) { return cumsum(x[0], 1); }},
      {"l1_loss(mean)", {{256, 256}, {256, 256}}, [](V x) { return l1_loss(x[0], x[1]); }},
      {"binary_cross_entropy_with_logits(sum)", {{256, 256}, {256, 256}},
       [](V x) { return binary_cross_entropy_with_logits(x[0], x[1], Tensor(), Tensor(), Reduction::sum); }, 0, 1},
      {"softmax_cross_entropy(mean,weight,smoothing=0.1)", {{1024, 10}},
       [](V x) {
         return softmax_cross_entropy(x[0], x[1], like(x[0], {1, 2, 0.5, 1, 1, 3, 1, 0.25, 1, 1}, Shape{10}), 3, 0.1);
       },
       -3, 3, {targets_of(1024, 10, 8, Shape{1024})}},
  };
  check_split_determinism(cases);
}

template <class T>
std::uint64_t bits(T v) {
  if constexpr (sizeof(T) == 4) return std::bit_cast<std::uint32_t>(v);
  else return std::bit_cast<std::uint64_t>(v);
}

TEST(ReduceAxesOps, DocumentedOrders) {
  const std::int64_t N = 70, D = 20;
  auto v = random_vec<float>(static_cast<std::size_t>(N * D), 31);
  Tensor x = Tensor::from<float>(v, Shape{N, D});
  // sum_square of [N, D]: the row rule with fma lanes per sample, then the batch rule
  float rows[N];
  kern::table<float>(Isa::scalar).sumsq_rows(v.data(), nullptr, N, D, rows);
  float blk[3] = {0, 0, 0};
  for (std::int64_t n = 0; n < N; ++n) blk[n / 32] = blk[n / 32] + rows[n];
  EXPECT_EQ(bits((blk[0] + blk[1]) + blk[2]), bits(static_cast<float>(sum_square(x).item())));
  // axis 0 alone: each square rounded, then the batch rule per column
  Tensor s0 = sum_square(x, {0});
  for (std::int64_t d = 0; d < D; ++d) {
    float b[3] = {0, 0, 0};
    for (std::int64_t n = 0; n < N; ++n) {
      const float e = v[static_cast<std::size_t>(n * D + d)];
      b[n / 32] = b[n / 32] + e * e;
    }
    EXPECT_EQ(bits((b[0] + b[1]) + b[2]), bits(s0.to_vector<float>()[static_cast<std::size_t>(d)]));
  }
  // norm_l2 over all = norm (the same sum of squares)
  EXPECT_EQ(bits(static_cast<float>(norm(x).item())), bits(static_cast<float>(norm_l2(x).item())));
  // prod: a chain from +1 over the reduced elements in row-major order
  Tensor p = prod(x, {1});
  for (std::int64_t n = 0; n < N; ++n) {
    float acc = 1.0f;
    for (std::int64_t d = 0; d < D; ++d) acc = acc * v[static_cast<std::size_t>(n * D + d)];
    EXPECT_EQ(bits(acc), bits(p.to_vector<float>()[static_cast<std::size_t>(n)]));
  }
  // cumsum: a chain from +0 along the axis; exclusive: the value before adding; reverse: from the end
  Tensor c = cumsum(x, 0), ce = cumsum(x, 0, true), cr = cumsum(x, 0, false, true);
  for (std::int64_t d = 0; d < D; ++d) {
    float acc = 0.0f, racc = 0.0f;
    for (std::int64_t n = 0; n < N; ++n) {
      const std::size_t i = static_cast<std::size_t>(n * D + d);
      EXPECT_EQ(bits(acc), bits(ce.to_vector<float>()[i]));
      acc = acc + v[i];
      EXPECT_EQ(bits(acc), bits(c.to_vector<float>()[i]));
      const std::size_t j = static_cast<std::size_t>((N - 1 - n) * D + d);
      racc = racc + v[j];
      EXPECT_EQ(bits(racc), bits(cr.to_vector<float>()[j]));
    }
  }
  // logsumexp: m + log(s) in f64, s = sum's order over exp(x - m)
  Tensor l = logsumexp(x, {1});
  Tensor m = amax(x, {1}, true);
  Tensor e = Tensor::empty(x.shape(), DType::f32);
  for (std::size_t i = 0; i < v.size(); ++i)
    e.mutable_data<float>()[i] =
        static_cast<float>(math::exp(static_cast<double>(v[i]) - static_cast<double>(m.to_vector<float>()[i / D])));
  Tensor s = sum(e, {1});
  for (std::int64_t n = 0; n < N; ++n) {
    const double mv = m.to_vector<float>()[static_cast<std::size_t>(n)];
    EXPECT_EQ(bits(static_cast<float>(mv + math::log(static_cast<double>(s.to_vector<float>()[static_cast<std::size_t>(n)])))),
              bits(l.to_vector<float>()[static_cast<std::size_t>(n)]));
  }
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

TEST(ReduceAxesOps, Semantics) {
  Tensor x = Tensor::from<float>(std::vector<float>{1, 3, 3, -2, 0, 5}, Shape{2, 3});
  // empty axes: all axes (ONNX); keepdim keeps ones
  EXPECT_EQ(prod(x).shape(), Shape{});
  EXPECT_EQ(prod(x, {}, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(amax(x).item(), 5.0);
  EXPECT_EQ(amin(x, {1}).to_vector<float>(), (std::vector<float>{1, -2}));
  // any / all: u8; NaN counts as true
  Tensor b = Tensor::from<float>(std::vector<float>{0, NAN, 0, 0}, Shape{2, 2});
  EXPECT_EQ(any(b, {1}).dtype(), DType::u8);
  EXPECT_EQ(any(b, {1}).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{1, 0}));
  EXPECT_EQ(all(b, {0}).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{0, 0}));
  EXPECT_EQ(all(Tensor::ones({2, 2}, DType::i64)).item(), 1.0);
  // argmax with select_last_index: the last maximum (the last NaN)
  EXPECT_EQ(argmax(x, 1, false, true).to_vector<std::int64_t>(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(argmax(x, 1, false, false).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, 2}));
  Tensor y = Tensor::from<float>(std::vector<float>{NAN, 1, NAN, -1, -1}, Shape{5});
  EXPECT_EQ(argmax(y, 0, false, true).item(), 2.0);
  EXPECT_EQ(argmin(y, 0, true, true).shape(), Shape{1});
  EXPECT_EQ(argmin(Tensor::from<float>(std::vector<float>{2, -1, -1}, Shape{3}), 0, false, true).item(), 2.0);
  // var / std: unbiased by default, biased with correction 0
  Tensor v = Tensor::from<double>(std::vector<double>{1, 2, 3, 4}, Shape{4});
  EXPECT_EQ(var(v).item(), 5.0 / 3.0);
  EXPECT_EQ(var(v, {}, 0.0).item(), 1.25);
  EXPECT_EQ(stddev(v, {0}, 0.0).item(), std::sqrt(1.25));
  // prod's gradient with a zero: exact, no division
  Tensor pz = Tensor::from<double>(std::vector<double>{2, 0, 3}, Shape{3});
  pz.set_requires_grad(true);
  prod(pz).backward();
  EXPECT_EQ(pz.grad().to_vector<double>(), (std::vector<double>{0, 6, 0}));
  // sum_of / mean_of / max_of broadcast and fold left to right
  Tensor a = Tensor::from<float>(std::vector<float>{1, 2}, Shape{2});
  Tensor c = Tensor::from<float>(std::vector<float>{10}, Shape{1, 1});
  EXPECT_EQ(sum_of({a, c, a}).to_vector<float>(), (std::vector<float>{12, 14}));
  EXPECT_EQ(mean_of({a, c, a}).shape(), (Shape{1, 2}));
  EXPECT_EQ(max_of({a, c}).to_vector<float>(), (std::vector<float>{10, 10}));
  // logsumexp of -inf rows is -inf; stable for large values
  Tensor li = Tensor::from<float>(std::vector<float>{-INFINITY, -INFINITY, 1000, 1000}, Shape{2, 2});
  EXPECT_EQ(logsumexp(li, {1}).to_vector<float>()[0], -INFINITY);
  EXPECT_EQ(logsumexp(li, {1}).to_vector<float>()[1], static_cast<float>(1000.0 + std::log(2.0)));
  // errors name the op and the axes
  EXPECT_THROW(prod(x, {2}), Error);
  EXPECT_THROW(var(x, {1, -1}), Error);
  EXPECT_THROW(amax(Tensor::zeros({0, 2})), Error);
  EXPECT_THROW(cumsum(x, 3), Error);
}

}  // namespace
}  // namespace bitgrad::test
