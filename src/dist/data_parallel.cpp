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
  std::vector<Tree> trees;                  // the current node's pieces, per parameter
  Tree loss;                                // and their loss sums
  std::vector<char> reached;                // per parameter: a piece of this step gave it a gradient
  std::vector<std::vector<Tensor>> node_grads;  // per ended node, per parameter
  std::vector<Tensor> node_loss;
  std::int64_t pieces = 0;
  bool in_step = false;
  std::string mismatch;  // this step's first sum over samples off the batch rule
  DType loss_dtype = DType::f32;

  void clear() {
    for (Tree& t : trees) t.clear();
    loss.clear();
    std::fill(reached.begin(), reached.end(), 0);
    node_grads.clear();
    node_loss.clear();
    pieces = 0;
    in_step = false;
  }
};

GradientCombiner::GradientCombiner(std::vector<Tensor> params) : p_(std::make_unique<Impl>()) {
  for (std::size_t i = 0; i < params.size(); ++i)
    BITGRAD_CHECK(params[i].defined() && params[i].requires_grad() && is_floating(params[i].dtype()), "gradient combine", "parameter ", i,
                  " is not a floating-point tensor that requires grad");
  p_->params = std::move(params);
  p_->trees.resize(p_->params.size());
  p_->reached.assign(p_->params.size(), 0);
}

GradientCombiner::~GradientCombiner() = default;

void GradientCombiner::reset() { p_->clear(); }
std::int64_t GradientCombiner::pieces() const { return p_->pieces; }
std::int64_t GradientCombiner::nodes() const { return static_cast<std::int64_t>(p_->node_loss.size()); }

const std::string& GradientCombiner::sample_mismatch() const { return p_->mismatch; }

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
    p.in_step = true;
    p.loss_dtype = loss_sum.dtype();
    p.mismatch.clear();
  }
  BITGRAD_CHECK(loss_sum.dtype() == p.loss_dtype, "gradient combine", "the pieces' losses are ", dtype_name(p.loss_dtype), " and ",
                dtype_name(loss_sum.dtype()), "; expected one dtype");
  // the training step's own arithmetic (train/step.cpp): S / (B D), then backward
  Tensor L = div(loss_sum, divisor);
  std::optional<autograd::SampleCountCheck> check;
  if (rows > 0) check.emplace(rows);
  L.backward();
  if (check && p.mismatch.empty()) p.mismatch = check->mismatch();
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    Tensor& t = p.params[i];
    Tensor g = t.grad();
    if (g.defined()) {
      // the first gradient of a parameter in this node: the pieces before it gave zeros
      if (!p.reached[i])
        for (std::int64_t k = 0; k < p.pieces; ++k) p.trees[i].push(Tensor::zeros(t.shape(), t.dtype()));
      p.reached[i] = 1;
      p.trees[i].push(g);
    } else if (p.reached[i]) {
      p.trees[i].push(Tensor::zeros(t.shape(), t.dtype()));
    }
    t.zero_grad();
  }
  Tensor s = reshape(loss_sum.detach(), Shape{}).contiguous_copy();
  p.loss.push(s);
  ++p.pieces;
}

void GradientCombiner::end_node() {
  Impl& p = *p_;
  BITGRAD_CHECK(p.pieces > 0, "gradient combine", "a tree node without a piece");
  std::vector<Tensor> g(p.params.size());
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    g[i] = p.trees[i].total();  // undefined when no piece of this node reached it
    p.trees[i].clear();
  }
  // a parameter first reached in a later node: this node's value is zeros (below, at finish)
  p.node_grads.push_back(std::move(g));
  p.node_loss.push_back(p.loss.total());
  p.loss.clear();
  p.pieces = 0;
}

Tensor GradientCombiner::finish(const StepPlan& plan) {
  Impl& p = *p_;
  BITGRAD_CHECK(p.pieces == 0, "gradient combine", p.pieces, " piece(s) after the last node's end (end_node)");
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

  // what the ranks must agree on: every node's loss sum, and which parameters have a gradient
  std::vector<Tensor> losses;
  std::vector<char> has(np, 0);
  DType ldt = p.loss_dtype;
  if (P == 1) {
    losses = p.node_loss;
    for (std::size_t i = 0; i < np; ++i) has[i] = p.reached[i];
  } else {
    // per rank: the loss dtype (1 byte, 0 when the rank holds no node), its node losses as
    // doubles (exact for f32 and f64), and a byte per parameter
    std::string rec(1 + mine * sizeof(double) + np, '\0');
    rec[0] = mine ? static_cast<char>(1 + static_cast<int>(p.loss_dtype)) : 0;
    for (std::size_t j = 0; j < mine; ++j) {
      const double v = p.node_loss[j].item();
      std::memcpy(rec.data() + 1 + j * sizeof(double), &v, sizeof v);
    }
    for (std::size_t i = 0; i < np; ++i) rec[1 + mine * sizeof(double) + i] = p.reached[i];
    const std::vector<std::string> got = Comm::world().allgather(rec, "the step's losses");
    bool have_dtype = false;
    for (int r = 0; r < P; ++r) {
      const std::string& g = got[static_cast<std::size_t>(r)];
      const std::size_t k = nodes[static_cast<std::size_t>(r)].size();
      BITGRAD_CHECK(g.size() == 1 + k * sizeof(double) + np, "data parallel", "rank ", r,
                    " sent a step record of another size (another model or another plan?)");
      if (g[0]) {
        const DType d = static_cast<DType>(g[0] - 1);
        BITGRAD_CHECK(!have_dtype || d == ldt, "data parallel", "the ranks' losses have different dtypes");
        ldt = d;
        have_dtype = true;
      }
      for (std::size_t i = 0; i < np; ++i) has[i] |= g[1 + k * sizeof(double) + i];
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

  auto node_value = [&](std::size_t j, std::size_t i) {
    const Tensor& g = p.node_grads[j][i];
    return g.defined() ? g : Tensor::zeros(p.params[i].shape(), p.params[i].dtype());
  };
  if (P == 1) {
    for (std::size_t i = 0; i < np; ++i) {
      if (!has[i]) continue;
      std::vector<Tensor> vals;
      for (std::size_t j = 0; j < mine; ++j) vals.push_back(node_value(j, i));
      p.params[i].set_grad(evaluate_tree(plan.leaves, all, vals, AddTensors{}));
    }
  } else {
    // every node's gradients as one flat vector (reached parameters in order), combined by the
    // tree across ranks
    std::int64_t len = 0;
    DType dt = DType::f32;
    bool first = true;
    for (std::size_t i = 0; i < np; ++i)
      if (has[i]) {
        const Tensor& t = p.params[i];
        BITGRAD_CHECK(first || t.dtype() == dt, "data parallel", "parameters of different dtypes (", dtype_name(dt), ", ",
                      dtype_name(t.dtype()), ") are not supported");
        dt = t.dtype();
        first = false;
        len += t.numel();
      }
    std::vector<Tensor> flat;
    for (std::size_t j = 0; j < mine; ++j) {
      Tensor f = Tensor::zeros(Shape{len}, dt);
      std::int64_t off = 0;
      for (std::size_t i = 0; i < np; ++i) {
        if (!has[i]) continue;
        const Tensor& g = p.node_grads[j][i];
        if (g.defined()) Tensor::view_of(f, g.shape(), contiguous_strides(g.shape()), off).copy_from(g);
        off += p.params[i].numel();
      }
      flat.push_back(f);
    }
    const Tensor total = tree_allreduce(Comm::world(), nodes, plan.leaves, flat, len, dt, "the gradient combine");
    std::int64_t off = 0;
    for (std::size_t i = 0; i < np; ++i) {
      if (!has[i]) continue;
      Tensor& t = p.params[i];
      Tensor g = Tensor::empty(t.shape(), dt);
      g.copy_from(Tensor::view_of(total, t.shape(), contiguous_strides(t.shape()), off));
      t.set_grad(g);
      off += t.numel();
    }
  }
  p.clear();
  return loss;
}

}  // namespace bitgrad::dist
