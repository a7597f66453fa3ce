// The tree reducer in one process: micro-batches combined by the pairwise tree (left + right,
// the batch rule above the block level), the loss sums likewise; one micro-batch leaves .grad
// as backward wrote it (no copy).
#include "bitgrad/bitgrad.hpp"
#include "kernels/tensor_ops.hpp"
#include "support/test_util.hpp"
#include "train/grad_reducer.hpp"

namespace bitgrad::test {
namespace {

Tensor random_tensor(std::int64_t n, std::uint64_t seed) {
  auto v = random_vec<float>(static_cast<std::size_t>(n), seed, -1.0f, 1.0f);
  return Tensor::from<float>(v, Shape{n});
}

TEST(GradReducer, MicroBatchesFollowThePairwiseTree) {
  Tensor w = Tensor::zeros(Shape{37}, DType::f32);
  w.set_requires_grad(true);
  const optim::NamedTensors params = {{"w", w}};
  for (int k : {1, 2, 3, 4, 5, 8}) {
    std::vector<Tensor> g;
    std::vector<float> loss;
    for (int m = 0; m < k; ++m) g.push_back(random_tensor(37, 100 + static_cast<std::uint64_t>(m))), loss.push_back(0.1f * static_cast<float>(m + 1) + 1e-3f);
    train::TreeGradReducer r;
    // k micro-batches of 40 samples (not whole blocks): the tree's leaves are the micro-batches
    const dist::StepLayout layout = dist::step_layout(40 * k, 40 * k, k, 1);
    if (k > 1) {
      ASSERT_EQ(layout.leaves, k);
    }
    r.begin(params, layout, 0);
    for (int m = 0; m < k; ++m) {
      w.set_grad(g[static_cast<std::size_t>(m)]);
      r.add(params, loss[static_cast<std::size_t>(m)]);
    }
    const float total = r.finish(params);
    // the tree spelled out: ((g0 + g1) + (g2 + g3)) + g4 ... folded from the right
    kern::PairwiseStack<float> want_loss;
    for (float l : loss) want_loss.push(l);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(total), std::bit_cast<std::uint32_t>(want_loss.total())) << "k=" << k;
    const Tensor got = w.grad();
    for (std::int64_t i = 0; i < 37; ++i) {
      kern::PairwiseStack<float> want;
      for (const Tensor& t : g) want.push(t.data<float>()[i]);
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got.data<float>()[i]), std::bit_cast<std::uint32_t>(want.total())) << "k=" << k << " element " << i;
    }
    if (k == 1) {
      EXPECT_EQ(got.data<float>(), g[0].data<float>()) << "one micro-batch: the gradient stays where backward left it";
    }
  }
}

}  // namespace
}  // namespace bitgrad::test
