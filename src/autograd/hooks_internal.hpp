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
}  // namespace bitgrad::autograd
