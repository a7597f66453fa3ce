// Contract T5 at the op level for samples of several rows (numerics.md §3): the parameter
// gradient of a batch equals the pairwise tree of the gradients of its aligned micro-batches
// of whole 32-sample blocks — for layer norm over 4-d input, linear over 3-d input, matmul with
// a shared operand, and the embedding. (Numerics version 1 summed all rows as one batch.)
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

// d(sum(f(x) * seed))/d(param) for the samples [n0, n1) of x (and of the indices)
using Grad = std::function<Tensor(std::int64_t n0, std::int64_t n1)>;

void expect_micro_batches_equal_the_batch(const char* what, const Grad& grad, std::int64_t N) {
  RuntimeGuard guard;
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : {1, 3}) {
      set_num_threads(t);
      const Tensor whole = grad(0, N);
      const Tensor halves = add(grad(0, N / 2), grad(N / 2, N));
      const Tensor quarters = add(add(grad(0, N / 4), grad(N / 4, N / 2)), add(grad(N / 2, 3 * N / 4), grad(3 * N / 4, N)));
      EXPECT_EQ(fingerprint(whole).hex(), fingerprint(halves).hex()) << what << ": 2 micro-batches, isa=" << isa_name(isa) << " threads=" << t;
      EXPECT_EQ(fingerprint(whole).hex(), fingerprint(quarters).hex()) << what << ": 4 micro-batches, isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

Tensor rand_tensor(const Shape& s, std::uint64_t seed) {
  return Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(s.numel()), seed, -1.0, 1.0), s);
}

// the gradient of `param` through out = f(x[n0:n1]) with the matching slice of a fixed seed
Tensor grad_of(Tensor param, const Tensor& out, const Tensor& seed, std::int64_t n0, std::int64_t n1) {
  param.zero_grad();
  out.backward(slice(seed, 0, n0, n1));
  return param.grad().contiguous_copy();
}

TEST(MicroBatchOps, LayerNormOverFourDimensions) {
  const std::int64_t N = 128;
  const Tensor x = rand_tensor({N, 3, 5, 7}, 1), seed = rand_tensor({N, 3, 5, 7}, 2);
  Tensor gamma = rand_tensor({7}, 3), beta = rand_tensor({7}, 4);
  gamma.set_requires_grad(true), beta.set_requires_grad(true);
  for (Tensor* p : {&gamma, &beta})
    expect_micro_batches_equal_the_batch(p == &gamma ? "layer_norm gamma" : "layer_norm beta", [&](std::int64_t a, std::int64_t b) {
      return grad_of(*p, layer_norm(slice(x, 0, a, b), gamma, beta), seed, a, b);
    }, N);
}

TEST(MicroBatchOps, LinearOverThreeDimensions) {
  const std::int64_t N = 128;
  const Tensor x = rand_tensor({N, 9, 13}, 5), seed = rand_tensor({N, 9, 6}, 6);
  Tensor w = rand_tensor({6, 13}, 7), b = rand_tensor({6}, 8);
  w.set_requires_grad(true), b.set_requires_grad(true);
  for (Tensor* p : {&w, &b})
    expect_micro_batches_equal_the_batch(p == &w ? "linear weight" : "linear bias", [&](std::int64_t n0, std::int64_t n1) {
      return grad_of(*p, linear(slice(x, 0, n0, n1), w, b), seed, n0, n1);
    }, N);
}

TEST(MicroBatchOps, MatmulWithASharedOperand) {
  const std::int64_t N = 128;
  const Tensor a = rand_tensor({N, 2, 5, 6}, 9), seed = rand_tensor({N, 2, 5, 4}, 10);
  Tensor b = rand_tensor({6, 4}, 11);
  b.set_requires_grad(true);
  expect_micro_batches_equal_the_batch("matmul shared b", [&](std::int64_t n0, std::int64_t n1) {
    return grad_of(b, matmul(slice(a, 0, n0, n1), b), seed, n0, n1);
  }, N);
  Tensor a2 = rand_tensor({5, 6}, 12);
  a2.set_requires_grad(true);
  const Tensor bb = rand_tensor({N, 3, 6, 4}, 13), seed2 = rand_tensor({N, 3, 5, 4}, 14);
  expect_micro_batches_equal_the_batch("matmul shared a", [&](std::int64_t n0, std::int64_t n1) {
    return grad_of(a2, matmul(a2, slice(bb, 0, n0, n1)), seed2, n0, n1);
  }, N);
}

TEST(MicroBatchOps, EmbeddingWithRepeatedIndices) {
  const std::int64_t N = 128, T = 11;
  std::vector<std::int64_t> iv(static_cast<std::size_t>(N * T));
  rng::Stream st(14, "indices");
  for (std::size_t i = 0; i < iv.size(); ++i) iv[i] = static_cast<std::int64_t>(st.below(i, 9));  // 9 rows: many repeats
  const Tensor idx = i64_tensor(iv, Shape{N, T}), seed = rand_tensor({N, T, 5}, 15);
  Tensor w = rand_tensor({9, 5}, 16);
  w.set_requires_grad(true);
  expect_micro_batches_equal_the_batch("embedding", [&](std::int64_t n0, std::int64_t n1) {
    return grad_of(w, embedding(w, slice(idx, 0, n0, n1)), seed, n0, n1);
  }, N);
}

}  // namespace
}  // namespace bitgrad::test
