// Engine side of the op hooks (internal).
#pragma once

#include <string>

#include "bitgrad/autograd.hpp"

namespace bitgrad::autograd {
void emit_backward(const char* op, const Tensor& g, CallSite site, const std::string& label, int input);
// While alive, ops run by backward functions do not report forward events.
struct SuppressForward {
  SuppressForward();
  ~SuppressForward();
};
// While alive, the current label is `label` (not joined to the enclosing one): a recomputed
// forward runs under the label it had when it first ran.
class LabelReplace {
 public:
  explicit LabelReplace(const std::string& label);
  ~LabelReplace();
  LabelReplace(const LabelReplace&) = delete;
  LabelReplace& operator=(const LabelReplace&) = delete;

 private:
  std::string label_;
  const std::string* saved_;
};
}  // namespace bitgrad::autograd
