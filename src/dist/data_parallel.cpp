// Data parallel and gradient accumulation for a step the caller writes (bitgrad/dist.hpp; Python's
// bitgrad.distributed and bitgrad.accumulate): the plan of a step over the ranks and the gradient
// combine. The same rules as the training step (train/step.cpp, train/grad_reducer.cpp): pieces
// of a node combined by the streaming pairwise tree, nodes by the tree over the batch's leaves
// (numerics.md §18, §20), so a loop written with these has the bits of one process.
#include <cstring>
#include <optional>

#include "bitgrad/autograd.hpp"
#include "bitgrad/dist.hpp"
#include "bitgrad/ops.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "dist/tree_allreduce.hpp"
#include "dist/use_grads.hpp"
#include "kernels/kernels.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::dist {

int init() { return world_size(); }
bool initialized() { return Comm::mpi_started(); }
void set_timeout(double seconds) {
  BITGRAD_CHECK(seconds > 0 && seconds <= 1e7, "distributed", "a timeout of ", seconds, " s; expected seconds in (0, 1e7]");
  if (launched_by_mpirun()) Comm::world().set_timeout(seconds);
}

std::vector<std::string> allgather_bytes(const std::string& mine, const std::string& what) {
  if (world_size() == 1) return {mine};
  return Comm::world().allgather(mine, what);
}

void broadcast_bytes(std::string& bytes, int root, const std::string& what) {
  const int P = world_size();
  BITGRAD_CHECK(root >= 0 && root < P, "broadcast", "root rank ", root, " in a world of ", P);
  if (P > 1) Comm::world().broadcast(bytes, root, what);
}

namespace {

std::vector<StepPlan::Rows> rows_of(const std::vector<Range>& rs) {
  std::vector<StepPlan::Rows> out;
  for (const Range& r : rs) out.emplace_back(r.begin, r.end);
  return out;
}

}  // namespace

StepPlan plan_step(std::int64_t rows, std::int64_t batch_size, std::int64_t accumulate, int world, int rank, bool per_block) {
  BITGRAD_CHECK(accumulate > 0 && batch_size % accumulate == 0, "plan_step", "a batch of ", batch_size,
                " samples does not split into ", accumulate, " equal micro-batches");
  BITGRAD_CHECK(rows > 0 && rows <= batch_size, "plan_step", "a batch of ", rows, " rows; expected 1 to the batch size ", batch_size);
  BITGRAD_CHECK(world > 0 && rank >= 0 && rank < world, "plan_step", "rank ", rank, " of a world of ", world);
  const StepLayout l = step_layout(rows, batch_size, accumulate, world, Sharding::even, per_block);
  StepPlan p;
  p.rows = rows;
  p.leaf_rows = l.leaf_rows;
  p.leaves = l.leaves;
  p.world = world;
  p.rank = rank;
  const Range mine = l.rows_of(rank);
  p.shard = {mine.begin, mine.end};
  for (const auto& n : l.nodes) p.rank_nodes.push_back(rows_of(n));
  for (const Range& node : l.nodes[static_cast<std::size_t>(rank)]) {
    std::vector<StepPlan::Rows> pieces;
    const std::int64_t n1 = l.row_of(node.end);
    for (std::int64_t r0 = l.row_of(node.begin); r0 < n1; r0 += l.piece_rows) pieces.emplace_back(r0, std::min(n1, r0 + l.piece_rows));
    p.pieces.push_back(std::move(pieces));
  }
  p.whole_batch = accumulate == 1 || l.leaf_rows == kBlockRows;
  return p;
}

StepPlan plan_micro_batches(const std::vector<std::int64_t>& sizes) {
  BITGRAD_CHECK(!sizes.empty(), "accumulate", "no micro-batches");
  StepPlan p;
  p.leaves = static_cast<std::int64_t>(sizes.size());
  p.leaf_rows = sizes[0];
  p.rank_nodes = {{{0, p.leaves}}};
  std::vector<StepPlan::Rows> pieces;
  for (std::size_t j = 0; j < sizes.size(); ++j) {
    BITGRAD_CHECK(sizes[j] > 0, "accumulate", "micro-batch ", j, " has ", sizes[j], " samples; expected at least one");
    pieces.emplace_back(p.rows, p.rows + sizes[j]);
    p.rows += sizes[j];
  }
  p.shard = {0, p.rows};
  p.pieces = {std::move(pieces)};
  // every micro-batch but the last: the same complete subtree (2^j blocks of 32); the last one no
  // longer (it holds the tail of the tree, as the short last micro-batch of the training step)
  const std::int64_t m = sizes[0];
  bool aligned = sizes.size() == 1 || complete_subtree(m);
  for (std::size_t j = 1; j < sizes.size() && aligned; ++j) aligned = j + 1 < sizes.size() ? sizes[j] == m : sizes[j] <= m;
  p.whole_batch = aligned;
  return p;
}

std::string plan_problem(std::int64_t batch_size, std::int64_t accumulate, int world) {
  BITGRAD_CHECK(batch_size > 0 && accumulate > 0 && batch_size % accumulate == 0, "data parallel", "a batch of ", batch_size,
                " samples does not split into ", accumulate, " equal micro-batches");
  return layout_problem(batch_size, accumulate, world);
}

std::int64_t leaf_rows(std::int64_t batch_size, std::int64_t accumulate) {
  BITGRAD_CHECK(batch_size > 0 && accumulate > 0 && batch_size % accumulate == 0, "data parallel", "a batch of ", batch_size,
                " samples does not split into ", accumulate, " equal micro-batches");
  return step_layout(batch_size, batch_size, accumulate, 1).leaf_rows;
}

// ---- the combine ------------------------------------------------------------------------------

// named, not anonymous: GradientCombiner::Impl (external linkage) holds them
namespace combine {
struct AddTensors {
  Tensor operator()(const Tensor& a, const Tensor& b) const { return kern::add_same_shape(a, b); }
};
using Tree = kern::PairwiseStack<Tensor, AddTensors>;
}  // namespace combine
using combine::AddTensors;
using combine::Tree;

struct GradientCombiner::Impl {
  std::vector<Tensor> params;
  UseGrads grads;                           // per parameter, per use: the pieces and nodes
  Tree loss;                                // the current node's pieces' loss sums
  std::vector<Tensor> node_loss;
  bool in_step = false;
  bool per_block = false;
  std::string mismatch;  // this step's first sum over samples off the batch rule
  DType loss_dtype = DType::f32;

  void clear() {
    grads.clear();
    loss.clear();
    node_loss.clear();
    in_step = false;
  }
};

GradientCombiner::GradientCombiner(std::vector<Tensor> params) : p_(std::make_unique<Impl>()) {
  for (std::size_t i = 0; i < params.size(); ++i)
    BITGRAD_CHECK(params[i].defined() && params[i].requires_grad() && is_floating(params[i].dtype()), "gradient combine", "parameter ", i,
                  " is not a floating-point tensor that requires grad");
  p_->params = std::move(params);
  p_->grads.begin(p_->params.size(), true);
}

GradientCombiner::~GradientCombiner() = default;

void GradientCombiner::reset() { p_->clear(); }
std::int64_t GradientCombiner::pieces() const { return p_->grads.pieces(); }
std::int64_t GradientCombiner::nodes() const { return static_cast<std::int64_t>(p_->node_loss.size()); }

const std::string& GradientCombiner::sample_mismatch() const { return p_->mismatch; }

void GradientCombiner::set_per_block(bool on) {
  BITGRAD_CHECK(!p_->in_step, "gradient combine", "per_block changed in the middle of a step");
  p_->per_block = on;
}
bool GradientCombiner::per_block() const { return p_->per_block; }

void GradientCombiner::backward(const Tensor& loss_sum, double divisor, std::int64_t rows) {
  Impl& p = *p_;
  BITGRAD_CHECK(loss_sum.defined() && loss_sum.numel() == 1 && is_floating(loss_sum.dtype()), "gradient combine",
                "a piece's loss must be one floating-point number (the loss summed over the piece's samples), got ",
                loss_sum.defined() ? loss_sum.shape().str() : std::string("nothing"));
  BITGRAD_CHECK(divisor > 0, "gradient combine", "the divisor is ", divisor, "; expected the batch's samples times the values per sample");
  if (!p.in_step) {
    for (std::size_t i = 0; i < p.params.size(); ++i)
      BITGRAD_CHECK(!p.params[i].grad().defined(), "gradient combine", "parameter ", i, " ", p.params[i].shape().str(),
                    " already holds a gradient at the start of a step; drop it first (optimizer.zero_grad()): adding the step's "
                    "gradient to it would not be the canonical tree (contract T5)");
    p.grads.begin(p.params.size(), !p.per_block);
    p.in_step = true;
    p.loss_dtype = loss_sum.dtype();
    p.mismatch.clear();
  }
  BITGRAD_CHECK(loss_sum.dtype() == p.loss_dtype, "gradient combine", "the pieces' losses are ", dtype_name(p.loss_dtype), " and ",
                dtype_name(loss_sum.dtype()), "; expected one dtype");
  // the training step's own arithmetic (train/step.cpp): S / (B D), then backward, each use of a
  // parameter kept apart
  Tensor L = div(loss_sum, divisor);
  std::optional<autograd::SampleCountCheck> check;
  if (rows > 0) check.emplace(rows);
  const std::vector<std::vector<autograd::Use>> uses = autograd::backward_uses(L, p.params);
  if (check && p.mismatch.empty()) p.mismatch = check->mismatch();
  const std::string problem = p.grads.add_piece(uses, p.params, check.has_value());
  if (p.mismatch.empty()) p.mismatch = problem;
  Tensor s = reshape(loss_sum.detach(), Shape{}).contiguous_copy();
  p.loss.push(s);
}

void GradientCombiner::end_node() {
  Impl& p = *p_;
  BITGRAD_CHECK(p.grads.pieces() > 0, "gradient combine", "a tree node without a piece");
  p.grads.end_node();
  p.node_loss.push_back(p.loss.total());
  p.loss.clear();
}

Tensor GradientCombiner::finish(const StepPlan& plan) {
  Impl& p = *p_;
  BITGRAD_CHECK(p.grads.pieces() == 0, "gradient combine", p.grads.pieces(), " piece(s) after the last node's end (end_node)");
  BITGRAD_CHECK(plan.rank >= 0 && plan.rank < static_cast<int>(plan.rank_nodes.size()) && static_cast<int>(plan.rank_nodes.size()) == plan.world,
                "gradient combine", "a plan of ", plan.rank_nodes.size(), " ranks for a world of ", plan.world);
  const std::size_t mine = plan.rank_nodes[static_cast<std::size_t>(plan.rank)].size();
  BITGRAD_CHECK(p.node_loss.size() == mine, "gradient combine", "this rank ended ", p.node_loss.size(), " tree node(s); the plan gives it ",
                mine);
  const int P = plan.world;
  BITGRAD_CHECK(P == 1 || P == world_size(), "gradient combine", "a plan for ", P, " ranks in a world of ", world_size());
  std::vector<std::vector<Range>> nodes;
  for (const auto& rn : plan.rank_nodes) {
    nodes.emplace_back();
    for (const auto& [b, e] : rn) nodes.back().push_back({b, e});
  }
  std::vector<Range> all;
  for (const auto& n : nodes) all.insert(all.end(), n.begin(), n.end());
  const std::size_t np = p.params.size();

  // what the ranks must agree on: every node's loss sum, and how many uses each parameter had
  std::vector<Tensor> losses;
  std::vector<std::uint32_t> counts(np, 0);
  DType ldt = p.loss_dtype;
  if (P == 1) {
    losses = p.node_loss;
    for (std::size_t i = 0; i < np; ++i) counts[i] = p.grads.uses_of(i);
  } else {
    // per rank: the loss dtype (1 byte, 0 when the rank holds no node), its node losses as
    // doubles (exact for f32 and f64), and each parameter's uses (4 bytes)
    const std::size_t head = 1 + mine * sizeof(double);
    std::string rec(head + np * sizeof(std::uint32_t), '\0');
    rec[0] = mine ? static_cast<char>(1 + static_cast<int>(p.loss_dtype)) : 0;
    for (std::size_t j = 0; j < mine; ++j) {
      const double v = p.node_loss[j].item();
      std::memcpy(rec.data() + 1 + j * sizeof(double), &v, sizeof v);
    }
    for (std::size_t i = 0; i < np; ++i) {
      const std::uint32_t c = p.grads.uses_of(i);
      std::memcpy(rec.data() + head + i * sizeof c, &c, sizeof c);
    }
    const std::vector<std::string> got = Comm::world().allgather(rec, "the step's losses");
    bool have_dtype = false;
    for (int r = 0; r < P; ++r) {
      const std::string& g = got[static_cast<std::size_t>(r)];
      const std::size_t k = nodes[static_cast<std::size_t>(r)].size();
      const std::size_t h = 1 + k * sizeof(double);
      BITGRAD_CHECK(g.size() == h + np * sizeof(std::uint32_t), "data parallel", "rank ", r,
                    " sent a step record of another size (another model or another plan?)");
      if (g[0]) {
        const DType d = static_cast<DType>(g[0] - 1);
        BITGRAD_CHECK(!have_dtype || d == ldt, "data parallel", "the ranks' losses have different dtypes");
        ldt = d;
        have_dtype = true;
      }
      for (std::size_t i = 0; i < np; ++i) {
        std::uint32_t c;
        std::memcpy(&c, g.data() + h + i * sizeof c, sizeof c);
        if (counts[i] && c && c != counts[i] && p.mismatch.empty())
          p.mismatch = "parameter " + std::to_string(i) + " " + p.params[i].shape().str() + " was used " + std::to_string(counts[i]) +
                       " time(s) on one rank and " + std::to_string(c) + " on another";
        counts[i] = std::max(counts[i], c);
      }
    }
    for (int r = 0; r < P; ++r) {
      const std::string& g = got[static_cast<std::size_t>(r)];
      for (std::size_t j = 0; j < nodes[static_cast<std::size_t>(r)].size(); ++j) {
        double v;
        std::memcpy(&v, g.data() + 1 + j * sizeof(double), sizeof v);
        losses.push_back(Tensor::scalar(v, ldt));  // the exact value back in its dtype
      }
    }
  }
  const Tensor loss = evaluate_tree(plan.leaves, all, losses, AddTensors{});
  p.grads.finish(counts, P == 1 ? nullptr : &Comm::world(), nodes, plan.leaves, p.params, "the gradient combine");
  p.clear();
  return loss;
}

}  // namespace bitgrad::dist
