// The dot order of docs/numerics.md §5, one term at a time, for tests that transcribe an op's
// definition loop by loop: blocks of 32 fmas from +0, the blocks combined by the pairwise tree.
#pragma once
#include <cmath>

#include "kernels/kernels.hpp"

namespace bitgrad::test {

template <class T>
class DotOrder {
 public:
  // the next term a * b (in increasing k)
  void add(T a, T b) {
    block_ = std::fma(a, b, block_);
    if (++in_block_ == kern::kBatchBlock) flush();
  }
  // the sum of every term added (+0 for none)
  T total() {
    if (in_block_ > 0) flush();
    return stack_.total();
  }

 private:
  void flush() {
    stack_.push(block_);
    block_ = T(0);
    in_block_ = 0;
  }
  kern::PairwiseStack<T> stack_;
  T block_ = T(0);
  int in_block_ = 0;
};

}  // namespace bitgrad::test
