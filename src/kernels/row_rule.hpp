// The row rule and the batch rule of docs/numerics.md (§3, §4) as plain scalar templates: the
// literal statement of the orders, used by the reference kernels (reference.cpp,
// reference_nn.cpp). Ops reach the rules through the kernel table only.
#pragma once

#include <cstdint>

#include "kernels/kernels.hpp"

namespace bitgrad::kern {

// term(lane, i) adds element i of the row into `lane`
template <class T, class Term>
T row_rule(std::int64_t L, Term term) {
  PairwiseStack<T> st;
  for (std::int64_t b0 = 0; b0 < L; b0 += kRowBlock) {
    T lanes[kLanes];
    for (T& l : lanes) l = T(0);
    for (std::int64_t i = b0; i < b0 + kRowBlock && i < L; ++i) term(lanes[(i - b0) % kLanes], i);
    for (int h = kLanes / 2; h >= 1; h /= 2)
      for (int j = 0; j < h; ++j) lanes[j] = lanes[j] + lanes[j + h];
    st.push(lanes[0]);
  }
  return st.total();
}

// value(r) of rows 0..R-1 summed by the batch rule
template <class T, class Value>
T batch_rule(std::int64_t R, Value value) {
  PairwiseStack<T> st;
  for (std::int64_t r0 = 0; r0 < R; r0 += kBatchBlock) {
    T acc = T(0);
    for (std::int64_t r = r0; r < r0 + kBatchBlock && r < R; ++r) acc = acc + value(r);
    st.push(acc);
  }
  return st.total();
}

}  // namespace bitgrad::kern
