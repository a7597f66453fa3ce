// Kernels applied to whole tensors, without autograd (internal, used by autograd and ops).
#pragma once

#include <utility>
#include <vector>

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
// a = a + b into a's own buffer (a contiguous and not shared): add_same_shape's values.
void add_into(Tensor& a, const Tensor& b);
// A tensor of `shape`, +0 (zero bits) but where `g` goes: g's index i along `axis` at
// start + i * step, every other axis as g's (a slice's gradient), each element written once.
Tensor place_in_zeros(const Tensor& g, const Shape& shape, int axis, std::int64_t start, std::int64_t step);
// Two or more slices' gradients (g, start) on disjoint ranges of `axis`, added to one another as
// placed in zeros, in one pass: +0 outside them, g + 0 inside (x + 0 = 0 + x, and the later
// +0s change nothing: a -0 becomes +0, a NaN the canonical NaN), as the additions would give.
Tensor place_parts_in_zeros(const std::vector<std::pair<Tensor, std::int64_t>>& parts, const Shape& shape, int axis);

}  // namespace bitgrad::kern
