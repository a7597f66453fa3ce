// Kernels applied to whole tensors, without autograd (internal, used by autograd and ops).
#pragma once

#include "bitgrad/tensor.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::kern {

// Pointer to write a freshly allocated output (does not bump the storage version).
template <class T>
T* out_ptr(const Tensor& t) {
  return const_cast<T*>(t.data<T>());
}

// A contiguous tensor with the same values (t itself when already contiguous).
Tensor contiguous(const Tensor& t);
// a + b for equal shapes and dtypes (gradient accumulation).
Tensor add_same_shape(const Tensor& a, const Tensor& b);

}  // namespace bitgrad::kern
