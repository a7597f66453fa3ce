// The data-parallel layout (dist/plan.hpp) without MPI: the nodes of every rank tile the batch
// and are nodes of the canonical tree, and the tree evaluated above any ranks' nodes gives the
// bits of the single-process batch rule — on the pairwise stack itself and on a real kernel
// (the batch-rule column sum) computed per node.
#include <gtest/gtest.h>

#include <cstring>

#include "bitgrad/data.hpp"
#include "bitgrad/ops.hpp"
#include "dist/plan.hpp"
#include "dist/tree_allreduce.hpp"
#include "kernels/kernels.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using dist::Range;

// Whether [b, e) is a node of the canonical tree over n leaves.
bool is_node(std::int64_t n, Range r) {
  std::int64_t lo = 0, hi = n;
  while (true) {
    if (lo == r.begin && hi == r.end) return true;
    if (hi - lo <= 1) return false;
    const std::int64_t mid = dist::split(lo, hi);
    if (r.end <= mid) hi = mid;
    else if (r.begin >= mid) lo = mid;
    else return false;
  }
}

TEST(DistPlan, RanksCoverTheBatchWithTreeNodes) {
  for (std::int64_t n = 1; n <= 80; ++n)
    for (int P = 1; P <= 9; ++P) {
      std::int64_t next = 0;
      for (int r = 0; r < P; ++r) {
        const Range s = dist::shard(n, P, r);
        EXPECT_EQ(s.begin, next);
        for (const Range& node : dist::cover(n, s)) {
          EXPECT_EQ(node.begin, next) << "n " << n << " P " << P << " rank " << r;
          EXPECT_TRUE(is_node(n, node)) << "[" << node.begin << ", " << node.end << ") of " << n;
          next = node.end;
        }
        EXPECT_EQ(next, s.end);
      }
      EXPECT_EQ(next, n);
    }
}

TEST(DistPlan, TheTreeAboveAnyRanksIsThePairwiseStack) {
  // floats whose sums round differently in every order
  std::vector<float> leaf = random_vec<float>(100, 7);
  for (std::size_t i = 0; i < leaf.size(); ++i) leaf[i] *= static_cast<float>(1 << (i % 23));
  for (std::int64_t n = 1; n <= 100; ++n) {
    kern::PairwiseStack<float> st;
    for (std::int64_t i = 0; i < n; ++i) st.push(leaf[static_cast<std::size_t>(i)]);
    const float want = st.total();
    for (int P = 1; P <= 9; ++P) {
      std::vector<Range> nodes;
      std::vector<float> vals;
      for (int r = 0; r < P; ++r)
        for (const Range& node : dist::cover(n, dist::shard(n, P, r))) {
          kern::PairwiseStack<float> s;
          for (std::int64_t i = node.begin; i < node.end; ++i) s.push(leaf[static_cast<std::size_t>(i)]);
          nodes.push_back(node);
          vals.push_back(s.total());
        }
      const float got = dist::evaluate_tree(n, nodes, vals, [](float a, float b) { return a + b; });
      EXPECT_EQ(std::memcmp(&got, &want, sizeof got), 0) << "n " << n << " P " << P;
    }
  }
}

// The batch rule of a real kernel: the column sum of a [R, C] matrix computed whole, and per
// node of each rank's shard (rows of 32-sample blocks, the last block short) combined above.
TEST(DistPlan, ShardedColumnSumsCombineToTheWholeBatch) {
  for (std::int64_t R : {1, 31, 32, 33, 96, 100, 129, 255, 256, 300}) {
    const std::int64_t C = 7;
    std::vector<float> v = random_vec<float>(static_cast<std::size_t>(R * C), static_cast<std::uint64_t>(R));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] *= static_cast<float>(1 << (i % 19));
    const Tensor x = Tensor::from(v, Shape{R, C});
    const Tensor want = sum(x, {0});
    for (int P = 1; P <= 8; ++P)
      for (std::int64_t accumulate : {1, 2}) {
        if (128 % accumulate) continue;
        const dist::StepLayout l = dist::step_layout(R, 512, accumulate, P);
        std::vector<std::vector<Range>> nodes = l.nodes;
        std::vector<std::vector<Tensor>> vals(static_cast<std::size_t>(P));
        for (int r = 0; r < P; ++r)
          for (const Range& node : nodes[static_cast<std::size_t>(r)]) {
            // the node in pieces of at most piece_rows rows, combined by the pairwise stack
            struct AddT {
              Tensor operator()(const Tensor& a, const Tensor& b) const { return add(a, b); }
            };
            kern::PairwiseStack<Tensor, AddT> st;
            const std::int64_t n1 = l.row_of(node.end);
            for (std::int64_t r0 = l.row_of(node.begin); r0 < n1; r0 += l.piece_rows)
              st.push(sum(slice(x, 0, r0, std::min(n1, r0 + l.piece_rows)), {0}));
            vals[static_cast<std::size_t>(r)].push_back(st.total());
          }
        const Tensor got = dist::tree_reduce_local(nodes, l.leaves, vals);
        ASSERT_EQ(got.numel(), C);
        EXPECT_EQ(std::memcmp(got.data<float>(), want.data<float>(), C * sizeof(float)), 0) << "R " << R << " P " << P << " accumulate " << accumulate;
      }
  }
}

TEST(DistPlan, LeavesAreBlocksOrWholeMicroBatches) {
  EXPECT_EQ(dist::step_layout(128, 128, 1, 4).leaf_rows, 32);
  EXPECT_EQ(dist::step_layout(128, 128, 2, 4).leaf_rows, 32);   // micro-batches of 2 blocks: a subtree
  EXPECT_EQ(dist::step_layout(96, 96, 3, 2).leaf_rows, 32);     // 1 block each
  EXPECT_EQ(dist::step_layout(120, 120, 3, 2).leaf_rows, 40);   // 40 samples: not whole blocks
  EXPECT_EQ(dist::step_layout(100, 100, 1, 2).leaves, 4);       // 32, 32, 32, 4
  EXPECT_EQ(dist::step_layout(100, 100, 1, 2).rows_of(1), (Range{64, 100}));
  EXPECT_EQ(dist::layout_problem(128, 1, 4), "");
  EXPECT_NE(dist::layout_problem(128, 1, 5).find("4 blocks of 32 samples, fewer than the 5 ranks"), std::string::npos);
  EXPECT_NE(dist::layout_problem(120, 3, 4).find("fewer micro-batches than the 4 ranks"), std::string::npos);
  // the loader's shard is the layout's
  for (std::int64_t rows : {1, 40, 100, 128, 257})
    for (int P = 1; P <= 8; ++P)
      for (int r = 0; r < P; ++r) {
        const auto [a, b] = data::shard_rows(rows, 32, P, r);
        const Range want = dist::step_layout(rows, 512, 1, P).rows_of(r);
        EXPECT_EQ(a, want.begin);
        EXPECT_EQ(b, want.end);
      }
}

// The batch-norm layout (numerics §20): each rank holds at most one node of the tree, the parts
// tile the batch in rank order, as many ranks hold samples as the leaves allow, and a
// power-of-two world over a power-of-two number of blocks is the even split.
TEST(DistPlan, WholeNodeShardsGiveEachRankOneNode) {
  for (std::int64_t n = 1; n <= 70; ++n)
    for (int P = 1; P <= 9; ++P) {
      const std::vector<Range> parts = dist::whole_node_shards(n, P);
      ASSERT_EQ(static_cast<int>(parts.size()), P);
      std::int64_t at = 0, holding = 0;
      for (const Range& p : parts) {
        EXPECT_EQ(p.begin, at) << "n " << n << " P " << P;
        at = p.end;
        if (p.size() == 0) continue;
        ++holding;
        EXPECT_TRUE(is_node(n, p)) << "n " << n << " P " << P << ": [" << p.begin << ", " << p.end << ")";
      }
      EXPECT_EQ(at, n);
      EXPECT_EQ(holding, std::min<std::int64_t>(n, P)) << "n " << n << " P " << P;
      const dist::StepLayout l = dist::step_layout(n * 32 - 5, 70 * 32, 1, P, dist::Sharding::whole_nodes);
      for (int r = 0; r < P; ++r) {
        EXPECT_LE(l.nodes[static_cast<std::size_t>(r)].size(), 1u);
        EXPECT_EQ(l.shards[static_cast<std::size_t>(r)], parts[static_cast<std::size_t>(r)]);
      }
    }
  for (std::int64_t n : {1, 2, 4, 8, 16, 64})
    for (int P : {1, 2, 4, 8}) {
      if (P > n) continue;
      for (int r = 0; r < P; ++r) {
        EXPECT_EQ(dist::whole_node_shards(n, P)[static_cast<std::size_t>(r)], dist::shard(n, P, r));
      }
    }
  // 3 ranks over 8 blocks: 2, 2 and 4 (the even split, 2, 3, 3, would give two ranks two nodes)
  EXPECT_EQ(dist::whole_node_shards(8, 3), (std::vector<Range>{{0, 2}, {2, 4}, {4, 8}}));
  // a short batch of 5 blocks on 2 ranks: 4 and 1; of 2 blocks on 4 ranks: two hold none
  EXPECT_EQ(dist::whole_node_shards(5, 2), (std::vector<Range>{{0, 4}, {4, 5}}));
  EXPECT_EQ(dist::whole_node_shards(2, 4), (std::vector<Range>{{0, 1}, {1, 2}, {2, 2}, {2, 2}}));
}

}  // namespace
}  // namespace bitgrad::test
