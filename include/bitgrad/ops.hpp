// Differentiable ops. Each records a node when grad is enabled and an input requires grad.
// The last argument, defaulted, is the caller's source location (op traces, anomaly reports).
// Binary ops broadcast as NumPy does. Every op's evaluation order is documented in
// docs/numerics.md; errors name the op and the shapes involved.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "bitgrad/autograd.hpp"
#include "bitgrad/half.hpp"
#include "bitgrad/op_list.hpp"
#include "bitgrad/rng.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad {

// ---- activation checkpointing (contract T9, numerics.md §22) --------------------------------
// y = fn(x) without keeping what the ops inside would save for the backward; the backward runs
// fn again on the saved x and back-propagates through it, handing every contribution to x and
// to the parameters on in arrival order. The gradients have the bits of calling fn(x) directly
// when fn is a pure function of x, the parameters and what it captures (dropout keyed by its
// nn::Context is). Every tensor inside fn that requires grad must be x or in params, else the
// backward fails naming its shape.
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x, const std::vector<Tensor>& params,
                  CallSite site = CallSite::current());

// ---- elementwise ------------------------------------------------------------------------
// One per line of the lists in bitgrad/op_list.hpp (their orders: numerics.md §7, §8)
#define BITGRAD_OPLIST_DECLARE_BINARY(name, scalar, doc)                            \
  Tensor name(const Tensor& a, const Tensor& b, CallSite site = CallSite::current()); \
  BITGRAD_OPLIST_IF(scalar)(Tensor name(const Tensor& a, double s, CallSite site = CallSite::current());)
BITGRAD_BINARY_OPS(BITGRAD_OPLIST_DECLARE_BINARY)
#undef BITGRAD_OPLIST_DECLARE_BINARY
// maximum, minimum: NaN-propagating; ties split the gradient
Tensor rsub(double s, const Tensor& a, CallSite site = CallSite::current());  // s - a
Tensor rdiv(double s, const Tensor& a, CallSite site = CallSite::current());  // s / a

// gelu: the exact (erf) GELU
#define BITGRAD_OPLIST_DECLARE_UNARY(name, grad, ...) \
  BITGRAD_OPLIST_IF_OP(grad)(Tensor name(const Tensor& x, CallSite site = CallSite::current());)
BITGRAD_UNARY_OPS(BITGRAD_OPLIST_DECLARE_UNARY)
#undef BITGRAD_OPLIST_DECLARE_UNARY
// clamp = minimum(maximum(x, lo), hi) (ONNX's Clip: lo > hi gives hi everywhere)
Tensor clamp(const Tensor& x, double lo, double hi, CallSite site = CallSite::current());
// cond: any dtype, nonzero is true; a and b broadcast with cond
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, CallSite site = CallSite::current());

// ---- issue 29: activations with parameters, comparisons, masks, cast (numerics.md §27) -----
// One per line of BITGRAD_PARAM_OPS (bitgrad/op_list.hpp): leaky_relu(x, alpha = 0.01), ...
#define BITGRAD_OPLIST_DECLARE_PARAM(name, cost, nparams, a, da, b, db, ...) \
  Tensor name(const Tensor& x, BITGRAD_OPLIST_PARAMS_DECL(nparams, a, da, b, db), CallSite site = CallSite::current());
BITGRAD_PARAM_OPS(BITGRAD_OPLIST_DECLARE_PARAM)
#undef BITGRAD_OPLIST_DECLARE_PARAM
// x where x > 0, else x * slope; slope broadcasts to x's shape (NumPy's rule, as ONNX's PRelu:
// [C, 1, 1] for channels of [N, C, H, W])
Tensor prelu(const Tensor& x, const Tensor& slope, CallSite site = CallSite::current());
// one side of clamp; an absent bound (std::nullopt) is no bound
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi, CallSite site = CallSite::current());
Tensor clamp_min(const Tensor& x, double lo, CallSite site = CallSite::current());
Tensor clamp_max(const Tensor& x, double hi, CallSite site = CallSite::current());
// Comparisons (BITGRAD_COMPARE_OPS): u8 masks, 1 where true; a and b of one dtype (f32, f64,
// i64, u8), broadcasting; a number is rounded to a float tensor's dtype first. No gradient.
#define BITGRAD_OPLIST_DECLARE_COMPARE(name, op, doc)                                 \
  Tensor name(const Tensor& a, const Tensor& b, CallSite site = CallSite::current()); \
  Tensor name(const Tensor& a, double s, CallSite site = CallSite::current());
BITGRAD_COMPARE_OPS(BITGRAD_OPLIST_DECLARE_COMPARE)
#undef BITGRAD_OPLIST_DECLARE_COMPARE
// nonzero (NaN too) is true; any of f32, f64, i64, u8 on either side; u8 masks, no gradient
Tensor logical_and(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor logical_or(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor logical_xor(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor logical_not(const Tensor& x, CallSite site = CallSite::current());
Tensor isnan(const Tensor& x, CallSite site = CallSite::current());
Tensor isinf(const Tensor& x, bool detect_positive = true, bool detect_negative = true, CallSite site = CallSite::current());
// value where mask is nonzero, else x; mask broadcasts to x's shape; x's gradient is +0 where filled
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value, CallSite site = CallSite::current());
// x converted to dtype (numerics.md §27): floats to integers truncate toward zero and fail on
// NaN, infinities and values out of range; i64 to u8 keeps the low 8 bits; the gradient flows
// between f32 and f64 only (rounded to the input's dtype)
Tensor cast(const Tensor& x, DType dtype, CallSite site = CallSite::current());

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }

// ---- reductions (docs/numerics.md, "Reductions over axes") ------------------------------
Tensor sum(const Tensor& x, CallSite site = CallSite::current());
Tensor sum(const Tensor& x, const std::vector<int>& axes, bool keepdim = false, CallSite site = CallSite::current());
Tensor mean(const Tensor& x, CallSite site = CallSite::current());
Tensor mean(const Tensor& x, const std::vector<int>& axes, bool keepdim = false, CallSite site = CallSite::current());
Tensor max(const Tensor& x, CallSite site = CallSite::current());  // NaN if any NaN; gradient to the first maximum
Tensor max(const Tensor& x, int axis, bool keepdim = false, CallSite site = CallSite::current());
Tensor argmax(const Tensor& x, int axis, bool keepdim = false, CallSite site = CallSite::current());  // i64, first maximum
Tensor min(const Tensor& x, CallSite site = CallSite::current());  // NaN if any NaN; gradient to the first minimum
Tensor min(const Tensor& x, int axis, bool keepdim = false, CallSite site = CallSite::current());
Tensor argmin(const Tensor& x, int axis, bool keepdim = false, CallSite site = CallSite::current());  // i64, first minimum
// L2 norm: sqrt of the sum of squares, the squares summed by the axis rules with fma
// (row rule per sample, then the batch rule); gradient g * x / norm (0 where norm is 0)
Tensor norm(const Tensor& x, CallSite site = CallSite::current());

// ---- shape ----------------------------------------------------------------------------
Tensor reshape(const Tensor& x, const Shape& shape, CallSite site = CallSite::current());  // one dimension may be -1 via reshape_infer
Tensor reshape_infer(const Tensor& x, const std::vector<std::int64_t>& dims, CallSite site = CallSite::current());
Tensor flatten(const Tensor& x, int start_axis = 0, int end_axis = -1, CallSite site = CallSite::current());
Tensor permute(const Tensor& x, const std::vector<int>& dims, CallSite site = CallSite::current());
Tensor transpose(const Tensor& x, int a, int b, CallSite site = CallSite::current());
Tensor expand(const Tensor& x, const Shape& shape, CallSite site = CallSite::current());  // broadcast to shape (a view)
Tensor slice(const Tensor& x, int axis, std::int64_t start, std::int64_t end, std::int64_t step = 1, CallSite site = CallSite::current());
Tensor concat(const std::vector<Tensor>& xs, int axis, CallSite site = CallSite::current());
Tensor index_select(const Tensor& x, int axis, const Tensor& index, CallSite site = CallSite::current());  // index: 1-d i64
Tensor gather(const Tensor& x, int axis, const Tensor& index, CallSite site = CallSite::current());        // torch.gather semantics
Tensor contiguous(const Tensor& x, CallSite site = CallSite::current());

// ---- linear algebra --------------------------------------------------------------------
// matmul: 1-d and 2-d as NumPy; N-d operands are batches of matrices (equal batch
// dimensions, or one operand 2-d and shared by every batch).
Tensor matmul(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
// linear: x [..., in], weight [out, in], bias [out] (optional): x weight^T + bias
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), CallSite site = CallSite::current());

// ---- neural-network ops ------------------------------------------------------------------
// x [N, C, H, W], weight [OC, C, KH, KW], bias [OC] (optional) -> [N, OC, OH, OW];
// OH = (H + 2 padding - KH) / stride + 1
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), int stride = 1, int padding = 0, CallSite site = CallSite::current());
// windows of kernel x kernel, stride (0: = kernel), no padding; x [N, C, H, W]
Tensor max_pool2d(const Tensor& x, int kernel, int stride = 0, CallSite site = CallSite::current());
Tensor avg_pool2d(const Tensor& x, int kernel, int stride = 0, CallSite site = CallSite::current());
// normalises over the last dimension D; gamma, beta [D] (either may be undefined)
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5, CallSite site = CallSite::current());
// Inverted dropout: element k of x (row-major) is kept, scaled by 1/(1-p), when
// stream.uniform(first_index + k) >= p, else zeroed. p in [0, 1). f32_mask: an f64 tensor draws
// the f32 uniforms and compares with p rounded to f32 (the masks of the f32 run: the float64 shadow).
Tensor dropout(const Tensor& x, double p, const rng::Stream& stream, std::uint64_t first_index, bool f32_mask = false,
               CallSite site = CallSite::current());
// Mixed precision (numerics.md §24): every element rounded to p's 16-bit format and kept exactly
// in x's dtype; to nearest, or with a stream stochastically from stream.u32(first_index + k).
// The backward rounds the gradient to nearest in the same format, or passes it on unchanged
// (round_grad false: a parameter's low-precision copy, whose master gradient stays f32).
// fp32 returns x.
Tensor round_to(const Tensor& x, Precision p, const rng::Stream* stochastic = nullptr, std::uint64_t first_index = 0, bool round_grad = true,
                CallSite site = CallSite::current());
// weight [num, dim], indices i64 [..] -> [.., dim]
Tensor embedding(const Tensor& weight, const Tensor& indices, CallSite site = CallSite::current());

// ---- softmax and losses --------------------------------------------------------------------
Tensor softmax(const Tensor& x, int axis = -1, CallSite site = CallSite::current());
Tensor log_softmax(const Tensor& x, int axis = -1, CallSite site = CallSite::current());
enum class Reduction { mean, sum, none };
// logits [N, C], targets i64 [N] with values in [0, C)
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction = Reduction::mean, CallSite site = CallSite::current());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean, CallSite site = CallSite::current());

}  // namespace bitgrad
