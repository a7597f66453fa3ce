// The tree reducer in one process: micro-batches combined by the pairwise tree (left + right,
// the batch rule above the block level), the loss sums likewise, each use of a parameter on its
// own and the uses added last; one micro-batch's one use becomes .grad as backward wrote it (no
// copy).
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

autograd::Use use_of(Tensor g) {
  autograd::Use u;
  u.grad = std::move(g);
  return u;
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
    const float* first = nullptr;
    for (int m = 0; m < k; ++m) {
      std::vector<std::vector<autograd::Use>> uses(1);
      Tensor mine = g[static_cast<std::size_t>(m)].contiguous_copy();  // held by the piece alone, as backward leaves it
      if (m == 0) first = mine.data<float>();
      uses[0].push_back(use_of(std::move(mine)));
      r.add(params, uses, loss[static_cast<std::size_t>(m)], false);
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
      EXPECT_EQ(got.data<float>(), first) << "one micro-batch: the gradient stays where backward left it";
    }
  }
}

// Two uses per micro-batch (a tied matrix): each use's tree over the micro-batches, then the
// first use's total plus the second's; a micro-batch that lacks the second use counts zeros for it
// and the reducer says the uses differ.
TEST(GradReducer, EachUseFollowsTheTreeAndTheUsesAddLast) {
  Tensor w = Tensor::zeros(Shape{29}, DType::f32);
  w.set_requires_grad(true);
  const optim::NamedTensors params = {{"w", w}};
  for (int k : {1, 2, 3, 4, 7}) {
    std::vector<Tensor> a, b;
    for (int m = 0; m < k; ++m) {
      a.push_back(random_tensor(29, 300 + static_cast<std::uint64_t>(m)));
      b.push_back(random_tensor(29, 400 + static_cast<std::uint64_t>(m)));
    }
    train::TreeGradReducer r;
    const dist::StepLayout layout = dist::step_layout(40 * k, 40 * k, k, 1);
    r.begin(params, layout, 0);
    for (int m = 0; m < k; ++m) {
      std::vector<std::vector<autograd::Use>> uses(1);
      uses[0].push_back(use_of(a[static_cast<std::size_t>(m)]));
      uses[0].push_back(use_of(b[static_cast<std::size_t>(m)]));
      r.add(params, uses, 1.0f, false);
    }
    r.finish(params);
    EXPECT_EQ(r.mismatch(), "");
    const Tensor got = w.grad();
    for (std::int64_t i = 0; i < 29; ++i) {
      kern::PairwiseStack<float> ta, tb;
      for (int m = 0; m < k; ++m) ta.push(a[static_cast<std::size_t>(m)].data<float>()[i]), tb.push(b[static_cast<std::size_t>(m)].data<float>()[i]);
      const float want = ta.total() + tb.total();
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got.data<float>()[i]), std::bit_cast<std::uint32_t>(want)) << "k=" << k << " element " << i;
    }
  }
  // uses that differ between pieces: zeros for the missing one, and said
  train::TreeGradReducer r;
  const dist::StepLayout layout = dist::step_layout(80, 80, 2, 1);
  r.begin(params, layout, 0);
  std::vector<std::vector<autograd::Use>> two(1), one(1);
  two[0] = {use_of(random_tensor(29, 1)), use_of(random_tensor(29, 2))};
  one[0] = {use_of(random_tensor(29, 3))};
  r.add(params, two, 1.0f, false);
  r.add(params, one, 1.0f, false);
  r.finish(params);
  EXPECT_NE(r.mismatch().find("used 2 time(s) in one piece and 1 in another"), std::string::npos) << r.mismatch();
}

// Under a sample check, a use that is not one sum over the piece's samples is named.
TEST(GradReducer, AUseThatIsNotOneSumOverTheSamplesIsNamed) {
  Tensor w = Tensor::zeros(Shape{5}, DType::f32);
  w.set_requires_grad(true);
  const optim::NamedTensors params = {{"w", w}};
  train::TreeGradReducer r;
  const dist::StepLayout layout = dist::step_layout(32, 32, 1, 1);
  r.begin(params, layout, 0);
  std::vector<std::vector<autograd::Use>> uses(1);
  autograd::Use u = use_of(random_tensor(5, 9));
  u.op = "mul";
  uses[0].push_back(u);
  r.add(params, uses, 1.0f, true);
  r.finish(params);
  EXPECT_NE(r.mismatch().find("from 'mul'"), std::string::npos) << r.mismatch();
}

}  // namespace
}  // namespace bitgrad::test
