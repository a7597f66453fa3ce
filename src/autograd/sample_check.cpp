// SampleCountCheck (bitgrad/autograd.hpp): what a backward's sums over samples took, per thread
// (a backward runs its nodes on the thread that called it), and which gradients are such sums.
#include <string>

#include "bitgrad/autograd.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad::autograd {
SampleCountCheck::SampleCountCheck(std::int64_t rows) : rows_(rows), outer_(thread_state().sample_check) { thread_state().sample_check = this; }
SampleCountCheck::~SampleCountCheck() { thread_state().sample_check = outer_; }

SampleCountCheck* SampleCountCheck::active() { return thread_state().sample_check; }

void SampleCountCheck::note(const char* what, std::int64_t count, const Shape& of, bool rule) {
  SampleCountCheck* c = thread_state().sample_check;
  if (!c || !c->mismatch_.empty() || (rule ? count == c->rows_ : count != c->rows_)) return;
  const std::string& label = current_label();
  c->mismatch_ = std::string(what) + (label.empty() ? std::string() : " in " + label) + " summed " + std::to_string(count) +
                 (rule ? " leading entries of " + of.str() + " as samples, but the piece has " + std::to_string(c->rows_) +
                             " (its samples are not on axis 0 there)"
                       : " entries of " + of.str() + " by the row rule, not the batch rule over the samples");
}

void SampleCountCheck::summed(const Tensor& result, std::int64_t count) {
  SampleCountCheck* c = thread_state().sample_check;
  if (c && count == c->rows_) c->mark(result);
}

void SampleCountCheck::mark(const Tensor& g) {
  if (g.defined() && g.storage() && !is_summed(g)) sums_.push_back(g.storage());
}

bool SampleCountCheck::is_summed(const Tensor& g) const {
  if (!g.defined() || !g.storage()) return false;
  for (const std::shared_ptr<Storage>& s : sums_)  // a handful per backward: one per parameter use
    if (s == g.storage()) return true;
  return false;
}

}  // namespace bitgrad::autograd
