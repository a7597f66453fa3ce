// Fused forms that the importers run in place of a composition of ops, with the composition's
// bits forward and backward. Internal: not user-facing ops (the Python module, the layer table
// and the contract fuzzer's layers reach them through imported graphs).
#pragma once

#include "bitgrad/ops.hpp"

namespace bitgrad {

// add(matmul(a, b), bias) for a 1-d bias of b's columns (b at least 2-d) in one GEMM, the bias
// added by its epilogue (add's rounding), the bias gradient add's (numerics §5)
Tensor matmul_add(const Tensor& a, const Tensor& b, const Tensor& bias, CallSite site = CallSite::current());

}  // namespace bitgrad
