// batch_norm on a part of the batch (numerics.md §20, §31; PyTorch's SyncBatchNorm semantics):
// P "ranks" as threads of this process, each holding one node of the batch's tree
// (dist::whole_node_shards) and gathering through memory (the exchange of
// ops/batch_stats.hpp), give the bits of one process: the output and input gradient rows,
// the running statistics on every rank, and gamma's and beta's gradients once the nodes are
// added by the tree. Also: a rank without samples takes no part, a checkpoint's recomputation
// gathers again and gets the same bits, and misuse is refused by name.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "bitgrad/ops.hpp"
#include "bitgrad/runtime.hpp"
#include "dist/plan.hpp"
#include "kernels/tensor_ops.hpp"
#include "ops/batch_stats.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

// The ranks' rows gathered through memory: a round ends when every rank with rows has put its
// bytes in and taken the whole back.
struct MemoryGather {
  std::vector<dist::Range> rows;  // per rank
  int holders = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<char> buf;
  int arrived = 0, left = 0;
  std::uint64_t round = 0;
  std::int64_t calls = 0;  // gathers completed (rounds)
};

class MemoryExchange final : public BatchStatsExchange {
 public:
  MemoryExchange(MemoryGather& s, int rank) : s_(s), rank_(rank) {}
  std::int64_t total() const override { return s_.rows.back().end; }
  std::int64_t first() const override { return s_.rows[static_cast<std::size_t>(rank_)].begin; }
  std::int64_t rows() const override { return s_.rows[static_cast<std::size_t>(rank_)].size(); }
  void gather(const void* mine, std::int64_t row_bytes, void* all, const char*) override {
    std::unique_lock<std::mutex> lk(s_.mu);
    s_.cv.wait(lk, [&] { return s_.left == 0; });
    if (s_.arrived == 0) s_.buf.assign(static_cast<std::size_t>(total() * row_bytes), 0);
    std::memcpy(s_.buf.data() + first() * row_bytes, mine, static_cast<std::size_t>(rows() * row_bytes));
    if (++s_.arrived == s_.holders) {
      s_.left = s_.holders;
      ++s_.round;
      ++s_.calls;
      s_.cv.notify_all();
    } else {
      const std::uint64_t r = s_.round;
      s_.cv.wait(lk, [&] { return s_.round != r; });
    }
    std::memcpy(all, s_.buf.data(), static_cast<std::size_t>(total() * row_bytes));
    if (--s_.left == 0) {
      s_.arrived = 0;
      s_.cv.notify_all();
    }
  }

 private:
  MemoryGather& s_;
  int rank_;
};

template <class T>
std::vector<T> values(const Tensor& t) {
  Tensor c = t.contiguous_copy();
  return std::vector<T>(c.data<T>(), c.data<T>() + c.numel());
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Out {
  Tensor y, dx, dgamma, dbeta, rm, rv;
};

// One batch_norm forward and backward (training) of x with upstream gradient g. `checkpointed`:
// inside a checkpoint, so the backward recomputes the forward (without running statistics, as
// nn::BatchNorm does when recomputing()).
Out run_bn(const Tensor& x0, const Tensor& g, const Tensor& gamma0, const Tensor& beta0, const Tensor& rm0, const Tensor& rv0,
           bool checkpointed) {
  Out o;
  Tensor x = x0.contiguous_copy().set_requires_grad(true);
  Tensor gamma = gamma0.contiguous_copy().set_requires_grad(true), beta = beta0.contiguous_copy().set_requires_grad(true);
  o.rm = rm0.contiguous_copy();
  o.rv = rv0.contiguous_copy();
  if (checkpointed) {
    Tensor rm = o.rm, rv = o.rv;
    o.y = checkpoint(
        [&, rm, rv](const Tensor& in) {
          return recomputing() ? batch_norm(in, Tensor(), Tensor(), gamma, beta, true, 0.1, 1e-5)
                               : batch_norm(in, rm, rv, gamma, beta, true, 0.1, 1e-5);
        },
        x, {gamma, beta});
  } else {
    o.y = batch_norm(x, o.rm, o.rv, gamma, beta, true, 0.1, 1e-5);
  }
  o.y.backward(g);
  o.dx = x.grad();
  o.dgamma = gamma.grad();
  o.dbeta = beta.grad();
  return o;
}

// Shape [N, C, *spatial] over P ranks with `threads` kernel threads each.
void check_ranks(const Shape& shape, int P, int threads, bool checkpointed) {
  SCOPED_TRACE(shape.str() + " on " + std::to_string(P) + " ranks, threads " + std::to_string(threads) +
               (checkpointed ? ", checkpointed" : ""));
  const std::int64_t N = shape[0], C = shape[1];
  rng::Stream st(41, "bn-ranks");
  const Tensor x = add(mul(randn(shape, st.sub(0)), 1.5), 0.25);  // mean away from 0
  const Tensor g = randn(shape, st.sub(1));
  const Tensor gamma = add(randn(Shape{C}, st.sub(2)), 1.0), beta = randn(Shape{C}, st.sub(3));
  const Tensor rm = mul(randn(Shape{C}, st.sub(4)), 0.1), rv = add(mul(randn(Shape{C}, st.sub(5)), 0.1), 1.0);
  const Out one = run_bn(x, g, gamma, beta, rm, rv, false);

  const std::int64_t leaves = (N + dist::kBlockRows - 1) / dist::kBlockRows;
  const std::vector<dist::Range> shards = dist::whole_node_shards(leaves, P);
  MemoryGather mg;
  for (const dist::Range& s : shards) {
    mg.rows.push_back({std::min(N, s.begin * dist::kBlockRows), std::min(N, s.end * dist::kBlockRows)});
    if (mg.rows.back().size() > 0) ++mg.holders;
  }
  std::vector<Out> outs(static_cast<std::size_t>(P));
  std::vector<std::string> errors(static_cast<std::size_t>(P));
  std::vector<std::thread> ranks;
  for (int r = 0; r < P; ++r) {
    const dist::Range rows = mg.rows[static_cast<std::size_t>(r)];
    if (rows.size() == 0) continue;  // holds no samples: takes no part
    ranks.emplace_back([&, r, rows] {
      try {
        ExecContext ctx(threads);
        ExecScope in(ctx);
        MemoryExchange ex(mg, r);
        BatchStatsScope scope(&ex);
        outs[static_cast<std::size_t>(r)] =
            run_bn(slice(x, 0, rows.begin, rows.end), slice(g, 0, rows.begin, rows.end), gamma, beta, rm, rv, checkpointed);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& e : errors) ASSERT_EQ(e, "");
  EXPECT_EQ(mg.calls, checkpointed ? 5 : 3) << "gathers: s1, s2 and the backward's sg | sgx (a recomputation: s1, s2 again)";

  std::vector<Tensor> ys, dxs;
  std::vector<dist::Range> nodes;
  std::vector<Tensor> dgammas, dbetas;
  for (int r = 0; r < P; ++r) {
    const Out& o = outs[static_cast<std::size_t>(r)];
    if (mg.rows[static_cast<std::size_t>(r)].size() == 0) continue;
    ys.push_back(o.y);
    dxs.push_back(o.dx);
    nodes.push_back(shards[static_cast<std::size_t>(r)]);
    dgammas.push_back(o.dgamma);
    dbetas.push_back(o.dbeta);
    EXPECT_TRUE(same_bits(values<float>(o.rm), values<float>(one.rm))) << "running mean on rank " << r;
    EXPECT_TRUE(same_bits(values<float>(o.rv), values<float>(one.rv))) << "running variance on rank " << r;
  }
  EXPECT_TRUE(same_bits(values<float>(concat(ys, 0)), values<float>(one.y))) << "output";
  EXPECT_TRUE(same_bits(values<float>(concat(dxs, 0)), values<float>(one.dx))) << "input gradient";
  auto add_t = [](const Tensor& a, const Tensor& b) { return kern::add_same_shape(a, b); };
  EXPECT_TRUE(same_bits(values<float>(dist::evaluate_tree(leaves, nodes, dgammas, add_t)), values<float>(one.dgamma))) << "gamma's gradient";
  EXPECT_TRUE(same_bits(values<float>(dist::evaluate_tree(leaves, nodes, dbetas, add_t)), values<float>(one.dbeta))) << "beta's gradient";
}

TEST(BatchNormRanks, EveryRankHoldsTheBitsOfOneProcess) {
  RuntimeGuard guard;
  // 256 samples: 8 blocks; 200: 7 blocks, the last of 8 (a short last batch); 40: 2 blocks,
  // so 3 and 4 ranks leave some without samples
  for (const Shape& s : {Shape{256, 6}, Shape{200, 3, 5, 4}, Shape{40, 4, 7}})
    for (int P : {1, 2, 3, 4}) check_ranks(s, P, P % 2 ? 1 : 2, false);
}

TEST(BatchNormRanks, RecomputationGathersAgainWithTheSameBits) {
  RuntimeGuard guard;
  for (int P : {2, 3}) check_ranks(Shape{200, 3, 5, 4}, P, 1, true);
}

TEST(BatchNormRanks, MisuseIsRefusedByName) {
  RuntimeGuard guard;
  MemoryGather mg;
  mg.rows = {{0, 32}, {32, 64}};
  mg.holders = 2;
  MemoryExchange ex(mg, 0);
  const Tensor x = Tensor::ones(Shape{16, 3}).set_requires_grad(true);
  Tensor y;
  {
    BatchStatsScope scope(&ex);
    EXPECT_THROW_MSG(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true), "this process holds 32 samples of a batch of 64");
    // evaluation is per sample: no exchange, whatever is installed
    const Tensor m = Tensor::zeros(Shape{3}), v = Tensor::ones(Shape{3});
    EXPECT_EQ(batch_norm(x, m, v, Tensor(), Tensor(), false).shape(), x.shape());
  }
  // a forward with the exchange, a backward without it
  MemoryGather one;
  one.rows = {{0, 16}};
  one.holders = 1;
  MemoryExchange solo(one, 0);
  {
    BatchStatsScope scope(&solo);
    y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  }
  EXPECT_THROW_MSG(y.backward(Tensor::ones(Shape{16, 3})), "its backward must run in the same step");
}

}  // namespace
}  // namespace bitgrad::test
