// SampleCountCheck (bitgrad/autograd.hpp): what a backward's sums over samples took, per thread
// (a backward runs its nodes on the thread that called it).
#include <string>

#include "bitgrad/autograd.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad::autograd {
SampleCountCheck::SampleCountCheck(std::int64_t rows) : rows_(rows), outer_(thread_state().sample_check) { thread_state().sample_check = this; }
SampleCountCheck::~SampleCountCheck() { thread_state().sample_check = outer_; }

void SampleCountCheck::note(const char* what, std::int64_t count, const Shape& of, bool rule) {
  SampleCountCheck* c = thread_state().sample_check;
  if (!c || !c->mismatch_.empty() || (rule ? count == c->rows_ : count != c->rows_)) return;
  const std::string& label = current_label();
  c->mismatch_ = std::string(what) + (label.empty() ? std::string() : " in " + label) + " summed " + std::to_string(count) +
                 (rule ? " leading entries of " + of.str() + " as samples, but the piece has " + std::to_string(c->rows_) +
                             " (its samples are not on axis 0 there)"
                       : " entries of " + of.str() + " by the row rule, not the batch rule over the samples");
}

}  // namespace bitgrad::autograd
