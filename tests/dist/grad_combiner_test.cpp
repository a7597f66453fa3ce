// The public data-parallel API for a step of one's own (bitgrad/dist.hpp): plan_step
// is the training step's layout (dist/plan.hpp) and the loader's shard, and GradientCombiner over
// micro-batches of a power-of-two number of 32-sample blocks gives the whole batch's gradient and
// loss bit for bit (T5); other micro-batches get the tree over micro-batches. Over MPI ranks it is
// tested from Python under mpirun (tests/python/test_distributed.py).
#include <gtest/gtest.h>

#include "bitgrad/data.hpp"
#include "bitgrad/dist.hpp"
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/ops.hpp"
#include "dist/plan.hpp"

namespace bitgrad::test {
namespace {

TEST(DistApi, PlanStepIsTheTrainingLayoutAndTheLoadersShard) {
  for (std::int64_t batch : {32, 96, 128, 192, 256})
    for (std::int64_t acc : {1, 2, 3, 4})
      for (int P = 1; P <= 5; ++P) {
        if (batch % acc || !dist::plan_problem(batch, acc, P).empty()) continue;
        for (std::int64_t rows : {batch, batch - 7, std::int64_t{1}}) {
          const dist::StepLayout l = dist::step_layout(rows, batch, acc, P);
          for (int r = 0; r < P; ++r) {
            const dist::StepPlan p = dist::plan_step(rows, batch, acc, P, r);
            EXPECT_EQ(p.leaf_rows, l.leaf_rows);
            EXPECT_EQ(p.leaf_rows, dist::leaf_rows(batch, acc));
            const auto sh = data::shard_rows(rows, l.leaf_rows, P, r);
            EXPECT_EQ(p.shard, sh) << batch << " " << acc << " " << P << " " << r;
            ASSERT_EQ(p.pieces.size(), l.nodes[static_cast<std::size_t>(r)].size());
            std::int64_t next = p.shard.first;
            for (const auto& node : p.pieces)
              for (const auto& [b, e] : node) {
                EXPECT_EQ(b, next);
                EXPECT_LE(e - b, batch / acc);
                next = e;
              }
            EXPECT_EQ(next, p.shard.second);
          }
        }
      }
}

struct Net {
  std::shared_ptr<nn::Sequential> model = std::make_shared<nn::Sequential>();
  Net() {
    model->add(std::make_shared<nn::Linear>(6, 12));
    model->add(std::make_shared<nn::Linear>(12, 4));
    std::uint64_t index = 0;
    model->init(nn::Init::kaiming_uniform, 9, index);
  }
  std::vector<Digest128> grads() const {
    std::vector<Digest128> out;
    for (const Tensor& p : model->parameters()) out.push_back(fingerprint(p.grad()));
    return out;
  }
};

TEST(DistApi, CombinerOverMicroBatchesGivesTheWholeBatch) {
  const std::int64_t B = 256;
  auto ds = data::synthetic_dataset(B, Shape{6}, 4, 1, 3);
  data::LoaderOptions o;
  o.batch_size = B;
  o.shuffle = false;
  data::DataLoader loader(ds, o);
  const data::Batch b = loader.next();
  Net net;
  Tensor whole = cross_entropy(net.model->forward(b.x, {}), b.y);
  whole.backward();
  const auto want = net.grads();
  for (std::int64_t k : {2, 4, 8}) {
    for (Tensor& p : net.model->parameters()) p.zero_grad();
    const dist::StepPlan plan = dist::plan_step(B, B, k, 1, 0);
    ASSERT_TRUE(plan.whole_batch);
    dist::GradientCombiner comb(net.model->parameters());
    for (const auto& node : plan.pieces) {
      for (const auto& [r0, r1] : node)
        comb.backward(cross_entropy(net.model->forward(slice(b.x, 0, r0, r1), {}), slice(b.y, 0, r0, r1), Reduction::sum),
                      static_cast<double>(B));
      comb.end_node();
    }
    const Tensor S = comb.finish(plan);
    EXPECT_EQ(div(S, static_cast<double>(B)).item(), whole.item()) << k;
    EXPECT_EQ(net.grads(), want) << k;
  }
  // a gradient left from before is refused, naming zero_grad
  dist::GradientCombiner comb(net.model->parameters());
  try {
    comb.backward(cross_entropy(net.model->forward(b.x, {}), b.y, Reduction::sum), static_cast<double>(B));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zero_grad"), std::string::npos) << e.what();
  }
}

TEST(DistApi, MicroBatchesOfOtherSizesAreTheTreeOverMicroBatches) {
  EXPECT_TRUE(dist::plan_micro_batches({64, 64, 64, 40}).whole_batch);
  EXPECT_TRUE(dist::plan_micro_batches({100}).whole_batch);
  EXPECT_FALSE(dist::plan_micro_batches({48, 48, 48, 48}).whole_batch);
  EXPECT_FALSE(dist::plan_micro_batches({64, 32, 32}).whole_batch);
  EXPECT_FALSE(dist::plan_micro_batches({64, 64, 96}).whole_batch);
  const dist::StepPlan p = dist::plan_micro_batches({48, 48, 48});
  EXPECT_EQ(p.rows, 144);
  EXPECT_EQ(p.pieces.size(), 1u);
  EXPECT_EQ(p.pieces[0].size(), 3u);
  EXPECT_EQ(p.pieces[0][2], (dist::StepPlan::Rows{96, 144}));
}

}  // namespace
}  // namespace bitgrad::test
