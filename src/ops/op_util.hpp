// Shared machinery of the ops (internal): recording nodes, dtype checks, the axis-reduction
// rules used by sum and by the backward of broadcasting, the one GEMM adapter.
#pragma once

#include <initializer_list>
#include <vector>

#include "autograd/node.hpp"
#include "bitgrad/autograd.hpp"
#include "bitgrad/ops.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::ops {

using autograd::Node;

// Records a node for `out` when grad is enabled and some input requires grad; returns it
// (owned by out) or nullptr. Inputs are referenced in argument order.
// Also reports the output to the op hook (traces), with the call site and the label scope.
Node* record(const char* op, autograd::BackwardFn fn, std::initializer_list<const Tensor*> inputs, Tensor& out, CallSite site);
Node* record(const char* op, autograd::BackwardFn fn, const std::vector<Tensor>& inputs, Tensor& out, CallSite site);

void check_float(const char* op, const Tensor& t);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);

// Sum over `axes` by the axis rules (numerics.md): reduced axes other than 0 by the row rule
// (moved last, flattened), then axis 0 by the batch rule; a 1-d tensor by the row rule.
// Returns the kept shape (no keepdim).
Tensor reduce_sum(const Tensor& x, std::vector<int> axes);
// Gradient of a broadcast: g (shape of the broadcast result) summed down to `shape`.
Tensor sum_to(const Tensor& g, const Shape& shape);
// shape with ones at the reduced axes (keepdim form)
Shape keepdim_shape(const Shape& s, const std::vector<int>& axes);
std::vector<int> normalize_axes(const Shape& s, std::vector<int> axes, const char* op);

Tensor scalar_like(const Tensor& ref, double v);

// A GEMM operand: element (r, c) at p[r * rs + c * cs].
template <class T>
struct Mat {
  const T* p;
  std::int64_t rs, cs;
};
// A contiguous row-major [rows, cols] matrix; transposed: the transpose of one stored [cols, rows].
template <class T>
Mat<T> row_major(const T* p, std::int64_t rows, std::int64_t cols, bool transposed = false) {
  return transposed ? Mat<T>{p, 1, rows} : Mat<T>{p, cols, 1};
}
// c[M, N] (row-major) = a[M, K] b[K, N] in `order` (then + bias[j]) on the active kernel table.
template <class T>
void gemm(std::int64_t M, std::int64_t N, std::int64_t K, Mat<T> a, Mat<T> b, T* c, kern::KOrder order = kern::KOrder::chain,
          const T* bias = nullptr) {
  kern::GemmArgs<T> g;
  g.M = M, g.N = N, g.K = K;
  g.A = a.p, g.rsa = a.rs, g.csa = a.cs;
  g.B = b.p, g.rsb = b.rs, g.csb = b.cs;
  g.C = c, g.ldc = N;
  g.bias = bias;
  g.order = order;
  kern::active<T>().gemm(g);
}

}  // namespace bitgrad::ops
