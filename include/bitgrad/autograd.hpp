// Reverse-mode autograd, define-by-run. Every differentiable op records a node numbered in
// creation order; backward() runs the nodes reachable from its root in reverse creation
// order. A tensor used by several consumers receives their gradient contributions in that
// same reverse creation order (the latest consumer's first): g = c_last; g = g + c_prev; ...
// Within one node, inputs are visited in argument order. Nothing keyed by pointer or hash
// decides any order. Leaf gradients accumulate across backward calls: grad = grad + new.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bitgrad/tensor.hpp"

namespace bitgrad {

bool grad_enabled();
void set_grad_enabled(bool on);

// Disables recording in a scope (evaluation, optimizer updates).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// Where an op was called from. Like std::source_location::current() (which Clang 14 cannot
// compile with libstdc++ 12), taken as a defaulted last argument of every op.
class CallSite {
 public:
  const char* file = "";
  int line = 0;
  constexpr CallSite() = default;
  static constexpr CallSite current(const char* f = __builtin_FILE(), int l = __builtin_LINE()) noexcept {
    return CallSite(f, l, Tag{});
  }

 private:
  // only current() makes one, so a braced list such as sum(x, {0, 2}) never converts to a site
  struct Tag {};
  constexpr CallSite(const char* f, int l, Tag) : file(f), line(l) {}
};

// A name for the ops computed in a scope (modules push their path, users what they like);
// nested scopes join with '/'. Shown in op traces and anomaly reports.
class LabelScope {
 public:
  explicit LabelScope(const std::string& name);
  ~LabelScope();
  LabelScope(const LabelScope&) = delete;
  LabelScope& operator=(const LabelScope&) = delete;

 private:
  const std::string* before_;  // the enclosing scope's label, put back at the end
  std::string label_;
};
const std::string& current_label();

namespace autograd {
// Observes every op's output (forward) and every gradient an op produces for an input
// (backward). One hook per thread; instruments install it (op traces, anomaly detection).
struct OpEvent {
  const char* op;
  const Tensor& value;
  CallSite site;
  const std::string& label;
  bool backward;
  int input;  // backward: which input the gradient is for
};
using OpHook = void (*)(void* ctx, const OpEvent& e);
void set_op_hook(OpHook hook, void* ctx);  // nullptr to remove
bool op_hook_active();
// Removes this thread's hook for a scope and puts it back after (work the hook must not see:
// the float64 shadow's steps).
class OpHookPause {
 public:
  OpHookPause();
  ~OpHookPause();
  OpHookPause(const OpHookPause&) = delete;
  OpHookPause& operator=(const OpHookPause&) = delete;

 private:
  OpHook hook_;
  void* ctx_;
};
void emit_forward(const char* op, const Tensor& out, CallSite site);

// What a backward's sums over samples took (numerics §42). Installed around the
// backward of a piece of `rows` samples (dist::GradientCombiner: bitgrad.accumulate, Accumulator,
// DataParallel), every sum a gradient takes over the leading axis by the batch rule (a weight's,
// a bias's, a norm's affine parameters', an embedding's, a broadcast's) reports how many entries
// it took as samples; a count other than `rows` cannot be the batch rule over the piece's samples
// (a layer run sequence-first, [T, N, D], sums T), nor can a 1-d sum of `rows` entries (the row
// rule). The first such sum is kept. A leading axis whose length happens to equal `rows` cannot
// be told apart from the samples by this check.
class SampleCountCheck {
 public:
  explicit SampleCountCheck(std::int64_t rows);
  ~SampleCountCheck();
  SampleCountCheck(const SampleCountCheck&) = delete;
  SampleCountCheck& operator=(const SampleCountCheck&) = delete;
  const std::string& mismatch() const { return mismatch_; }  // "" when every sum took `rows`

  // ops: a sum over `count` leading entries of a tensor of shape `of`, by the batch rule (rule)
  // or the row rule (!rule)
  static void note(const char* what, std::int64_t count, const Shape& of, bool rule = true);
  // ops: `result` is one sum over `count` samples by the batch rule (a parameter's whole gradient
  // from one op). Kept while the check lives; a gradient that shares its storage (a view, the
  // result itself) is such a sum, element by element (numerics.md §10, "Uses").
  static void summed(const Tensor& result, std::int64_t count);
  // Whether g is (a view of) a result marked by summed() with the piece's count.
  bool is_summed(const Tensor& g) const;
  // Marks g as such a sum too (the engine: a gradient widened exactly from a marked one).
  void mark(const Tensor& g);
  std::int64_t rows() const { return rows_; }
  static SampleCountCheck* active();

 private:
  std::int64_t rows_;
  std::string mismatch_;
  SampleCountCheck* outer_;
  std::vector<std::shared_ptr<Storage>> sums_;  // held, so no address is reused while the check lives
};

// One contribution that reached a parameter in a backward: a use of it (numerics.md §10,
// "Uses"). `proven`: under a SampleCountCheck, one sum over the piece's samples by the batch
// rule (or a view of one, or one widened exactly), so the same use of every piece combines by
// the tree into the whole batch's.
struct Use {
  Tensor grad;
  bool proven = false;
  const char* op = "";  // the op that delivered it
  std::string label;
};
// Backward of root (seed as Tensor::backward) in which the contributions that reach `params`
// are returned per parameter, each apart, in arrival order, and not added to .grad; every other
// leaf receives its gradient in .grad as backward() gives.
std::vector<std::vector<Use>> backward_uses(const Tensor& root, const std::vector<Tensor>& params, bool retain_graph = false);
// The uses added in arrival order (g = u0; g = g + u1; ...): what backward() puts into a .grad
// that held none, in storage of its own. Undefined for no use.
Tensor sum_uses(std::vector<Use> uses);

// Number of live graph nodes in this process (for tests and leak checks).
std::size_t live_nodes();
// Name of the op that produced t ("" for a leaf).
const char* producer(const Tensor& t);

// Gradients of root (seeded with `seed`, or 1 for an undefined seed and a scalar root) with
// respect to `inputs`, in their order (undefined where no gradient arrives), without touching
// any tensor's .grad. The nodes run and the contributions add up in the order of backward().
// `unlisted`, if given, receives the shape of the first leaf that got a gradient but is not
// among `inputs` (its gradient is dropped). Callable from a backward function.
std::vector<Tensor> grad(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs, bool retain_graph = false,
                         std::string* unlisted = nullptr);
}  // namespace autograd

}  // namespace bitgrad
