// Blocks of samples run apart (numerics.md §42): a model whose samples are kept apart without the
// batch rule on axis 0 (an imported graph analysed `per_block`) has the bits of its 32-sample
// blocks each run as its own forward and backward, combined by the pairwise tree.
// Shapes: x [N, ...] -> y [N, ...] (fn's output per block, concatenated on axis 0); inputs of the
// node: x, then the parameters.
// Forward: fn(x_b, first row) per block with recording on, each on a detached leaf x_b, so every
// block is a graph of its own; the node keeps the blocks' outputs.
// Backward: each block's graph on its own from its rows of g (autograd::grad_parts); a
// parameter's contributions within a block added in arrival order (what the block's own backward
// leaves in .grad), then the blocks combined by the pairwise tree (§2): the bits of running the
// blocks as pieces (bitgrad.accumulate, the training step). x's gradient: the blocks' rows side by
// side (no sum across samples).
#include <functional>
#include <memory>
#include <string>

#include "autograd/node.hpp"
#include "kernels/pairwise_stack.hpp"
#include "kernels/tensor_ops.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct Blocks {
  std::vector<Tensor> x, y;  // per block: its input leaf and its output (with its graph)
  std::vector<std::int64_t> first;
  std::vector<Tensor> params;
};

struct AddTensors {
  Tensor operator()(const Tensor& a, const Tensor& b) const { return kern::add_same_shape(a, b); }
};

void per_block_bw(Node& n, const Tensor& g, Tensor* gi) {
  const auto& b = *static_cast<const Blocks*>(n.owned.get());
  const std::size_t np = b.params.size();
  std::vector<kern::PairwiseStack<Tensor, AddTensors>> trees(np);
  std::vector<Tensor> gx(b.x.size());
  for (std::size_t k = 0; k < b.x.size(); ++k) {
    const std::int64_t rows = b.x[k].shape()[0];
    const Tensor gk = kern::contiguous(slice(g, 0, b.first[k], b.first[k] + rows));
    std::vector<std::vector<Tensor>> parts;
    if (b.y[k].requires_grad()) {
      std::vector<Tensor> wrt;
      wrt.push_back(b.x[k]);
      wrt.insert(wrt.end(), b.params.begin(), b.params.end());
      std::string unlisted;
      {
        // a block's own sums are not the piece's sums over samples: checked by the tree below
        autograd::SampleCountCheck inside(0);
        parts = autograd::grad_parts(b.y[k], gk, wrt, &unlisted, true);
      }
      BITGRAD_CHECK(unlisted.empty(), "per_block", "a block uses a tensor of shape ", unlisted,
                    " that requires grad but is neither its input nor one of its parameters: its gradient would be lost");
    } else {
      parts.resize(np + 1);
    }
    auto sum = [](const std::vector<Tensor>& ps) {
      std::vector<autograd::Use> us(ps.size());
      for (std::size_t i = 0; i < ps.size(); ++i) us[i].grad = ps[i];
      return autograd::sum_uses(std::move(us));
    };
    gx[k] = sum(parts[0]);
    for (std::size_t i = 0; i < np; ++i) {
      const Tensor& p = b.params[i];
      // a block that did not reach the parameter adds zeros: the tree keeps its shape
      Tensor s = sum(parts[i + 1]);
      trees[i].push(s.defined() ? s : Tensor::zeros(p.shape(), p.dtype()));
    }
  }
  if (n.in[0].needs_grad()) {
    for (std::size_t k = 0; k < gx.size(); ++k)
      if (!gx[k].defined()) gx[k] = Tensor::zeros(b.x[k].shape(), b.x[k].dtype());
    gi[0] = gx.size() == 1 ? gx[0] : concat(gx, 0);
  }
  const std::int64_t N = n.in_shape[0][0];
  for (std::size_t i = 0; i < np; ++i) {
    if (!n.input(static_cast<int>(i) + 1).needs_grad()) continue;
    gi[i + 1] = trees[i].total();
    // the tree over the node's whole blocks: for pieces of whole aligned blocks, a complete
    // subtree of the batch's, as a batch-rule sum is (numerics §10, "Uses")
    autograd::SampleCountCheck::summed(gi[i + 1], N);
  }
}
}  // namespace

Tensor per_block(const std::function<Tensor(const Tensor&, std::int64_t)>& fn, const Tensor& x, const std::vector<Tensor>& params,
                 std::int64_t block, CallSite site) {
  BITGRAD_CHECK(static_cast<bool>(fn), "per_block", "the block function is empty");
  BITGRAD_CHECK(x.defined() && x.ndim() > 0, "per_block", "the input must have a sample axis, got ",
                x.defined() ? x.shape().str() : std::string("nothing"));
  BITGRAD_CHECK(block > 0, "per_block", "a block of ", block, " rows; expected at least 1");
  const std::int64_t N = x.shape()[0];
  auto blocks = std::make_shared<Blocks>();
  blocks->params = params;
  std::vector<Tensor> ys;
  const bool record = grad_enabled();
  for (std::int64_t r0 = 0; r0 < N || (N == 0 && r0 == 0); r0 += block) {
    const std::int64_t r1 = std::min(N, r0 + block);
    Tensor xb = slice(x, 0, r0, r1).detach();
    if (record && x.requires_grad()) xb.set_requires_grad(true);
    Tensor yb = fn(xb, r0);
    BITGRAD_CHECK(yb.defined() && yb.ndim() > 0 && yb.shape()[0] == r1 - r0, "per_block", "the block of rows [", r0, ", ", r1,
                  ") gave ", yb.defined() ? yb.shape().str() : std::string("nothing"), "; expected its ", r1 - r0, " samples on axis 0");
    blocks->x.push_back(xb);
    blocks->y.push_back(yb);
    blocks->first.push_back(r0);
    ys.push_back(yb.detach());
    if (N == 0) break;
  }
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ys.size() == 1 ? ys[0].contiguous_copy() : concat(ys, 0);
  }
  std::vector<Tensor> in;
  in.reserve(params.size() + 1);
  in.push_back(x);
  in.insert(in.end(), params.begin(), params.end());
  if (Node* n = ops::record("per_block", per_block_bw, in, y, site)) n->owned = std::move(blocks);
  return y;
}

}  // namespace bitgrad
