// One object per thread holds what a thread's execution reads besides its arguments: its
// context's backend, the memory budget, grad mode, the op label, hook and clock, the sample-count
// check, the batch-statistics exchange, the recompute depth. It sits below every room that uses
// it: a field's type is declared here, never included, and each room reads and writes its own
// fields alone. Scopes save the field they change and put back what they found, so nesting and
// two sessions on two threads never see each other's state. The object is trivially
// destructible and constant-initialised: reaching it is one thread-pointer load, no guard.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bitgrad {
class Tensor;
namespace kern {
struct Backend;
}
namespace memory {
class Budget;
}
namespace autograd {
struct OpEvent;
class SampleCountCheck;
struct PlacedGrad;
}  // namespace autograd
class BatchStatsExchange;

struct ThreadState {
  // kernels: the innermost ExecScope's backend (null: the default context's); a pool worker
  // inside a parallel region
  kern::Backend* backend = nullptr;
  bool in_parallel = false;
  // tensor: the innermost memory::Budget that new storage counts against
  memory::Budget* budget = nullptr;
  // autograd: grad mode; the label of the innermost LabelScope (null: ""); the op hook, its
  // context and how many scopes suppress its forward events; the sample-count check; a
  // backward's per-input gradient parts while a node's backward runs
  bool grad_enabled = true;
  const std::string* label = nullptr;
  void (*hook)(void*, const autograd::OpEvent&) = nullptr;
  void* hook_ctx = nullptr;
  int suppress_forward = 0;
  autograd::SampleCountCheck* sample_check = nullptr;
  std::vector<std::vector<Tensor>>* backward_parts = nullptr;
  std::vector<std::vector<autograd::PlacedGrad>>* placed_parts = nullptr;  // slices' gradients, not yet placed
  // ops: the op clock (a node's creation number: the backward walk's order), the exchange a
  // training-mode batch_norm gets the whole batch's statistics from, checkpoint segments being
  // recomputed
  std::uint64_t op_clock = 0;
  BatchStatsExchange* batch_stats = nullptr;
  int recompute_depth = 0;
};

extern constinit thread_local ThreadState t_thread_state;
inline ThreadState& thread_state() { return t_thread_state; }

}  // namespace bitgrad
