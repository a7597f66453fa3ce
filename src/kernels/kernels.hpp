// Canonical kernels. Every kernel's floating-point evaluation order is a function of the
// shapes only (docs/numerics.md); the scalar reference (reference.cpp, reference_nn.cpp) spells
// that order out literally, and the AVX2 / AVX-512 fast paths reproduce it bit for bit.
// Ops reach the table of the calling thread's execution context through active<T>()
// (backend.hpp). Kernels take contiguous, row-major arrays.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <new>
#include <stdexcept>
#include <limits>
#include <type_traits>
#include <utility>

#include "bitgrad/op_list.hpp"
#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"

namespace bitgrad {
// bitgrad/half.hpp's (declared, not included: the ISA files must not see half.hpp's inline
// functions, whose one definition the linker could then take from an AVX-512 object)
enum class Precision : std::uint8_t;
}  // namespace bitgrad

namespace bitgrad::kern {

// ---- numerics constants ------------------------------------------------------------------------
// samples per canonical block of the batch rule (since version 1), and k per block of every GEMM
// (since version 6): the same 32, so that a weight gradient's blocks of k are blocks of samples
inline constexpr int kBatchBlock = 32;
inline constexpr int kLanes = 16;        // logical lanes of the row rule
inline constexpr int kRowBlock = 128;    // elements per block of the row rule (1024 before numerics 6)

// ---- NaN results (numerics.md §2) --------------------------------------------------------------
// Every NaN a kernel computes is stored as the canonical quiet NaN: sign +, quiet bit, payload 0.
// Which NaN an x86 add, multiply or fma passes on when two operands are NaN depends on the
// operand order, and that order is the compiler's to choose (a + b may be emitted as b + a), so
// without this a NaN's bits would depend on the build. Pure copies (contiguous, index_select,
// gather, im2col) move a NaN's bits unchanged: they cannot depend on an order.
template <class T>
constexpr T canonical_nan() {
  return std::numeric_limits<T>::quiet_NaN();
}
static_assert(std::bit_cast<std::uint32_t>(canonical_nan<float>()) == 0x7FC00000u);
static_assert(std::bit_cast<std::uint64_t>(canonical_nan<double>()) == 0x7FF8000000000000u);
// v, or the canonical NaN when v is a NaN (integers pass through)
template <class T>
inline T canon(T v) {
  if constexpr (std::is_floating_point_v<T>) return v == v ? v : canonical_nan<T>();
  else return v;
}

// ---- GEMM: C[i,j] = sum_k A[i,k] B[k,j] (+ bias[j]) -------------------------------------
// The one order of numerics §5: k split in blocks of kBatchBlock, each block an fma chain from
// +0, the block results combined by the streaming pairwise tree (left + right), then + bias[j].

// B packed ahead, in the layout a fast GEMM packs it in for one shape (Table::gemm_packing; a
// function of the shape and the code path, never of the threads): for a B that many GEMMs read
// (a recurrent weight over a sequence) or that is written packed where it is made. Column panels
// of nr, k in chunks of `chunk` rows (the last chunk shorter); B[k, j] at at(K, N, k, j); the
// columns past N +0. nr = 0: the code path takes no packed B for that shape. Packing moves values,
// never an order: the GEMM's bits are the same with or without it.
struct GemmPacking {
  int nr = 0;
  std::int64_t chunk = 0;
  bool usable() const { return nr > 0; }
  bool operator==(const GemmPacking&) const = default;
  std::int64_t width(std::int64_t N) const { return (N + nr - 1) / nr * nr; }
  std::int64_t size(std::int64_t K, std::int64_t N) const { return K * width(N); }
  // where chunk pc's (a multiple of `chunk`) panel of column j starts; row k - pc of it follows
  std::int64_t panel(std::int64_t K, std::int64_t N, std::int64_t pc, std::int64_t j) const {
    const std::int64_t kc = K - pc < chunk ? K - pc : chunk;
    return pc * width(N) + (j / nr) * kc * nr;
  }
  std::int64_t at(std::int64_t K, std::int64_t N, std::int64_t k, std::int64_t j) const {
    const std::int64_t pc = k / chunk * chunk;
    return panel(K, N, pc, j) + (k - pc) * nr + j % nr;
  }
};

template <class T>
struct GemmArgs {
  std::int64_t M = 0, N = 0, K = 0;
  const T* A = nullptr;
  std::int64_t rsa = 0, csa = 0;  // A[i,k] = A[i*rsa + k*csa]
  const T* B = nullptr;
  std::int64_t rsb = 0, csb = 0;  // B[k,j] = B[k*rsb + j*csb]
  T* C = nullptr;
  std::int64_t ldc = 0;  // C[i,j] = C[i*ldc + j]
  const T* bias = nullptr;
  // B packed as `packing` says (the table's gemm_packing for this shape), or null; with it B may
  // be null
  const T* Bp = nullptr;
  GemmPacking packing;
};

// A batch of S samples' products summed by the batch rule (§3): C = the batch rule over s of
// A_s B_s, each product in §5's order over k (g.bias unused). A_s = g.A + s*sa, B_s = g.B + s*sb.
// The weight gradient of a layer whose samples span several rows (a convolution's positions):
// the samples' products need not be stored.
template <class T>
struct GemmSamplesArgs {
  std::int64_t S = 0, sa = 0, sb = 0;
  GemmArgs<T> g;
};

// `count` GEMMs of one shape, GEMM i reading g.A + i*sa, g.B + i*sb and writing g.C + i*sc (the
// same bias for all; no packed B): each exactly what gemm gives it alone (a batched matmul, an
// attention's products per head).
template <class T>
struct GemmBatchArgs {
  std::int64_t count = 0, sa = 0, sb = 0, sc = 0;
  GemmArgs<T> g;
};

// ---- elementwise ----------------------------------------------------------------------------
// Generated from the lists of bitgrad/op_list.hpp; `count` ends each enum (loops run to it).
#define BITGRAD_OPLIST_ENUM(name, ...) name,
enum class Unary : std::uint8_t { BITGRAD_UNARY_OPS(BITGRAD_OPLIST_ENUM) count };
enum class Binary : std::uint8_t { BITGRAD_BINARY_OPS(BITGRAD_OPLIST_ENUM) count };
// Gradients of activations: out = g * f'(v), where v is the input x (act_x lines) or the
// output y (act_y lines); their orders are in numerics.md §7.
enum class ActGrad : std::uint8_t { BITGRAD_ACT_GRADS(BITGRAD_OPLIST_ENUM) count };
// Activations with parameters (a, b): forward unary_p, backward act_grad_p on x
enum class UnaryP : std::uint8_t { BITGRAD_PARAM_OPS(BITGRAD_OPLIST_ENUM) count };
#undef BITGRAD_OPLIST_ENUM

template <class E>
inline constexpr int op_count = static_cast<int>(E::count);

// The fast paths' grain class: one IEEE operation, or an elementary function in f64 lanes
enum class OpCost : std::uint8_t { simple, math };
enum class OpGrad : std::uint8_t { kernel, custom, act_x, act_y, zero };

// One row per unary line of op_list.hpp, indexed by the enum
struct UnaryInfo {
  const char* name;
  OpGrad grad;
  OpCost cost;
  double lo, hi;  // the op tests' input range
  bool method;
  const char* torch;
};
inline constexpr UnaryInfo kUnaryInfo[] = {
#define BITGRAD_OPLIST_ROW(name, grad, cost, lo, hi, method, torch, doc) \
  {#name, OpGrad::grad, OpCost::cost, lo, hi, method != 0, torch},
    BITGRAD_UNARY_OPS(BITGRAD_OPLIST_ROW)
#undef BITGRAD_OPLIST_ROW
};
static_assert(std::size(kUnaryInfo) == op_count<Unary>);
struct ActGradInfo {
  const char* name;
  OpCost cost;
};
inline constexpr ActGradInfo kActGradInfo[] = {
#define BITGRAD_OPLIST_ROW(name, cost) {#name, OpCost::cost},
    BITGRAD_ACT_GRADS(BITGRAD_OPLIST_ROW)
#undef BITGRAD_OPLIST_ROW
};
static_assert(std::size(kActGradInfo) == op_count<ActGrad>);
inline constexpr const char* kBinaryName[] = {
#define BITGRAD_OPLIST_ROW(name, ...) #name,
    BITGRAD_BINARY_OPS(BITGRAD_OPLIST_ROW)
#undef BITGRAD_OPLIST_ROW
};
static_assert(std::size(kBinaryName) == op_count<Binary>);

struct UnaryPInfo {
  const char* name;
  OpCost cost;
  int nparams;
  double a, b;    // the defaults
  double lo, hi;  // the op tests' input range
  const char* torch;
};
inline constexpr UnaryPInfo kUnaryPInfo[] = {
#define BITGRAD_OPLIST_ROW(name, cost, nparams, a, da, b, db, lo, hi, torch, doc) \
  {#name, OpCost::cost, nparams, da, db, lo, hi, torch},
    BITGRAD_PARAM_OPS(BITGRAD_OPLIST_ROW)
#undef BITGRAD_OPLIST_ROW
};
static_assert(std::size(kUnaryPInfo) == op_count<UnaryP>);

constexpr const UnaryPInfo& info(UnaryP op) { return kUnaryPInfo[static_cast<int>(op)]; }
constexpr const char* op_name(UnaryP op) { return info(op).name; }
constexpr const UnaryInfo& info(Unary op) { return kUnaryInfo[static_cast<int>(op)]; }
constexpr const ActGradInfo& info(ActGrad op) { return kActGradInfo[static_cast<int>(op)]; }
constexpr const char* op_name(Unary op) { return info(op).name; }
constexpr const char* op_name(ActGrad op) { return info(op).name; }
constexpr const char* op_name(Binary op) { return kBinaryName[static_cast<int>(op)]; }

// Broadcast patterns of binary ops on contiguous data (y has n = outer*inner elements):
//   same:  a[i] op b[i]
//   row:   a[o*inner + i] op b[i]        (b repeats over leading dims)
//   col:   a[o*inner + i] op b[o]        (b repeats over trailing dims)
//   rrow / rcol: the same with b on the left (b op a)
enum class Bcast : std::uint8_t { same, row, col, rrow, rcol };

// Pooling of `planes` planes [H, W]: k x k windows at stride s, no padding; y [planes, OH, OW].
struct PoolShape {
  std::int64_t planes, H, W, k, s, OH, OW;
};
// im2col of one sample [C, H, W], padded with +0 by p, stride s: cols [C*KH*KW, OH*OW], each
// row `ld` elements apart (0: OH*OW) so that a block of samples can sit side by side in one
// cols matrix [C*KH*KW, samples*OH*OW]; im2row writes the transpose, rows [OH*OW, C*KH*KW].
struct ConvShape {
  std::int64_t C, H, W, KH, KW, OH, OW, s, p;
  std::int64_t ld = 0;
  std::int64_t cols_ld() const { return ld ? ld : OH * OW; }
  std::int64_t ckk() const { return C * KH * KW; }
};

// A depthwise convolution: C planes [H, W] per sample, one kernel [KH, KW] per plane (groups =
// channels, one output channel each); kh, kw at dilation (dh, dw), stride (sh, sw), pads pt, pl
// on the top and left (OH, OW say where the padding ends).
struct DwShape {
  std::int64_t N, C, H, W, KH, KW, OH, OW, sh, sw, pt, pl, dh, dw;
};

// Optimizer coefficients, already rounded to T (numerics.md §17). The flags say whether the
// option is on: a weight decay that rounds to 0 in T still adds 0 * p.
template <class T>
struct SgdCoef {
  T lr, momentum, wd;
  bool decay, nesterov;
};
template <class T>
struct AdamCoef {
  T b1, b2, ob1, ob2;  // ob = 1 - b, rounded once
  T c1, s2, eps, wd;   // c1 = lr / (1 - b1^t), s2 = sqrt(1 - b2^t)
  T shrink;            // 1 - lr * wd (AdamW)
  bool decay, decoupled;
};

template <class T>
struct Table {
  void (*gemm)(const GemmArgs<T>&);
  // the packed B this code path's gemm takes for [M, K] x [K, N] (GemmPacking), or null / nr = 0
  GemmPacking (*gemm_packing)(std::int64_t M, std::int64_t N, std::int64_t K) = nullptr;
  void (*gemm_samples)(const GemmSamplesArgs<T>&);
  // null: the caller runs gemm on each (ops::gemm_batch)
  void (*gemm_batch)(const GemmBatchArgs<T>&) = nullptr;
  void (*unary)(Unary op, const T* x, T* y, std::int64_t n);
  void (*binary)(Binary op, Bcast bc, const T* a, const T* b, T* y, std::int64_t outer, std::int64_t inner);
  void (*act_grad)(ActGrad op, const T* v, const T* g, T* out, std::int64_t n);
  // activations with parameters (numerics.md §32): y = f(x; a, b), and out = g * f'(x; a, b)
  void (*unary_p)(UnaryP op, const T* x, T* y, std::int64_t n, double a, double b);
  void (*act_grad_p)(UnaryP op, const T* x, const T* g, T* out, std::int64_t n, double a, double b);
  // GELU forward that keeps e = erf(x/sqrt 2) in f64 for its backward: y = (0.5 x)(1 + e),
  // the bits of unary(gelu)
  void (*gelu_keep)(const T* x, T* y, double* e, std::int64_t n);
  // GELU backward from the kept e: out = g (0.5 (1 + e) + x phi(x)), the bits of act_grad(gelu)
  void (*gelu_grad_kept)(const T* x, const double* e, const T* g, T* out, std::int64_t n);
  // One LSTM step over N rows (numerics §34): z = xz + hh (xz rows ldx apart, hh [N, 4H]), or
  // z = (xz + b) + hh with b [4H] (b_hh, not null: the input part's addition done here);
  // i, f, o = sigmoid and g = tanh of z's quarters; c' = f*c + i*g; h' = o*tanh(c'); each op
  // rounded to T as the ops round it. c [N, H]; c_out [N, H]; h_out rows ldh apart; keep (may be
  // null) [N, 5H]: i, f, g, o, tanh(c') for the backward.
  void (*lstm_gates)(const T* xz, std::int64_t ldx, const T* b, const T* hh, const T* c, std::int64_t N, std::int64_t H, T* c_out, T* h_out,
                     std::int64_t ldh, T* keep);
  // The step's backward from keep [N, 5H] (i, f, g, o, tanh(c')), as the ops' backwards compute
  // it (mul: g*b; sigmoid: (g*y)*(1-y); tanh: g*(1-y*y)), each gate's gradient stored as v + 0.
  // cell: from gc = dL/dc' [N, H] and c [N, H], the i, f, g quarters of gz's rows (ldz apart)
  // and, if gc_prev is not null, dL/dc = gc*f [N, H]. hidden: from gh = dL/dh' [N, H], the o
  // quarter's values at gz_o (rows ldz apart) and dL/dc' through tanh, gc [N, H].
  void (*lstm_cell_grad)(const T* keep, const T* c, const T* gc, std::int64_t N, std::int64_t H, T* gz, std::int64_t ldz, T* gc_prev);
  void (*lstm_hidden_grad)(const T* keep, const T* gh, std::int64_t N, std::int64_t H, T* gz_o, std::int64_t ldz, T* gc);
  // One GRU step (numerics §34): r, z = sigmoid(xz_q + hh_q) for quarters 0, 1; n = tanh(xz_2 +
  // r*hh_2); h' = (h - n)*z + n; each op rounded to T as the ops round it (xz rows ldx apart,
  // hh [N, 3H] with b_hh added, h rows ldh apart, h_out rows ldo apart; keep (may be null)
  // [N, 3H]: r, z, n). gru_grad: from g = dL/dh' [N, H] (and keep, hh, h contiguous), as the
  // ops' backwards compute it, gx [N, 3H] = xz's gradient and ghh [N, 3H] = hh's (each value
  // v + 0), dh = g*z [N, H] if not null.
  void (*gru_gates)(const T* xz, std::int64_t ldx, const T* hh, const T* h, std::int64_t ldh, std::int64_t N, std::int64_t H, T* h_out,
                    std::int64_t ldo, T* keep);
  void (*gru_grad)(const T* keep, const T* hh, const T* h, const T* g, std::int64_t N, std::int64_t H, T* gx, T* ghh, T* dh);
  // row rule over each of R rows of length L
  void (*sum_rows)(const T* x, std::int64_t R, std::int64_t L, T* out);
  // the row rule along the middle axis of x [A, L, K]: out[a, k] = row rule over l of x[a, l, k]
  // (sum_rows of x with the axis moved last, without moving it)
  void (*sum_mid)(const T* x, std::int64_t A, std::int64_t L, std::int64_t K, T* out);
  // row rule of d*d accumulated by fma, d = a - b (b may be null: d = a)
  void (*sumsq_rows)(const T* a, const T* b, std::int64_t R, std::int64_t L, T* out);
  // batch rule over R rows, per column: out[c] = sum_r x[r*C + c]
  void (*sum_cols)(const T* x, std::int64_t R, std::int64_t C, T* out);
  // softmax family over rows (max over x+0, NaN if any NaN; s = row rule of exp(x - m))
  void (*softmax_rows)(const T* x, std::int64_t R, std::int64_t L, T* y);
  void (*log_softmax_rows)(const T* x, std::int64_t R, std::int64_t L, T* y);
  // gx = y * (gy - dot(gy, y)), dot by the row rule of fma(gy, y, acc)
  void (*softmax_grad_rows)(const T* y, const T* gy, std::int64_t R, std::int64_t L, T* gx);
  // gx = gy - exp(y) * sum(gy), sum by the row rule
  void (*log_softmax_grad_rows)(const T* y, const T* gy, std::int64_t R, std::int64_t L, T* gx);
  // loss[r] = log(s) - (x[t] - m); targets in [0, L)
  void (*xent_rows)(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T* loss);
  // gx[r, i] = (softmax(x_r)[i] - [i == t_r]) * scale
  void (*xent_grad_rows)(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T scale, T* gx);
  // layer norm over rows of length D: mean = rowrule(x) / D; var = rowrule(fma(d, d)) / D with
  // d = x - mean; rstd = 1 / sqrt(var + eps); y = ((x - mean) * rstd) * gamma + beta (gamma,
  // beta may be null: skipped)
  void (*layer_norm_rows)(const T* x, const T* gamma, const T* beta, std::int64_t R, std::int64_t D, T eps, T* y, T* mean,
                          T* rstd);
  // dx = rstd * ((gx - a) - xhat * b): gx = g * gamma (g if null), a = rowrule(gx) / D,
  // b = rowrule(fma(gx, xhat)) / D
  void (*layer_norm_grad_rows)(const T* g, const T* xhat, const T* gamma, const T* rstd, std::int64_t R, std::int64_t D,
                               T* dx);
  // first maximum of each window in row-major order, the first NaN winning; idx: its offset
  // in the plane
  void (*max_pool)(const T* x, const PoolShape& s, T* y, std::int64_t* idx);
  // dx = +0, then g added at idx, windows in row-major order
  void (*max_pool_grad)(const T* g, const std::int64_t* idx, const PoolShape& s, T* dx);
  // (the window summed in row-major order from +0) / (k*k)
  void (*avg_pool)(const T* x, const PoolShape& s, T* y);
  // dx = +0, then t = g / (k*k) added to each pixel of each window, windows and pixels row-major
  void (*avg_pool_grad)(const T* g, const PoolShape& s, T* dx);
  // cols[(c, kh, kw) * ld + (oh, ow)] = x[c, oh*s + kh - p, ow*s + kw - p], +0 outside
  void (*im2col)(const T* x, const ConvShape& s, T* cols);
  // rows[(oh, ow), (c, kh, kw)]: the same values transposed, rows of C*KH*KW (ld unused)
  void (*im2row)(const T* x, const ConvShape& s, T* rows);
  // dx = +0, then each dcols element (rows ld apart) added into its pixel, in row-major order
  // of (c, kh, kw, oh, ow)
  void (*col2im)(const T* dcols, const ConvShape& s, T* dx);
  // Depthwise convolution, numerics §37's grouped conv with one channel per group: y [N, C, OH, OW]
  // = for each output the fma chain over the taps (kh, kw) in row-major order from +0, of
  // w [C, KH*KW] and x (+0 outside); KH*KW <= 32 (one block of §5)
  void (*dw_conv)(const T* x, const T* w, const DwShape& s, T* y);
  // dx [N, C, H, W] = +0, then for the taps (kh, kw) and outputs (oh, ow) in row-major order:
  // dx[pixel] += fma(w, dy, +0) (the GEMM's one-term chain, then col2im)
  void (*dw_conv_dx)(const T* w, const T* dy, const DwShape& s, T* dx);
  // dw [C, KH*KW] = the batch rule over the samples (§3) of each sample's tree over its OH*OW
  // positions (§5) of dy * x (+0 outside)
  void (*dw_conv_dw)(const T* x, const T* dy, const DwShape& s, T* dw);
  // SGD: g' = g + wd*p (if decay); v = m*v + g', d = nesterov ? g' + m*v : v (v null: d = g');
  // p = p - lr*d
  void (*sgd_update)(T* p, const T* g, T* v, std::int64_t n, const SgdCoef<T>& c);
  // Adam: g' = g + wd*p, or AdamW: p = p*shrink (if decay); m = b1*m + ob1*g';
  // v = b2*v + ob2*(g'*g'); p = p - c1*(m / (sqrt(v)/s2 + eps))
  void (*adam_update)(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamCoef<T>& c);
  // y[k] = x[k] rounded to the nearest value of p's format (bf16 or fp16, ties to even) and
  // widened back; NaN stays NaN with its top payload bits, quiet (numerics.md §23). Each
  // element alone: no order to keep, only the bits of the reference's bit trick.
  void (*round_nearest)(Precision p, const T* x, T* y, std::int64_t n);
  // Dropout's mask (numerics §16): m[k] = keep where the uniform of the stream's word first + k is
  // >= p, else +0. f32_words: the f32 uniform of s.u32 compared with (float)p in f32 (f32 tensors,
  // and f64 tensors with an f32 run's masks); else the f64 uniform of s.u64 against p. Each
  // element alone: any order, the same mask.
  void (*dropout_mask)(const rng::Stream& s, std::uint64_t first, std::int64_t n, double p, bool f32_words, T keep, T* m);
};

const Table<float>& table_f32(Isa isa);
const Table<double>& table_f64(Isa isa);

// gemm_samples as its definition reads: each sample's product stored, then the batch rule over
// the samples (sum_cols). The reference, and the fallback of the fast paths.
template <class T, class Gemm, class SumCols>
void gemm_samples_stored(const GemmSamplesArgs<T>& a, Gemm gemm, SumCols sum_cols) {
  const GemmArgs<T>& g = a.g;
  // S + 1 products of M x N, sized by checked arithmetic (the ops bound S*M*N by their operands)
  std::int64_t MN = 0, values = 0;
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(g.M, g.N, &MN) || __builtin_mul_overflow(a.S + 1, MN, &values) ||
      __builtin_mul_overflow(static_cast<std::size_t>(values) + 1, sizeof(T), &bytes))
    throw std::bad_alloc();
  T* part = static_cast<T*>(std::malloc(bytes));
  if (!part) throw std::bad_alloc();
  for (std::int64_t s = 0; s < a.S; ++s) {
    GemmArgs<T> gs = g;
    gs.A = g.A + s * a.sa;
    gs.B = g.B + s * a.sb;
    gs.C = part + s * MN;
    gs.ldc = g.N;
    gs.bias = nullptr;
    gemm(gs);
  }
  T* total = part + a.S * MN;
  sum_cols(part, a.S, MN, total);
  for (std::int64_t i = 0; i < g.M; ++i)
    for (std::int64_t j = 0; j < g.N; ++j) g.C[i * g.ldc + j] = total[i * g.N + j];
  std::free(part);
}

// Precision's values for code that does not include half.hpp (checked in lowp.cpp), and the
// reference of Table::round_nearest (lowp.cpp), the tail of the ISA paths
inline constexpr Precision kBf16 = static_cast<Precision>(1), kFp16 = static_cast<Precision>(2);
template <class T>
void round_nearest_ref(Precision p, const T* x, T* y, std::int64_t n);

template <class T>
const Table<T>& table(Isa isa) {
  if constexpr (sizeof(T) == 4) {
    return table_f32(isa);
  } else {
    return table_f64(isa);
  }
}
// ---- order perturbation (opt-in; docs/numerics.md §19) --------------------------------------
// While a seed is set on the calling thread's execution context, every reduction of its table
// runs on its input permuted by (seed, "perturb").sub(step).sub(call): another IEEE order,
// chosen at random. A context with perturbation on is meant for one thread (train::run and a
// Python Session each have their own).
void set_perturbation(bool on, std::uint64_t seed = 0);
bool perturbation_active();
void perturb_step(std::uint64_t step);  // restarts the call count: a step's orders are reproducible
const Table<float>& perturbed_table_f32();
const Table<double>& perturbed_table_f64();

// MXCSR bits that make arithmetic other than IEEE round-to-nearest with gradual underflow:
// flush-to-zero (15), denormals-are-zero (6), rounding control (13-14).
inline constexpr unsigned kNonIeeeMxcsr = (1u << 15) | (1u << 6) | (3u << 13);
// Throws Error naming the bits when the calling thread's MXCSR has any of them (a library
// built with fast-math can set them for a whole process). Pool threads clear them at start.
void require_ieee_fp();

// Benchmarks only (bench/tax_bench.cpp, the determinism tax): installs an f32 table of
// non-canonical kernels in the calling thread's context (nullptr: the canonical one again), so
// that one process can time a training step on both. The library never sets it; set it only
// between steps, while no kernel runs.
void set_substitute_f32(const Table<float>* t);
const Table<float>* substitute_f32();

// The tables of the calling thread's execution context (src/kernels/backend.hpp), resolved
// when a setting changes: the dispatch path reads one pointer.
const Table<float>& context_table_f32();
const Table<double>& context_table_f64();

template <class T>
const Table<T>& active() {
  require_ieee_fp();
  if constexpr (sizeof(T) == 4) return context_table_f32();
  else return context_table_f64();
}

#include "kernels/pairwise_stack.hpp"

}  // namespace bitgrad::kern
