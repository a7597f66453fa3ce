// Reverse-mode autograd, define-by-run. Every differentiable op records a node numbered in
// creation order; backward() runs the nodes reachable from its root in reverse creation
// order. A tensor used by several consumers receives their gradient contributions in that
// same reverse creation order (the latest consumer's first): g = c_last; g = g + c_prev; ...
// Within one node, inputs are visited in argument order. Nothing keyed by pointer or hash
// decides any order. Leaf gradients accumulate across backward calls: grad = grad + new.
#pragma once

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

namespace autograd {
// Number of live graph nodes in this process (for tests and leak checks).
std::size_t live_nodes();
// Name of the op that produced t ("" for a leaf).
const char* producer(const Tensor& t);
}  // namespace autograd

}  // namespace bitgrad
