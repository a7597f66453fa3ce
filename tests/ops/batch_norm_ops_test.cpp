// batch_norm: gradients (f64 finite differences), determinism (every code path at threads
// 1, 2, 3, 4, 7, 8, ==), the documented order (numerics.md §31) spelled out with other ops,
// running statistics, errors.
#include <cmath>

#include "kernels/row_rule.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

Tensor ramp(std::int64_t c, double a, double b) {
  std::vector<double> v(static_cast<std::size_t>(c));
  for (std::int64_t i = 0; i < c; ++i) v[static_cast<std::size_t>(i)] = a + b * static_cast<double>(i);
  return Tensor::from<double>(v, Shape{c});
}

TEST(BatchNormOps, Gradients) {
  const Tensor rm = ramp(3, -0.2, 0.1), rv = ramp(3, 0.5, 0.25);
  std::vector<OpCase> cases = {
      {"batch_norm(train)", {{5, 3}, {3}, {3}}, [](V x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }},
      {"batch_norm(train)", {{3, 2, 4}}, [](V x) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true); }},
      {"batch_norm(train)", {{2, 3, 3, 2}, {3}}, [](V x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], Tensor(), true); }},
      {"batch_norm(train,beta only)", {{4, 2, 3}, {2}}, [](V x) { return batch_norm(x[0], Tensor(), Tensor(), Tensor(), x[1], true); }},
      {"batch_norm(train) (batch crosses a block)", {{35, 2, 2}, {2}, {2}},
       [](V x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }},
      {"batch_norm(eval)", {{4, 3, 2}, {3}, {3}},
       [](V x) { return batch_norm(x[0], x[3].cast(x[0].dtype()), x[4].cast(x[0].dtype()), x[1], x[2], false); }, -1, 1, {rm, rv}},
  };
  run_all_modes(cases);
}

// Big enough that the plane loops and the row kernels split over every thread count.
TEST(BatchNormOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"batch_norm(train)", {{64, 16, 14, 14}, {16}, {16}}, [](V x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }},
      {"batch_norm(train)", {{4096, 64}, {64}, {64}}, [](V x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); }},
  };
  check_split_determinism(cases);
}

// A literal scalar statement of numerics.md §31 (row rule, batch rule, per-element formulas),
// forward and backward, against the op on every code path and thread count, with ==.
struct BnRef {
  std::vector<float> y, dx, dgamma, dbeta;
};
BnRef reference_bn(const std::vector<float>& x, const std::vector<float>& gm, const std::vector<float>& bt, const std::vector<float>& g,
                   std::int64_t N, std::int64_t C, std::int64_t S, float eps) {
  auto at = [&](std::int64_t n, std::int64_t c, std::int64_t i) { return static_cast<std::size_t>((n * C + c) * S + i); };
  auto two = [&](auto term) {  // per sample the row rule, then the batch rule
    return kern::batch_rule<float>(N, [&](std::int64_t n) { return kern::row_rule<float>(S, [&](float& l, std::int64_t i) { term(l, n, i); }); });
  };
  const float M = static_cast<float>(N * S);
  BnRef r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  for (std::int64_t c = 0; c < C; ++c) {
    const float mean = two([&](float& l, std::int64_t n, std::int64_t i) { l = l + x[at(n, c, i)]; }) / M;
    const float s2 = two([&](float& l, std::int64_t n, std::int64_t i) {
      const float d = x[at(n, c, i)] - mean;
      l = std::fma(d, d, l);
    });
    const float rstd = 1.0f / std::sqrt(s2 / M + eps);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < S; ++i) r.y[at(n, c, i)] = ((x[at(n, c, i)] - mean) * rstd) * gm[c] + bt[c];
    auto xhat = [&](std::int64_t n, std::int64_t i) { return (x[at(n, c, i)] - mean) * rstd; };
    const float sg = two([&](float& l, std::int64_t n, std::int64_t i) { l = l + g[at(n, c, i)]; });
    const float sgx = two([&](float& l, std::int64_t n, std::int64_t i) { l = l + g[at(n, c, i)] * xhat(n, i); });
    r.dbeta.push_back(sg);
    r.dgamma.push_back(sgx);
    const float k = gm[c] * rstd, a = sg / M, b = sgx / M;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < S; ++i) r.dx[at(n, c, i)] = k * ((g[at(n, c, i)] - a) - xhat(n, i) * b);
  }
  return r;
}

TEST(BatchNormOps, FastPathsEqualTheScalarStatement) {
  for (const Shape& s : {Shape{37, 3, 5, 4}, Shape{70, 5}, Shape{65, 2, 1100}}) {
    const std::int64_t N = s[0], C = s[1], S = s.numel() / (N * C);
    Tensor x = Tensor::empty(s, DType::f32), g = Tensor::empty(s, DType::f32);
    rng::Stream(3, "bn").fill_normal(x.mutable_data<float>(), x.numel(), 0, 0.5f, 2.0f);
    rng::Stream(4, "bn").fill_normal(g.mutable_data<float>(), g.numel(), 0, 0.0f, 1.0f);
    Tensor gamma = ramp(C, 0.5, 0.3).cast(DType::f32), beta = ramp(C, -1, 0.7).cast(DType::f32);
    const BnRef want = reference_bn(x.to_vector<float>(), gamma.to_vector<float>(), beta.to_vector<float>(), g.to_vector<float>(), N, C, S,
                                    1e-5f);
    const std::vector<Isa> absent = for_each_context(true, [&](Device, Isa isa, int t) {
      Tensor xi = x.contiguous_copy(), gi = gamma.contiguous_copy(), bi = beta.contiguous_copy();
      for (Tensor* p : {&xi, &gi, &bi}) p->set_requires_grad(true);
      Tensor y = batch_norm(xi, Tensor(), Tensor(), gi, bi, true, 0.1, 1e-5);
      y.backward(g);
      const std::string where = s.str() + " isa=" + isa_name(isa) + " threads=" + std::to_string(t);
      EXPECT_TRUE(y.to_vector<float>() == want.y) << "y " << where;
      EXPECT_TRUE(xi.grad().to_vector<float>() == want.dx) << "dx " << where;
      EXPECT_TRUE(gi.grad().to_vector<float>() == want.dgamma) << "dgamma " << where;
      EXPECT_TRUE(bi.grad().to_vector<float>() == want.dbeta) << "dbeta " << where;
    });
    BITGRAD_SAY_COMPARED(absent, "batch_norm");
  }
}

// The channel mean is bit for bit sum(x, {0, 2, 3}) / M: the same two stages as every batch sum.
TEST(BatchNormOps, MeanIsTheBatchSum) {
  Tensor x = Tensor::empty(Shape{70, 4, 3, 3}, DType::f32);
  rng::Stream(4, "bn").fill_normal(x.mutable_data<float>(), x.numel(), 0, 1.0f, 3.0f);
  for_each_context(true, [&](Device, Isa isa, int t) {
    Tensor rm = Tensor::zeros(Shape{4}), rv = Tensor::zeros(Shape{4});
    batch_norm(x, rm, rv, Tensor(), Tensor(), true, 1.0, 1e-5);  // momentum 1: the running mean is the stat
    const Tensor want = div(sum(x, {0, 2, 3}), 70.0 * 9);
    EXPECT_EQ(rm.to_vector<float>(), want.to_vector<float>()) << "isa=" << isa_name(isa) << " t=" << t;
  });
}

TEST(BatchNormOps, EvaluationIsPerSample) {
  // evaluation normalises each sample by the running statistics alone: a sample's output does
  // not depend on the batch around it (T4)
  Tensor x = Tensor::empty(Shape{9, 2, 3}, DType::f32);
  rng::Stream(5, "bn").fill_normal(x.mutable_data<float>(), x.numel(), 0, 0.0f, 1.0f);
  Tensor rm = Tensor::from<float>(std::vector<float>{0.25f, -0.5f}, Shape{2});
  Tensor rv = Tensor::from<float>(std::vector<float>{2.0f, 0.75f}, Shape{2});
  Tensor whole = batch_norm(x, rm, rv, Tensor(), Tensor(), false);
  Tensor part = batch_norm(slice(x, 0, 3, 5), rm, rv, Tensor(), Tensor(), false);
  EXPECT_EQ(contiguous(slice(whole, 0, 3, 5)).to_vector<float>(), part.to_vector<float>());
  // and the formula: (x - m) * (1 / sqrt(v + eps))
  const float r0 = 1.0f / std::sqrt(2.0f + 1e-5f);
  EXPECT_EQ(whole.to_vector<float>()[0], (x.to_vector<float>()[0] - 0.25f) * r0);
}

TEST(BatchNormOps, RunningStatisticsFollowPyTorch) {
  // x per channel {1, 2, 3, 4} and {2, 2, 2, 2}: mean 2.5 and 2, unbiased var 5/3 and 0
  Tensor x = Tensor::from<float>(std::vector<float>{1, 2, 2, 2, 3, 2, 4, 2}, Shape{4, 2});
  Tensor rm = Tensor::zeros(Shape{2}), rv = Tensor::ones(Shape{2});
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1);
  EXPECT_EQ(rm.to_vector<float>(), (std::vector<float>{0.1f * 2.5f, 0.1f * 2.0f}));
  EXPECT_EQ(rv.to_vector<float>(), (std::vector<float>{0.1f * (5.0f / 3.0f) + 0.9f, 0.9f}));
}

TEST(BatchNormOps, Errors) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([] { batch_norm(Tensor::zeros({4}), Tensor(), Tensor()); }).find("batch_norm: expects x [N, C]"), std::string::npos);
  EXPECT_NE(msg([] { batch_norm(Tensor::zeros({4, 3}), Tensor(), Tensor(), Tensor::ones({4})); }).find("gamma must be [3]"),
            std::string::npos);
  EXPECT_NE(msg([] { batch_norm(Tensor::zeros({1, 3}), Tensor(), Tensor()); }).find("more than one value per channel"),
            std::string::npos);
  EXPECT_NE(msg([] { batch_norm(Tensor::zeros({4, 3}), Tensor(), Tensor(), Tensor(), Tensor(), false); }).find("evaluation mode needs"),
            std::string::npos);
  EXPECT_NE(msg([] { batch_norm(Tensor::zeros({4, 3}), Tensor::zeros({3}), Tensor()); }).find("given together"), std::string::npos);
  EXPECT_NE(msg([] { batch_norm(Tensor::zeros({4, 3}), Tensor::zeros({3}), Tensor::ones({3}), Tensor(), Tensor(), true, 1.5); })
                .find("momentum must be in [0, 1]"),
            std::string::npos);
}

}  // namespace
}  // namespace bitgrad::test
