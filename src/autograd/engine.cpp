// The backward pass: collect the nodes reachable from the root, run them in reverse
// creation order, accumulate each input's contributions in the order they arrive.
#include <algorithm>
#include <cstring>
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "autograd/hooks_internal.hpp"
#include "autograd/node.hpp"
#include "bitgrad/autograd.hpp"
#include "kernels/tensor_ops.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
namespace {
std::atomic<std::uint64_t> g_epoch{0};
// Backward from several threads. A walk keeps its state in the graph's nodes (their
// pending gradients), so one graph walked by two threads at once would race: a walk claims its
// nodes (g_walking: node -> the thread walking it; looked up, never iterated) and a node another
// thread is walking is refused with a StateError. Walks of other graphs run side by side (the
// ranks of a test in threads exchange statistics inside their backwards, so they must), and
// their additions into a shared leaf's .grad take g_leaves, one at a time.
std::mutex g_claims, g_leaves;
std::unordered_map<const autograd::Node*, std::thread::id> g_walking;

// The nodes a walk claimed, given back when it ends (or throws), and the nodes it keeps alive
// meanwhile. The claims go first: a node freed while still claimed could be reborn at its address
// in another thread's graph and be refused there (members die after the destructor's body).
struct Claims {
  std::vector<const autograd::Node*> mine;
  std::vector<autograd::NodePtr> hold;
  ~Claims() {
    std::lock_guard<std::mutex> lock(g_claims);
    for (const autograd::Node* n : mine) g_walking.erase(n);
  }
};

// g alone holds its buffer (no other tensor, view or saved value reaches it)
bool sole(const Tensor& g) {
  return g.is_contiguous() && g.offset() == 0 && g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 &&
         g.storage()->bytes() == static_cast<std::size_t>(g.numel()) * dtype_size(g.dtype());
}

// The sum of the contributions in arrival order; into the first one's buffer where it holds it
// alone (the same additions, no new tensor)
void accumulate(Tensor& acc, const Tensor& g) {
  if (!acc.defined()) acc = g;
  else if (sole(acc)) kern::add_into(acc, g);
  else acc = kern::add_same_shape(acc, g);
}

// A node's slices' gradients still waiting (Node::placed) placed and added now, as their
// additions in arrival order would have given: one alone is place_in_zeros' tensor itself.
void settle(autograd::Node* m) {
  if (m->placed.empty()) return;
  const autograd::PlacedGrad& p0 = m->placed[0];
  if (m->placed.size() == 1) {
    m->grad = kern::place_in_zeros(p0.g, p0.full, p0.axis, p0.start, 1);
  } else {
    std::vector<std::pair<Tensor, std::int64_t>> parts;
    for (const autograd::PlacedGrad& p : m->placed) parts.emplace_back(p.g, p.start);
    m->grad = kern::place_parts_in_zeros(parts, p0.full, p0.axis);
  }
  m->placed.clear();
}

// Whether p can wait beside m's waiting parts: the same shape, axis and dtype, a range none of
// them touches.
bool joins(const autograd::Node* m, const autograd::PlacedGrad& p) {
  const std::int64_t len = p.g.shape()[p.axis];
  for (const autograd::PlacedGrad& q : m->placed) {
    if (q.axis != p.axis || q.g.dtype() != p.g.dtype() || q.full != p.full) return false;
    if (p.start < q.start + q.g.shape()[q.axis] && q.start < p.start + len) return false;
  }
  return true;
}

// Ops whose backward hands on the incoming gradient's values, only moved or widened
bool moves_exactly(const char* op) {
  for (const char* m : {"cast", "permute", "transpose", "reshape", "contiguous", "squeeze", "unsqueeze", "flatten"})
    if (std::strcmp(op, m) == 0) return true;
  return false;
}

// Every value of `from` is a value of `to`
bool widens_exactly(DType from, DType to) {
  if (from == to) return true;
  const bool half = from == DType::bf16 || from == DType::f16;
  return (half && (to == DType::f32 || to == DType::f64)) || (from == DType::f32 && to == DType::f64);
}

// A leaf's gradient owns its storage, so in-place updates of it cannot reach another tensor.
Tensor owned(const Tensor& g) {
  if (sole(g)) return g;
  return g.is_contiguous() ? g.contiguous_copy() : kern::contiguous(g);  // a view (a transposed weight's): threads, tiles
}
}  // namespace

bool grad_enabled() { return thread_state().grad_enabled; }
void set_grad_enabled(bool on) { thread_state().grad_enabled = on; }

namespace autograd {

namespace {
// a leaf, its gradient, and the node that delivered it (null: the root is the leaf)
using LeafSink = std::function<void(const std::shared_ptr<TensorImpl>&, const Tensor&, const Node*)>;

Tensor checked_seed(const Tensor& root, const Tensor& seed_in) {
  BITGRAD_CHECK_STATE(root.defined(), "backward", "called on an undefined tensor");
  BITGRAD_CHECK_STATE(root.requires_grad(), "backward", "the tensor does not require grad: no input of its computation has ",
                "requires_grad set (or it was computed under no_grad)");
  BITGRAD_CHECK(is_floating(root.dtype()), "backward", "the tensor has dtype ", dtype_name(root.dtype()), "; expected f32 or f64");
  if (seed_in.defined()) {
    BITGRAD_CHECK(seed_in.shape() == root.shape(), "backward", "the seed gradient has shape ", seed_in.shape().str(),
                  " but the tensor has shape ", root.shape().str());
    BITGRAD_CHECK(seed_in.dtype() == root.dtype(), "backward", "the seed gradient has dtype ", dtype_name(seed_in.dtype()),
                  " but the tensor has dtype ", dtype_name(root.dtype()));
    return seed_in.detach();
  }
  BITGRAD_CHECK_STATE(root.numel() == 1, "backward", "a tensor of shape ", root.shape().str(),
                " is not a scalar: pass a seed gradient of the same shape");
  return Tensor::ones(root.shape(), root.dtype());
}

// Runs the nodes reachable from root in reverse creation order; every gradient that reaches a
// leaf goes to `leaf` in arrival order. Reentrant: a backward function may run another walk
// (activation checkpointing), which marks its own nodes with its own epoch.
void walk(const Tensor& root, const Tensor& seed, bool retain_graph, const LeafSink& leaf) {
  NoGradGuard no_grad;
  SuppressForward quiet;  // the ops of backward functions are not forward events
  const std::uint64_t epoch = ++g_epoch;
  AutogradMeta* rm = meta_if(root);
  if (!rm || !rm->grad_fn) {
    leaf(root.impl_ptr(), seed, nullptr);
    return;
  }
  // nodes reachable from the root, claimed for this thread (a nested walk of this thread may meet
  // its own claims)
  std::vector<Node*> nodes;
  Claims claims;
  {
    std::lock_guard<std::mutex> lock(g_claims);
    const std::thread::id self = std::this_thread::get_id();
    std::vector<Node*> stack{rm->grad_fn.get()};
    rm->grad_fn->visit = epoch;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (const auto it = g_walking.find(n); it != g_walking.end() && it->second != self)
        detail::fail_as<StateError>("backward", "the graph through '", n->op,
                                    "' is in a backward on another thread; run one backward of a graph at a time (retain_graph=true "
                                    "lets a graph be walked again, not by two threads at once)");
      if (n->released)
        detail::fail_as<StateError>("backward", "the graph through '", n->op,
                     "' was already freed by an earlier backward; pass retain_graph=true to the first call");
      nodes.push_back(n);
      for (int i = 0; i < n->n_inputs; ++i) {
        Node* p = n->input(i).node.get();
        if (p && p->visit != epoch) {
          p->visit = epoch;
          stack.push_back(p);
        }
      }
    }
    for (Node* n : nodes)
      if (g_walking.emplace(n, self).second) claims.mine.push_back(n);
  }
  // ties (ops of two threads with no path between them) keep the order found from the root
  std::stable_sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->seq > b->seq; });
  // keep the nodes alive while we walk them even if a release drops the last edge
  claims.hold = std::vector<NodePtr>(nodes.begin(), nodes.end());
  rm->grad_fn->grad = seed;
  std::vector<Tensor> gin;
  std::vector<std::vector<Tensor>> parts;
  auto deliver = [&](Node* n, int i, const Tensor& g) {
    Edge& e = n->input(i);
    if (!e.needs_grad() || !g.defined()) return;
    BITGRAD_CHECK(g.shape() == n->input_shape(i), n->op, "internal: gradient of input ", i, " has shape ", g.shape().str(),
                  ", expected ", n->input_shape(i).str());
    if (op_hook_active()) emit_backward(n->op, g, n->site, n->label, i);
    if (e.node) {
      settle(e.node.get());
      accumulate(e.node->grad, g);
    } else {
      leaf(e.leaf, g, n);
    }
  };
  // a slice's gradient: waits in the node it reaches while only such parts, on disjoint ranges,
  // have arrived there; otherwise (a leaf, an op hook, a node with other gradients) placed now
  auto deliver_placed = [&](Node* n, int i, autograd::PlacedGrad& p) {
    Edge& e = n->input(i);
    if (!e.needs_grad() || !p.g.defined()) return;
    const Shape& full = n->input_shape(i);
    bool fits = p.axis >= 0 && p.axis < full.ndim() && p.g.ndim() == full.ndim() && p.start >= 0 &&
                p.start + p.g.shape()[p.axis] <= full[p.axis];
    for (int d = 0; fits && d < full.ndim(); ++d) fits = d == p.axis || p.g.shape()[d] == full[d];
    BITGRAD_CHECK(fits, n->op, "internal: a slice's gradient ", p.g.shape().str(), " at ", p.start, " of axis ", p.axis,
                  " does not fit input ", i, " of shape ", full.str());
    p.full = full;
    Node* m = e.node.get();
    if (m && !op_hook_active() && !m->grad.defined() && joins(m, p)) {
      m->placed.push_back(std::move(p));
      return;
    }
    deliver(n, i, kern::place_in_zeros(p.g, full, p.axis, p.start, 1));
  };
  std::vector<std::vector<autograd::PlacedGrad>> placed;
  try {
    for (Node* n : nodes) {
      settle(n);
      if (!n->grad.defined()) continue;
      gin.assign(static_cast<std::size_t>(n->n_inputs), Tensor());
      parts.assign(static_cast<std::size_t>(n->n_inputs), {});
      placed.assign(static_cast<std::size_t>(n->n_inputs), {});
      // the gradient parts the backward function hands over one by one (add_gradient_part,
      // add_placed_gradient), per input
      std::vector<std::vector<Tensor>>* outer = thread_state().backward_parts;
      std::vector<std::vector<autograd::PlacedGrad>>* outer_placed = thread_state().placed_parts;
      thread_state().backward_parts = &parts;
      thread_state().placed_parts = &placed;
      // under a sample check: a cast's gradient widened exactly from one marked sum is that sum
      // (a bf16 or f16 product's gradient reaching an f32 parameter)
      SampleCountCheck* check = SampleCountCheck::active();
      // and so is a gradient moved exactly (a transpose's, a reshape's) from one
      const bool widen = check && check->is_summed(n->grad) && moves_exactly(n->op);
      const DType from = n->grad.dtype();
      try {
        n->backward(*n, n->grad, gin.data());
      } catch (...) {
        thread_state().backward_parts = outer;
        thread_state().placed_parts = outer_placed;
        throw;
      }
      thread_state().backward_parts = outer;
      thread_state().placed_parts = outer_placed;
      if (widen)
        for (int i = 0; i < n->n_inputs; ++i) {
          const Tensor& g = gin[static_cast<std::size_t>(i)];
          if (g.defined() && widens_exactly(from, g.dtype())) check->mark(g);
        }
      n->grad = Tensor();
      for (int i = 0; i < n->n_inputs; ++i) {
        // parts first, in the order handed over, then the slices' parts, then the gradient
        // returned (a function uses one of them)
        for (const Tensor& g : parts[static_cast<std::size_t>(i)]) deliver(n, i, g);
        for (autograd::PlacedGrad& p : placed[static_cast<std::size_t>(i)]) deliver_placed(n, i, p);
        deliver(n, i, gin[static_cast<std::size_t>(i)]);
      }
      if (!retain_graph) reset_node(n);
    }
  } catch (...) {
    // a backward that threw leaves nothing waiting in this walk's nodes: a retained graph walked
    // again starts from its seed alone, as a fresh one does
    for (Node* n : nodes) {
      n->grad = Tensor();
      n->placed.clear();
    }
    throw;
  }
}
}  // namespace

namespace {
// a walk's sums per leaf added to their .grad
void add_to_leaves(std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>>& sums) {
  const std::lock_guard<std::mutex> lock(g_leaves);  // a leaf another thread's backward adds to as well
  for (auto& [impl, add] : sums) {
    Tensor lt(impl);
    AutogradMeta& m = meta(lt);
    m.grad = m.grad.defined() ? kern::add_same_shape(m.grad, add) : owned(add);
  }
}
}  // namespace

void run_backward(const Tensor& root, const Tensor& seed_in, bool retain_graph) {
  const Tensor seed = checked_seed(root, seed_in);
  // this walk's sum per leaf, kept here (not in the leaf, which another thread's walk may reach),
  // in order of first contribution; the index is a lookup by identity, never iterated
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> sums;
  std::unordered_map<const TensorImpl*, std::size_t> at;
  walk(root, seed, retain_graph, [&](const std::shared_ptr<TensorImpl>& impl, const Tensor& g, const Node*) {
    const auto [it, fresh] = at.emplace(impl.get(), sums.size());
    if (fresh) sums.emplace_back(impl, Tensor());
    accumulate(sums[it->second].second, g);
  });
  add_to_leaves(sums);
}

std::vector<std::vector<Use>> backward_uses(const Tensor& root, const std::vector<Tensor>& params, bool retain_graph) {
  const Tensor seed = checked_seed(root, Tensor());
  std::vector<std::vector<Use>> out(params.size());
  std::unordered_map<const TensorImpl*, std::size_t> param_at;  // looked up by identity, never iterated
  for (std::size_t i = 0; i < params.size(); ++i) param_at.emplace(params[i].impl_ptr().get(), i);
  std::vector<std::pair<std::shared_ptr<TensorImpl>, Tensor>> sums;  // the other leaves, as run_backward
  std::unordered_map<const TensorImpl*, std::size_t> at;
  const SampleCountCheck* check = SampleCountCheck::active();
  walk(root, seed, retain_graph, [&](const std::shared_ptr<TensorImpl>& impl, const Tensor& g, const Node* n) {
    if (const auto p = param_at.find(impl.get()); p != param_at.end()) {
      Use u;
      u.grad = g;
      u.proven = check && check->is_summed(g);
      u.op = n ? n->op : "backward";
      if (n) u.label = n->label;
      out[p->second].push_back(std::move(u));
      return;
    }
    const auto [it, fresh] = at.emplace(impl.get(), sums.size());
    if (fresh) sums.emplace_back(impl, Tensor());
    accumulate(sums[it->second].second, g);
  });
  add_to_leaves(sums);
  return out;
}

Tensor sum_uses(std::vector<Use> uses) {
  Tensor acc;
  for (Use& u : uses) {
    if (!u.grad.defined()) continue;
    if (!acc.defined()) acc = std::move(u.grad);  // alone: no copy where it holds its storage
    else acc = kern::add_same_shape(acc, u.grad);
  }
  return acc.defined() ? owned(acc) : acc;
}

bool add_placed_gradient(int input, const Tensor& g, int axis, std::int64_t start) {
  std::vector<std::vector<PlacedGrad>>* placed = thread_state().placed_parts;
  if (!placed) return false;
  BITGRAD_CHECK(input >= 0 && static_cast<std::size_t>(input) < placed->size(), "backward", "internal: a placed gradient for input ", input);
  (*placed)[static_cast<std::size_t>(input)].push_back(PlacedGrad{g, axis, start, Shape{}});
  return true;
}

void add_gradient_part(int input, const Tensor& g) {
  BITGRAD_CHECK(thread_state().backward_parts && input >= 0 && static_cast<std::size_t>(input) < thread_state().backward_parts->size(), "backward",
                "internal: a gradient part outside a backward function or for input ", input);
  (*thread_state().backward_parts)[static_cast<std::size_t>(input)].push_back(g);
}

std::vector<std::vector<Tensor>> grad_parts(const Tensor& root, const Tensor& seed_in, const std::vector<Tensor>& inputs,
                                            std::string* unlisted, bool retain_graph) {
  const Tensor seed = checked_seed(root, seed_in);
  std::vector<std::vector<Tensor>> out(inputs.size());
  walk(root, seed, retain_graph, [&](const std::shared_ptr<TensorImpl>& impl, const Tensor& g, const Node*) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].impl_ptr().get() == impl.get()) {
        out[i].push_back(g);
        return;
      }
    if (unlisted && unlisted->empty()) *unlisted = Tensor(impl).shape().str();
  });
  return out;
}

std::vector<Tensor> grad(const Tensor& root, const Tensor& seed_in, const std::vector<Tensor>& inputs, bool retain_graph,
                         std::string* unlisted) {
  const Tensor seed = checked_seed(root, seed_in);
  std::vector<Tensor> out(inputs.size());
  walk(root, seed, retain_graph, [&](const std::shared_ptr<TensorImpl>& impl, const Tensor& g, const Node*) {
    // a lookup by identity; the order of the sums is the arrival order, as in run_backward
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].impl_ptr().get() == impl.get()) {
        accumulate(out[i], g);
        return;
      }
    if (unlisted && unlisted->empty()) *unlisted = Tensor(impl).shape().str();
  });
  return out;
}

}  // namespace autograd
}  // namespace bitgrad
