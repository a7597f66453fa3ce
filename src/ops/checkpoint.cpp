// Activation checkpointing (contract T9, docs/numerics.md §22).
// Shapes: y = fn(x), whatever fn makes of x; inputs of the node: x, then the parameters.
// Forward: fn runs without recording, so nothing inside keeps saved tensors; the node keeps x.
// Backward: fn runs again on x (detached, a leaf of its own) with recording on, and the
// gradient g goes back through that graph (autograd::grad_parts): the same nodes in the same
// relative order as without checkpointing. Every contribution that reaches x or a parameter
// leaves the node on its own, in arrival order, so each sum keeps its order (T9) even for a
// tensor also used outside the segment.
#include <functional>
#include <memory>
#include <string>

#include "autograd/hooks_internal.hpp"
#include "autograd/node.hpp"
#include "ops/op_util.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct RecomputeScope {
  RecomputeScope() { ++thread_state().recompute_depth; }
  ~RecomputeScope() { --thread_state().recompute_depth; }
};

struct Recompute {
  std::function<Tensor(const Tensor&)> fn;
  std::vector<Tensor> params;
  std::string label;  // the forward's label, for the recomputed ops' trace events
};

void checkpoint_bw(Node& n, const Tensor& g, Tensor*) {
  const auto& r = *static_cast<const Recompute*>(n.owned.get());
  Tensor x = n.saved_tensor(0).detach();
  if (n.in[0].needs_grad()) x.set_requires_grad(true);
  Tensor y;
  {
    autograd::LabelReplace label(r.label);
    RecomputeScope recomputing;
    const bool prev = grad_enabled();
    set_grad_enabled(true);  // the engine runs backward functions without recording
    try {
      y = r.fn(x);
    } catch (...) {
      set_grad_enabled(prev);
      throw;
    }
    set_grad_enabled(prev);
  }
  BITGRAD_CHECK(y.shape() == g.shape() && y.dtype() == g.dtype(), "checkpoint",
                "the recomputed forward gave ", dtype_name(y.dtype()), " ", y.shape().str(), ", the first one ",
                dtype_name(g.dtype()), " ", g.shape().str(), ": the segment is not a function of its input");
  if (!y.requires_grad()) return;  // nothing inside depends on x or a parameter
  std::vector<Tensor> wrt;
  wrt.reserve(r.params.size() + 1);
  wrt.push_back(x);
  wrt.insert(wrt.end(), r.params.begin(), r.params.end());
  std::string unlisted;
  std::vector<std::vector<Tensor>> parts = autograd::grad_parts(y, g, wrt, &unlisted);
  BITGRAD_CHECK(unlisted.empty(), "checkpoint", "the segment uses a tensor of shape ", unlisted,
                " that requires grad but is neither its input nor one of its parameters: its gradient would be lost");
  // each contribution on its own, in arrival order: the receiving tensor adds them up in the
  // order it would have without the checkpoint, also when it is used outside the segment too
  for (std::size_t i = 0; i < parts.size(); ++i)
    for (const Tensor& part : parts[i]) autograd::add_gradient_part(static_cast<int>(i), part);
}
}  // namespace

bool recomputing() { return thread_state().recompute_depth > 0; }

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params, CallSite site) {
  BITGRAD_CHECK(static_cast<bool>(fn), "checkpoint", "the segment function is empty");
  BITGRAD_CHECK(x.defined(), "checkpoint", "the input tensor is undefined");
  Tensor y;
  {
    NoGradGuard no_grad;  // nothing inside is recorded, so nothing inside is kept
    y = fn(x);
  }
  BITGRAD_CHECK(y.defined(), "checkpoint", "the segment function returned an undefined tensor");
  std::vector<Tensor> in;
  in.reserve(params.size() + 1);
  in.push_back(x);
  in.insert(in.end(), params.begin(), params.end());
  if (Node* n = ops::record("checkpoint", checkpoint_bw, in, y, site)) {
    n->save(0, x);
    n->owned = std::make_shared<Recompute>(Recompute{std::move(fn), params, current_label()});
  }
  return y;
}

}  // namespace bitgrad
