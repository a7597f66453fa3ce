// Reductions over axes (ONNX Reduce*; src/ops/reduce_axes.cpp): gradients (f64 finite
// differences), determinism (f32: the scalar reference at 1 thread == every code path at threads
// 1, 2, 3, 4, 7, 8; cumsum's loops too), the documented orders (numerics.md §28, §29), semantics.
#include <cmath>

#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

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

// Big enough that the row and batch kernels, prod's and cumsum's loops split over all threads.
TEST(ReduceAxesOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"sum_square", {{64, 4096}}, [](V x) { return sum_square(x[0]); }},
      {"sum_square(axes={0})", {{512, 1024}}, [](V x) { return sum_square(x[0], {0}); }},
      {"logsumexp(axes={1})", {{256, 4096}}, [](V x) { return logsumexp(x[0], {1}); }},
      {"var(axes={0,2})", {{64, 512, 16}}, [](V x) { return var(x[0], {0, 2}); }},
      {"prod(axes={1})", {{16384, 8}}, [](V x) { return prod(x[0], {1}); }, 0.5, 1.5},
      {"cumsum(axis=1)", {{4096, 64}}, [](V x) { return cumsum(x[0], 1); }},
  };
  check_split_determinism(cases);
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
