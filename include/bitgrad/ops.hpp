// Differentiable ops. Each records a node when grad is enabled and an input requires grad.
// The last argument, defaulted, is the caller's source location (op traces, anomaly reports).
// Binary ops broadcast as NumPy does. Every op's evaluation order is documented in
// docs/numerics.md; errors name the op and the shapes involved.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
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
// Blocks of samples run apart (numerics.md §42): fn(x_b, first_row) on each `block`-row block of
// x's axis 0, each recorded as a graph of its own, the outputs concatenated. Backward: each
// block's graph on its own; a parameter's contributions within a block added in arrival order,
// the blocks by the pairwise tree — the bits of running each block as its own piece. Every
// tensor inside fn that requires grad must be x_b or in params.
Tensor per_block(const std::function<Tensor(const Tensor&, std::int64_t)>& fn, const Tensor& x, const std::vector<Tensor>& params,
                 std::int64_t block, CallSite site = CallSite::current());
// A caller's differentiable function (bitgrad.autograd.Function): y, computed by its forward without
// recording, becomes the output of one node over `inputs` whose backward is backward(g) -> one
// gradient per input (undefined for none), checked against each input's shape and dtype.
Tensor custom_function(const std::string& name, const std::vector<Tensor>& inputs, const Tensor& y,
                       std::function<std::vector<Tensor>(const Tensor&)> backward, CallSite site = CallSite::current());
// True on a thread while a checkpoint's backward runs its segment again (a second forward of
// the same step: BatchNorm does not update its running statistics then).
bool recomputing();

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

// ---- activations with parameters, comparisons, masks, cast (numerics.md §32) -----
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
// x converted to dtype (numerics.md §32): floats to integers truncate toward zero and fail on
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
// logits [N, C], targets i64 [N] with values in [0, C); or sequences, logits [N, T, C] (classes
// last), targets [N, T]: PyTorch's reductions over every position (none [N, T]; sum; mean, / (N * T))
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction = Reduction::mean, CallSite site = CallSite::current());
// The trainer's loss (numerics.md §9): the batch rule over the samples of each sample's loss, a
// sequence's the mean over its positions; [N, C] logits: cross_entropy's sum.
Tensor cross_entropy_sample_means(const Tensor& logits, const Tensor& targets, CallSite site = CallSite::current());
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean, CallSite site = CallSite::current());

// ---- shape and index, more (orders and conventions: numerics.md §27) ----------------
// Negative axes count from the end. Errors name the op and the shapes/values expected.
// squeeze: removes the given axes, each of size 1 (else an error); no axes: every axis of size 1
Tensor squeeze(const Tensor& x, const std::vector<int>& axes = {}, CallSite site = CallSite::current());
// unsqueeze: inserts axes of size 1; the axes index the result (rank x.ndim() + axes.size())
Tensor unsqueeze(const Tensor& x, const std::vector<int>& axes, CallSite site = CallSite::current());
// stack: the tensors (equal shapes and dtypes) along a new axis of the result
Tensor stack(const std::vector<Tensor>& xs, int axis = 0, CallSite site = CallSite::current());
// split: consecutive parts of the given sizes (summing to the axis' size) along axis; views
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis = 0, CallSite site = CallSite::current());
// chunk: torch.chunk, parts of ceil(size / chunks) (the last one smaller; fewer parts if they run out)
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int axis = 0, CallSite site = CallSite::current());
// tile: numpy.tile / ONNX Tile / torch's Tensor.repeat; repeats may be longer than x's rank
// (x gains leading axes of size 1). Backward: the copies summed by the axis rules (§6)
Tensor tile(const Tensor& x, const std::vector<std::int64_t>& repeats, CallSite site = CallSite::current());
// flip: reverses the order along each of the axes
Tensor flip(const Tensor& x, const std::vector<int>& axes, CallSite site = CallSite::current());
enum class PadMode { constant, reflect, edge };
// pad: ONNX Pad; pads = [begin_0 .. begin_{r-1}, end_0 .. end_{r-1}]; a negative amount crops.
// reflect mirrors without repeating the edge (numpy's; again past the far edge), edge repeats it
Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode = PadMode::constant, double value = 0.0,
           CallSite site = CallSite::current());
// tril/triu over the last two axes (the others a batch): keeps j <= i + k (tril) or j >= i + k (triu), zeros the rest
Tensor tril(const Tensor& x, std::int64_t k = 0, CallSite site = CallSite::current());
Tensor triu(const Tensor& x, std::int64_t k = 0, CallSite site = CallSite::current());

// ---- factories (not differentiable) ---------------------------------------------------------------
// one_hot: ONNX OneHot; indices of any real dtype (truncated), a negative one wraps (+ depth), one out
// of [-depth, depth) gives a row of `off`; the new axis of size depth at `axis` of the result
Tensor one_hot(const Tensor& indices, std::int64_t depth, int axis = -1, double off = 0.0, double on = 1.0, DType dtype = DType::i64);
// arange: ONNX Range; count = max(ceil((limit - start) / delta), 0), element i = start + i * delta
// (f32: computed in f64, rounded once; i64: integer arithmetic, the arguments integers)
Tensor arange(double start, double limit, double delta = 1.0, DType dtype = DType::f32);
// eye: [n, m] (m < 0: n) with ones at j = i + k; eye_like: of x's 2-d shape, in dtype (Python: x's by default)
Tensor eye(std::int64_t n, std::int64_t m = -1, std::int64_t k = 0, DType dtype = DType::f32);
Tensor eye_like(const Tensor& x, std::int64_t k = 0, DType dtype = DType::f32);
// Random factories, keyed like every draw (no hidden generator): element k (row-major) is
// stream.normal(first_index + k) (randn) or stream.uniform(first_index + k) in [0, 1) (rand), in
// the dtype's own draw (normal_f32 / uniform_f32 for f32, the f64 ones for f64).
Tensor randn(const Shape& shape, const rng::Stream& stream, std::uint64_t first_index = 0, DType dtype = DType::f32);
Tensor rand(const Shape& shape, const rng::Stream& stream, std::uint64_t first_index = 0, DType dtype = DType::f32);
Tensor randn_like(const Tensor& x, const rng::Stream& stream, std::uint64_t first_index = 0);
Tensor rand_like(const Tensor& x, const rng::Stream& stream, std::uint64_t first_index = 0);

// ---- scatter, N-d gather, sort, einsum (numerics.md §27) -------------------------------------------
enum class ScatterReduction { none, add };
// scatter: ONNX ScatterElements / torch.scatter(_add): y = x, then for each position p of index in
// row-major order y[.., index[p], ..] (along axis) = src[p] (none: the last write wins) or += src[p]
// (add: applied in index order). index and src have one shape; negative indices wrap.
Tensor scatter(const Tensor& x, int axis, const Tensor& index, const Tensor& src, ScatterReduction reduction = ScatterReduction::none,
               CallSite site = CallSite::current());
// gather_nd / scatter_nd: ONNX GatherND (with batch_dims) and ScatterND; indices i64 [.., q], negative wrap
Tensor gather_nd(const Tensor& x, const Tensor& indices, int batch_dims = 0, CallSite site = CallSite::current());
Tensor scatter_nd(const Tensor& x, const Tensor& indices, const Tensor& updates, ScatterReduction reduction = ScatterReduction::none,
                  CallSite site = CallSite::current());
struct ValuesIndices {
  Tensor values, indices;  // indices i64
};
// topk / sort along axis; ties go to the lower index first; NaN ranks above +inf (first when
// largest/descending, last otherwise); -0 and +0 are equal. Gradient: to the selected elements.
ValuesIndices topk(const Tensor& x, std::int64_t k, int axis = -1, bool largest = true, bool sorted = true,
                   CallSite site = CallSite::current());
ValuesIndices sort(const Tensor& x, int axis = -1, bool descending = false, CallSite site = CallSite::current());
// einsum of one operand (a permutation) or two whose contraction is one (batched) GEMM: every
// index appears at most once per operand, and one appearing in a single operand is in the output.
// The operands are permuted and reshaped to [B, M, K] and [B, K, N] and multiplied by matmul
// (its bits); anything else is refused with the reason.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, CallSite site = CallSite::current());

// ---- reductions over axes, scans, more losses (numerics.md §28-§30) ---------------------
// axes: any set of axes (negative ones count from the end); an EMPTY list reduces over ALL axes
// (ONNX's default; `sum(x, {})` above keeps its own meaning, no reduction). keepdim: ones at
// the reduced axes. Float inputs (f32, f64) unless stated.
Tensor prod(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor logsumexp(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor sum_square(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor norm_l1(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor norm_l2(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor log_sum(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
// variance and standard deviation: sum of squared deviations / (count - correction)
// (correction 1: unbiased, PyTorch's default; 0: biased)
Tensor var(const Tensor& x, const std::vector<int>& axes = {}, double correction = 1.0, bool keepdim = false,
           CallSite site = CallSite::current());
Tensor stddev(const Tensor& x, const std::vector<int>& axes = {}, double correction = 1.0, bool keepdim = false,
              CallSite site = CallSite::current());
// ONNX ReduceMax / ReduceMin over several axes; gradient to the first extremum in row-major
// order of the reduced elements
Tensor amax(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor amin(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
// any / all of any dtype (nonzero, NaN included, is true) -> u8 0/1; not differentiable
Tensor any(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
Tensor all(const Tensor& x, const std::vector<int>& axes = {}, bool keepdim = false, CallSite site = CallSite::current());
// argmax / argmin with ONNX's select_last_index: the last extremum (the last NaN) when set
Tensor argmax(const Tensor& x, int axis, bool keepdim, bool select_last, CallSite site = CallSite::current());
Tensor argmin(const Tensor& x, int axis, bool keepdim, bool select_last, CallSite site = CallSite::current());
// ONNX Sum / Mean / Max / Min over several tensors (broadcasting), folded left to right:
// ((x0 + x1) + x2) + ...; mean_of divides that by the count
Tensor sum_of(const std::vector<Tensor>& xs, CallSite site = CallSite::current());
Tensor mean_of(const std::vector<Tensor>& xs, CallSite site = CallSite::current());
Tensor max_of(const std::vector<Tensor>& xs, CallSite site = CallSite::current());
Tensor min_of(const std::vector<Tensor>& xs, CallSite site = CallSite::current());
// ONNX CumSum along `axis`: sequential from the first element of the scan direction
// (the last with reverse); exclusive: each output leaves out its own element
Tensor cumsum(const Tensor& x, int axis, bool exclusive = false, bool reverse = false, CallSite site = CallSite::current());

// Losses with PyTorch's options. Class-indexed losses take input [N, C] or [N, C, d1, ...]
// (classes on axis 1, as PyTorch and ONNX) and targets i64 [N] or [N, d1, ...]; weight [C]
// (optional) is a constant; a target equal to ignore_index adds nothing, and `mean` divides by
// the sum of the weights of the other targets. A sample is index n of axis 0: sums go per
// sample, then by the batch rule (contract T5).
Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& weight = Tensor(), std::int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean, CallSite site = CallSite::current());
// log_softmax over axis 1, then the NLL, with label smoothing eps as PyTorch's F.cross_entropy;
// log_prob (optional) receives the log_softmax (ONNX SoftmaxCrossEntropyLoss's second output)
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& weight = Tensor(),
                             std::int64_t ignore_index = -100, double label_smoothing = 0.0, Reduction reduction = Reduction::mean,
                             Tensor* log_prob = nullptr, CallSite site = CallSite::current());
// input probabilities in [0, 1]; logs clamped at -100 as PyTorch; weight broadcast to input
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                            Reduction reduction = Reduction::mean, CallSite site = CallSite::current());
// pos_weight broadcast to the input (e.g. [C] for [N, C]); weight too
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(), Reduction reduction = Reduction::mean,
                                        CallSite site = CallSite::current());
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean, CallSite site = CallSite::current());
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean, double beta = 1.0,
                      CallSite site = CallSite::current());
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean, double delta = 1.0,
                  CallSite site = CallSite::current());
// input: log-probabilities; target: probabilities (log-probabilities with log_target);
// batch_mean: the sum divided by N (PyTorch's reduction='batchmean'; reduction is then ignored)
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean, bool log_target = false,
              bool batch_mean = false, CallSite site = CallSite::current());
// ---- batch norm (numerics.md §31) -------------------------------------
// PyTorch's F.batch_norm: x [N, C] or [N, C, *spatial]; gamma (weight), beta (bias),
// running_mean, running_var [C], each may be undefined. training: normalised by this batch's
// statistics per channel over N and the spatial positions (biased variance); running stats,
// when given, updated in place (r = momentum * stat + (1 - momentum) * r, the variance's stat
// unbiased). Evaluation: normalised by running_mean and running_var (required).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& gamma = Tensor(),
                  const Tensor& beta = Tensor(), bool training = true, double momentum = 0.1, double eps = 1e-5,
                  CallSite site = CallSite::current());

// ---- normalisation and recurrent layers (numerics.md §33, §34) ---------------------
// Compositions of the ops above, so their bits (and threads-invariance) are those ops'.
// rms_norm: over the axes [axis, ndim): y = (x / sqrt(sum_square(x) / n + eps)) * gamma; gamma
// (optional) of shape x.shape[axis:]
Tensor rms_norm(const Tensor& x, const Tensor& gamma = Tensor(), double eps = 1e-5, int axis = -1, CallSite site = CallSite::current());
// group_norm: x [N, C, ...] in num_groups groups of C / num_groups channels, each (sample, group)
// normalised by layer_norm's rows (biased variance), then * gamma[c] + beta[c] (each optional, [C])
Tensor group_norm(const Tensor& x, std::int64_t num_groups, const Tensor& gamma = Tensor(), const Tensor& beta = Tensor(), double eps = 1e-5,
                  CallSite site = CallSite::current());
// instance_norm: group_norm with one group per channel (ONNX InstanceNormalization, PyTorch InstanceNorm*d)
Tensor instance_norm(const Tensor& x, const Tensor& gamma = Tensor(), const Tensor& beta = Tensor(), double eps = 1e-5,
                     CallSite site = CallSite::current());

// Recurrent cells and layers with PyTorch's gate equations and parameter layout: w_ih [G*H, in],
// w_hh [G*H, H], b_ih and b_hh [G*H] (either bias optional; both or neither as in PyTorch), G = 1
// (rnn), 4 (lstm: gates i, f, g, o), 3 (gru: r, z, n; the reset gate multiplies (W_hn h + b_hn)).
// x [N, in], h, c [N, H].
enum class RnnMode { rnn_tanh, rnn_relu, lstm, gru };
struct RnnParams {  // one layer
  Tensor w_ih, w_hh, b_ih, b_hh;
};
struct RnnState {
  Tensor h, c;  // c: lstm only
};
Tensor rnn_cell(const Tensor& x, const Tensor& h, const RnnParams& p, bool relu = false, CallSite site = CallSite::current());
RnnState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const RnnParams& p, CallSite site = CallSite::current());
Tensor gru_cell(const Tensor& x, const Tensor& h, const RnnParams& p, CallSite site = CallSite::current());
struct RnnResult {
  Tensor output;  // [N, T, H] (batch_first) or [T, N, H]: the last layer's h at every step
  Tensor h_n, c_n;  // [layers, N, H]; c_n: lstm only
};
// A stack of layers over x [T, N, in] (or [N, T, in] with batch_first); h0, c0 [layers, N, H]
// optional (zeros). Unidirectional, no dropout between layers.
RnnResult rnn(const Tensor& x, RnnMode mode, const std::vector<RnnParams>& layers, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
              bool batch_first = false, CallSite site = CallSite::current());

}  // namespace bitgrad
