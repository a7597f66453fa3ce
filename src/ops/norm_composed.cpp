// RMSNorm, GroupNorm, InstanceNorm as compositions of recorded ops (numerics.md §33), so their
// bits, their gradients and their invariance over threads and code paths are those ops'.
//   rms_norm:      x [.., D..] (axes [axis, ndim)), gamma [D..] -> y of x's shape
//                  ms = sum_square(x, axes, keepdim) / n;  y = (x / sqrt(ms + eps)) * gamma
//   group_norm:    x [N, C, S..], gamma, beta [C] -> y [N, C, S..]
//                  xhat = layer_norm(x viewed [N, G, (C/G)·S], no affine) viewed back;
//                  y = xhat * gamma[1, C, 1..] + beta[1, C, 1..]
//   instance_norm: group_norm with G = C
// Every statistic is per sample (per row of the sample), so a sample's output does not depend on
// the batch; the affine gradients reduce per sample first, then by the batch rule (§6), so a
// micro-batch of whole 32-sample blocks gives the bits of the whole batch (T5).
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {

// [1, C, 1, ...] for x of x_ndim dimensions, so a [C] parameter broadcasts over axis 1
Tensor channel_view(const Tensor& p, int x_ndim, CallSite site) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(x_ndim), 1);
  dims[1] = p.shape()[0];
  return reshape(p, Shape(dims), site);
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps, int axis, CallSite site) {
  ops::check_float("rms_norm", x);
  const int r = x.ndim();
  BITGRAD_CHECK(r >= 1, "rms_norm", "needs at least one dimension");
  BITGRAD_CHECK(axis >= -r && axis < r, "rms_norm", "axis ", axis, " is out of range for input ", x.shape().str());
  const int a = axis < 0 ? axis + r : axis;
  BITGRAD_CHECK(eps >= 0, "rms_norm", "eps must be >= 0, got ", eps);
  std::vector<int> axes;
  std::vector<std::int64_t> norm_dims;
  std::int64_t n = 1;
  for (int i = a; i < r; ++i) {
    axes.push_back(i);
    norm_dims.push_back(x.shape()[i]);
    n *= x.shape()[i];
  }
  BITGRAD_CHECK(n > 0, "rms_norm", "the normalised axes are empty (shape ", x.shape().str(), ")");
  if (gamma.defined()) {
    ops::check_same_dtype("rms_norm", x, gamma);
    BITGRAD_CHECK(gamma.shape() == Shape(norm_dims), "rms_norm", "gamma must be ", Shape(norm_dims).str(), " for input ", x.shape().str(),
                  " normalised from axis ", a, ", got ", gamma.shape().str());
  }
  const Tensor ms = div(sum_square(x, axes, true, site), static_cast<double>(n), site);
  const Tensor y = div(x, sqrt(add(ms, eps, site), site), site);
  return gamma.defined() ? mul(y, gamma, site) : y;
}

Tensor group_norm(const Tensor& x, std::int64_t G, const Tensor& gamma, const Tensor& beta, double eps, CallSite site) {
  ops::check_float("group_norm", x);
  BITGRAD_CHECK(x.ndim() >= 2, "group_norm", "expects x [N, C, ...], got ", x.shape().str());
  const std::int64_t N = x.shape()[0], C = x.shape()[1];
  BITGRAD_CHECK(G >= 1 && C % G == 0, "group_norm", "num_groups ", G, " must divide the ", C, " channels of input ", x.shape().str());
  BITGRAD_CHECK(eps >= 0, "group_norm", "eps must be >= 0, got ", eps);
  const std::int64_t per = N > 0 ? x.numel() / (N * G) : 0;
  BITGRAD_CHECK(per > 0, "group_norm", "a group is empty (input ", x.shape().str(), ")");
  for (const Tensor* p : {&gamma, &beta}) {
    if (!p->defined()) continue;
    ops::check_same_dtype("group_norm", x, *p);
    BITGRAD_CHECK(p->ndim() == 1 && p->shape()[0] == C, "group_norm", "gamma and beta must be [", C, "] for input ", x.shape().str(),
                  ", got ", p->shape().str());
  }
  Tensor y = reshape(layer_norm(reshape(x, Shape{N, G, per}, site), Tensor(), Tensor(), eps, site), x.shape(), site);
  if (gamma.defined()) y = mul(y, channel_view(gamma, x.ndim(), site), site);
  if (beta.defined()) y = add(y, channel_view(beta, x.ndim(), site), site);
  return y;
}

Tensor instance_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, CallSite site) {
  BITGRAD_CHECK(x.ndim() >= 3, "instance_norm", "expects x [N, C, D1, ...], got ", x.defined() ? x.shape().str() : "undefined");
  return group_norm(x, x.shape()[1], gamma, beta, eps, site);
}

}  // namespace bitgrad
