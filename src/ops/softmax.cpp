// softmax and log_softmax along one axis, forward and backward side by side.
//   x [.., L, ..] -> y same shape; the kernels work on rows, so a non-last axis is moved last
//   softmax:      gx = y * (g - dot(g, y))
//   log_softmax:  gx = g - exp(y) * sum(g)
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// x with `axis` moved last, contiguous; undo with move_back
Tensor move_axis_last(const Tensor& x, int axis) {
  if (axis == x.ndim() - 1) return kern::contiguous(x);
  std::vector<int> p;
  for (int d = 0; d < x.ndim(); ++d)
    if (d != axis) p.push_back(d);
  p.push_back(axis);
  NoGradGuard ng;
  return ops::fresh_copy(permute(x, p));
}
Tensor move_back(const Tensor& y, int axis, int ndim) {
  if (axis == ndim - 1) return y;
  std::vector<int> p(static_cast<std::size_t>(ndim));
  for (int d = 0, k = 0; d < ndim; ++d) p[static_cast<std::size_t>(d)] = d == axis ? ndim - 1 : k++;
  NoGradGuard ng;
  return ops::fresh_copy(permute(y, p));
}

template <bool Log>
Tensor rows_fwd(const Tensor& x, int axis) {
  Tensor xl = move_axis_last(x, axis);
  const std::int64_t L = xl.shape()[xl.ndim() - 1];
  const std::int64_t R = L ? xl.numel() / L : 0;
  Tensor y = Tensor::empty(xl.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), Log ? "log_softmax" : "softmax", T, [&] {
    if (Log) kern::active<T>().log_softmax_rows(xl.data<T>(), R, L, kern::out_ptr<T>(y));
    else kern::active<T>().softmax_rows(xl.data<T>(), R, L, kern::out_ptr<T>(y));
  });
  return move_back(y, axis, x.ndim());
}

struct SoftmaxSaved {
  int axis;
};

// saved 0 = y; payload SoftmaxSaved
template <bool Log>
void rows_bw(Node& n, const Tensor& g, Tensor* gi) {
  const int axis = n.payload<SoftmaxSaved>().axis;
  Tensor yl = move_axis_last(n.saved_tensor(0), axis);
  Tensor gl = move_axis_last(g, axis);
  const std::int64_t L = yl.shape()[yl.ndim() - 1];
  const std::int64_t R = L ? yl.numel() / L : 0;
  Tensor gx = Tensor::empty(yl.shape(), g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), Log ? "log_softmax" : "softmax", T, [&] {
    if (Log) kern::active<T>().log_softmax_grad_rows(yl.data<T>(), gl.data<T>(), R, L, kern::out_ptr<T>(gx));
    else kern::active<T>().softmax_grad_rows(yl.data<T>(), gl.data<T>(), R, L, kern::out_ptr<T>(gx));
  });
  gi[0] = move_back(gx, axis, g.ndim());
}

template <bool Log>
Tensor rows_op(const Tensor& x, int axis, CallSite site) {
  const char* name = Log ? "log_softmax" : "softmax";
  ops::check_float(name, x);
  BITGRAD_CHECK(x.ndim() >= 1, name, "needs at least one dimension, got a scalar");
  axis = x.shape().normalize_axis(axis, name);
  Tensor y = rows_fwd<Log>(x, axis);
  if (Node* n = ops::record(name, rows_bw<Log>, {&x}, y, site)) {
    n->save(0, y);
    n->set_payload(SoftmaxSaved{axis});
  }
  return y;
}
}  // namespace

Tensor softmax(const Tensor& x, int axis, CallSite site) { return rows_op<false>(x, axis, site); }
Tensor log_softmax(const Tensor& x, int axis, CallSite site) { return rows_op<true>(x, axis, site); }

}  // namespace bitgrad
