// Shared machinery of the ops (internal): recording nodes, dtype checks, the axis-reduction
// rules used by sum and by the backward of broadcasting, the one GEMM adapter.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
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
// x's values in a contiguous tensor of its own (never x's memory): a view's copy split over the
// threads and, for a transposed one, in tiles (kern::contiguous), not the serial element walk.
Tensor fresh_copy(const Tensor& x);

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
// A GEMM's B [K, N] packed once for the GEMMs c[M, N] = a[M, K] b[K, N] that read it (a
// recurrent weight over a sequence's steps), in the layout of the code path active when it was
// packed (kern::GemmPacking); empty where that path packs none for the shape. A GEMM given one
// packed for another shape or code path reads B itself: packing moves values, never an order.
struct PackedB {
  Tensor buf;
  kern::GemmPacking packing;
  const void* table = nullptr;  // the kern::Table it was packed for
  std::int64_t M = 0, N = 0, K = 0;
};
template <class T>
PackedB pack_b(std::int64_t M, std::int64_t N, std::int64_t K, Mat<T> b) {
  PackedB r;
  const kern::Table<T>& tb = kern::active<T>();
  if (!tb.gemm_packing || M == 0 || N == 0 || K == 0) return r;
  const kern::GemmPacking P = tb.gemm_packing(M, N, K);
  if (!P.usable()) return r;
  r.buf = Tensor::empty(Shape{P.size(K, N)}, dtype_of<T>());
  r.packing = P, r.table = &tb, r.M = M, r.N = N, r.K = K;
  T* d = kern::out_ptr<T>(r.buf);
  for (std::int64_t pc = 0; pc < K; pc += P.chunk) {
    const std::int64_t kc = K - pc < P.chunk ? K - pc : P.chunk;
    for (std::int64_t j0 = 0; j0 < N; j0 += P.nr) {
      T* panel = d + P.panel(K, N, pc, j0);
      const std::int64_t w = N - j0 < P.nr ? N - j0 : P.nr;
      for (std::int64_t k = 0; k < kc; ++k)
        for (std::int64_t j = 0; j < P.nr; ++j) panel[k * P.nr + j] = j < w ? b.p[(pc + k) * b.rs + (j0 + j) * b.cs] : T(0);
    }
  }
  return r;
}

// c[M, N] (row-major, rows `ldc` apart; 0: N) = a[M, K] b[K, N] (then + bias[j]) in the canonical
// order (numerics §5) on the active kernel table; `packed` (may be null) B packed by pack_b.
template <class T>
void gemm(std::int64_t M, std::int64_t N, std::int64_t K, Mat<T> a, Mat<T> b, T* c, const T* bias = nullptr,
          const PackedB* packed = nullptr, std::int64_t ldc = 0) {
  kern::GemmArgs<T> g;
  g.M = M, g.N = N, g.K = K;
  g.A = a.p, g.rsa = a.rs, g.csa = a.cs;
  g.B = b.p, g.rsb = b.rs, g.csb = b.cs;
  g.C = c, g.ldc = ldc ? ldc : N;
  g.bias = bias;
  const kern::Table<T>& tb = kern::active<T>();
  if (packed && packed->table == &tb && packed->M == M && packed->N == N && packed->K == K) {
    g.Bp = packed->buf.template data<T>();
    g.packing = packed->packing;
  }
  tb.gemm(g);
}

// `count` GEMMs c_i [M, N] (row-major, rows N apart) = a_i b_i (+ bias), a_i = a advanced by
// i * a_step (0: one a for all), likewise b and c: each exactly gemm's, the small ones spread
// over the threads whole (kern::Table::gemm_batch).
template <class T>
void gemm_batch(std::int64_t count, std::int64_t M, std::int64_t N, std::int64_t K, Mat<T> a, std::int64_t a_step, Mat<T> b,
                std::int64_t b_step, T* c, std::int64_t c_step, const T* bias = nullptr) {
  kern::GemmBatchArgs<T> s;
  s.count = count, s.sa = a_step, s.sb = b_step, s.sc = c_step;
  s.g.M = M, s.g.N = N, s.g.K = K;
  s.g.A = a.p, s.g.rsa = a.rs, s.g.csa = a.cs;
  s.g.B = b.p, s.g.rsb = b.rs, s.g.csb = b.cs;
  s.g.C = c, s.g.ldc = N;
  s.g.bias = bias;
  const kern::Table<T>& tb = kern::active<T>();
  if (tb.gemm_batch) return tb.gemm_batch(s);
  for (std::int64_t i = 0; i < count; ++i) gemm<T>(M, N, K, {a.p + i * a_step, a.rs, a.cs}, {b.p + i * b_step, b.rs, b.cs}, c + i * c_step, bias);
}

// C [M, N] (row-major) = the batch rule over S samples (§3) of a_s b_s (§5's order over K), a_s
// and b_s the operands advanced by s * a_step, s * b_step: a weight gradient whose samples span
// several rows, with no sample's product stored (kern::Table::gemm_samples).
template <class T>
void gemm_samples(std::int64_t S, std::int64_t M, std::int64_t N, std::int64_t K, Mat<T> a, std::int64_t a_step, Mat<T> b,
                  std::int64_t b_step, T* c) {
  kern::GemmSamplesArgs<T> s;
  s.S = S, s.sa = a_step, s.sb = b_step;
  s.g.M = M, s.g.N = N, s.g.K = K;
  s.g.A = a.p, s.g.rsa = a.rs, s.g.csa = a.cs;
  s.g.B = b.p, s.g.rsb = b.rs, s.g.csb = b.cs;
  s.g.C = c, s.g.ldc = N;
  kern::active<T>().gemm_samples(s);
}
// Whether a weight gradient over samples of k = `per_sample_k` rows each goes through one
// gemm_samples: k within the fast paths' one chunk of the tree (their form that stores no
// product), and the samples' operands it needs laid out side by side at most 2^24 values.
inline bool samples_in_one_gemm(std::int64_t per_sample_k, std::int64_t operand_values) {
  return per_sample_k >= 1 && per_sample_k <= 128 && operand_values <= (std::int64_t(1) << 24);
}

// The samples are the leading dimension: of x with more than two dimensions, x.shape()[0];
// otherwise every row is a sample (numerics.md §3, "samples of several rows").
inline std::int64_t samples_of(const Tensor& x, std::int64_t rows) { return x.ndim() >= 3 ? x.shape()[0] : rows; }

// A reduction over the samples of a batch when a sample spans several rows: sample n's own
// reduction `partial(n, buf)` (X values), then the batch rule (§3) over the samples: blocks of
// 32 samples, each a chain from +0, blocks combined by the pairwise tree. A micro-batch of
// whole blocks of samples is then a complete subtree (T5), whatever the rows per sample.
template <class T, class Partial>
void batch_rule_over_samples(std::int64_t samples, std::int64_t X, DType dt, Partial&& partial, T* out) {
  struct Add {
    Tensor operator()(const Tensor& a, const Tensor& b) const { return kern::add_same_shape(a, b); }
  };
  kern::PairwiseStack<Tensor, Add> tree;
  Tensor part = Tensor::empty(Shape{X}, dt);
  for (std::int64_t n0 = 0; n0 < samples; n0 += kern::kBatchBlock) {
    Tensor acc = Tensor::zeros(Shape{X}, dt);
    T* pa = kern::out_ptr<T>(acc);
    for (std::int64_t n = n0; n < std::min(samples, n0 + kern::kBatchBlock); ++n) {
      partial(n, kern::out_ptr<T>(part));
      kern::active<T>().binary(kern::Binary::add, kern::Bcast::same, pa, part.data<T>(), pa, 1, X);
    }
    tree.push(acc);
  }
  const Tensor total = samples > 0 ? tree.total() : Tensor::zeros(Shape{X}, dt);
  std::copy(total.data<T>(), total.data<T>() + X, out);
}

// "[1, 2, 3]": a list of per-axis options in an error message
std::string list_text(const std::vector<int>& v);

}  // namespace bitgrad::ops
