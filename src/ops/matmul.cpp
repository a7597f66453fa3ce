// matmul and linear, forward and backward side by side.
//   linear: x [N.., in], W [out, in], b [out] -> y [N.., out] = chain(x W^T) + b
//           dx = dy W (chain over out), dW = dy^T x (batch tree over the N rows),
//           db = batch rule over the N rows of dy
//   matmul: a [.., M, K], b [.., K, N] -> c [.., M, N] = chain over K
//           da = dc b^T (chain over N); db = a^T dc (batch tree over M; over all rows
//           when b is shared by a batch of a); a shared by a batch of b: per-batch da
//           summed over the batch by the batch rule
//   matmul_add: also bias [N] -> c + bias (the GEMM's epilogue: add's rounding);
//           dbias = add's: sum_to(dc, [N])
#include "ops/fused.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

using ops::row_major;

// ---- linear ---------------------------------------------------------------------------------
struct LinearSaved {
  std::int64_t rows, in, out;  // x as [rows, in], W [out, in]
  std::int64_t samples;        // x's leading dimension when it has 3 or more, else rows
};
// saved: 0 = x (as [N, in]), 1 = W
void linear_bw(Node& n, const Tensor& g, Tensor* gi) {
  const LinearSaved& s = n.payload<LinearSaved>();
  const std::int64_t N = s.rows, in = s.in, out = s.out;
  const Tensor& x = n.saved_tensor(0);
  const Tensor& W = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "linear", T, [&] {
    if (n.in[0].needs_grad()) {
      Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
      ops::gemm<T>(N, in, out, row_major(gc.data<T>(), N, out), row_major(W.data<T>(), out, in), kern::out_ptr<T>(dx));
      gi[0] = dx;
    }
    const T *pg = gc.data<T>(), *px = x.data<T>();
    const std::int64_t rows = N / std::max<std::int64_t>(s.samples, 1);  // per sample
    if (n.in[1].needs_grad() || (n.n_inputs > 2 && n.in[2].needs_grad()))
      autograd::SampleCountCheck::note("linear's weight gradient", s.samples, n.in_shape[0]);
    if (n.in[1].needs_grad()) {
      Tensor dW = Tensor::empty(n.in_shape[1], g.dtype());
      auto dw = [&](std::int64_t r0, std::int64_t R, T* to) {
        ops::gemm<T>(out, in, R, row_major(pg + r0 * out, out, R, true), row_major(px + r0 * in, R, in), to);
      };
      if (s.samples == N) dw(0, N, kern::out_ptr<T>(dW));
      else if (ops::samples_in_one_gemm(rows, 0))
        ops::gemm_samples<T>(s.samples, out, in, rows, {pg, 1, out}, rows * out, {px, in, 1}, rows * in, kern::out_ptr<T>(dW));
      else ops::batch_rule_over_samples<T>(s.samples, out * in, g.dtype(), [&](std::int64_t i, T* part) { dw(i * rows, rows, part); }, kern::out_ptr<T>(dW));
      gi[1] = dW;
      autograd::SampleCountCheck::summed(dW, s.samples);
    }
    if (n.n_inputs > 2 && n.in[2].needs_grad()) {
      Tensor db = Tensor::empty(n.in_shape[2], g.dtype());
      if (s.samples == N) kern::active<T>().sum_cols(pg, N, out, kern::out_ptr<T>(db));
      else
        ops::batch_rule_over_samples<T>(
            s.samples, out, g.dtype(), [&](std::int64_t i, T* part) { kern::active<T>().sum_cols(pg + i * rows * out, rows, out, part); },
            kern::out_ptr<T>(db));
      gi[2] = db;
      autograd::SampleCountCheck::summed(db, s.samples);
    }
  });
}

// ---- matmul ---------------------------------------------------------------------------------
// Canonical form: a3 [Ba, M, K], b3 [Bb, K, N], Ba, Bb in {1, B}
// An operand read through its strides, [batch, rows, cols] with element (i, r, c) at
// p + i * sb + r * rs + c * cs: the GEMM packs its operands whatever their layout, so a
// transposed or permuted view is read where it lies (no copy) with the same bits.
struct Strides {
  std::int64_t sb, rs, cs;
};
// t's strides when its batch dimensions (all but the last two) collapse into one stride, else
// false (the operand is then copied).
bool strides_of(const Tensor& t, Strides& st) {
  const int nd = t.ndim();
  st = {0, t.strides()[nd - 2], t.strides()[nd - 1]};
  std::int64_t span = 0;  // the batch's extent so far: the next outer dimension's stride must equal it
  for (int d = nd - 3; d >= 0; --d) {
    if (t.shape()[d] == 1) continue;
    if (span != 0 && t.strides()[d] != span) return false;
    if (span == 0) st.sb = t.strides()[d];
    span = t.strides()[d] * t.shape()[d];
  }
  return true;
}
struct MatmulSaved {
  std::int64_t B, M, K, N;
  std::int64_t samples;      // the leading batch dimension (B when there is one batch dimension)
  Strides a, b;              // the saved operands' strides; b shared: a's rows all rs apart
  bool a_batched, b_batched;  // Ba, Bb = B (else 1)
};
void matmul_bw(Node& n, const Tensor& g, Tensor* gi) {
  const MatmulSaved& s = n.payload<MatmulSaved>();
  const std::int64_t B = s.B, Ba = s.a_batched ? B : 1, Bb = s.b_batched ? B : 1, M = s.M, K = s.K, N = s.N;
  const Tensor& a = n.saved_tensor(0);
  const Tensor& b = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  const Strides sa = s.a, sb = s.b;
  if (n.n_inputs > 2 && n.in[2].needs_grad()) gi[2] = ops::sum_to(g, n.in_shape[2]);  // as add's
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "matmul", T, [&] {
    const T *pa = a.data<T>(), *pb = b.data<T>(), *pg = gc.data<T>();
    const ops::Mat<T> bt{pb, sb.cs, sb.rs};  // b^T [N, K] of (the first batch of) b
    if (n.in[0].needs_grad()) {
      // da_b = dc_b b_b^T, per batch of the broadcast; a shared: summed over the batch
      Tensor da = Tensor::empty(Shape{B, M, K}, g.dtype());
      T* pd = kern::out_ptr<T>(da);
      if (Bb == 1)  // b shared: one GEMM over all B*M rows, as the forward (each row's chain is its own)
        ops::gemm<T>(B * M, K, N, row_major(pg, B * M, N), bt, pd);
      else
        ops::gemm_batch<T>(B, M, K, N, row_major(pg, M, N), M * N, ops::Mat<T>{pb, sb.cs, sb.rs}, sb.sb, pd, M * K);
      if (Ba == B) {
        gi[0] = reshape(da, n.in_shape[0]);
      } else if (s.samples == B) {
        gi[0] = reshape(ops::reduce_sum(da, {0}), n.in_shape[0]);
      } else {  // per sample (its B / samples batches by the batch rule), then over the samples
        autograd::SampleCountCheck::note("matmul's shared-operand gradient", s.samples, n.in_shape[1]);
        const std::int64_t per = B / s.samples;
        Tensor sum = Tensor::empty(Shape{M, K}, g.dtype());
        ops::batch_rule_over_samples<T>(
            s.samples, M * K, g.dtype(), [&](std::int64_t i, T* part) { kern::active<T>().sum_cols(pd + i * per * M * K, per, M * K, part); },
            kern::out_ptr<T>(sum));
        gi[0] = reshape(sum, n.in_shape[0]);
        autograd::SampleCountCheck::summed(sum, s.samples);
      }
    }
    if (n.in[1].needs_grad()) {
      Tensor db;
      if (Bb == B) {
        db = Tensor::empty(Shape{B, K, N}, g.dtype());
        T* pd = kern::out_ptr<T>(db);
        ops::gemm_batch<T>(B, K, N, M, ops::Mat<T>{pa, sa.cs, sa.rs}, Ba == 1 ? 0 : sa.sb, row_major(pg, M, N), M * N, pd, K * N);
        // x [M, K] @ w [K, N], both 2-d: w's gradient is the product over x's M rows (§5), as
        // linear's weight gradient is
        if (B == 1 && n.in_shape[0].ndim() == 2) autograd::SampleCountCheck::summed(db, M);
      } else {
        // b shared: a sample's rows (of all its batches) by the batch tree, then the samples by
        // the batch rule (with one batch dimension; without, every row is a sample)
        db = Tensor::empty(Shape{K, N}, g.dtype());
        const std::int64_t samples = B == 1 ? M : s.samples, rows = B * M / samples;
        autograd::SampleCountCheck::note("matmul's shared-operand gradient", samples, n.in_shape[0]);
        auto part_db = [&](std::int64_t r0, std::int64_t R, T* to) {
          ops::gemm<T>(K, N, R, ops::Mat<T>{pa + r0 * sa.rs, sa.cs, sa.rs}, row_major(pg + r0 * N, R, N), to);
        };
        if (samples == B * M) part_db(0, B * M, kern::out_ptr<T>(db));
        else if (ops::samples_in_one_gemm(rows, 0))  // as linear's: no sample's product stored
          ops::gemm_samples<T>(samples, K, N, rows, {pa, sa.cs, sa.rs}, rows * sa.rs, {pg, N, 1}, rows * N, kern::out_ptr<T>(db));
        else ops::batch_rule_over_samples<T>(samples, K * N, g.dtype(), [&](std::int64_t i, T* part) { part_db(i * rows, rows, part); }, kern::out_ptr<T>(db));
        autograd::SampleCountCheck::summed(db, samples);
      }
      gi[1] = reshape(db, n.in_shape[1]);
    }
  });
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, CallSite site) {
  ops::check_same_dtype("linear", x, weight);
  BITGRAD_CHECK(weight.ndim() == 2, "linear", "the weight must be 2-d [out, in], got ", weight.shape().str());
  BITGRAD_CHECK(x.ndim() >= 1, "linear", "the input must have at least one dimension");
  const std::int64_t in = weight.shape()[1], out = weight.shape()[0];
  BITGRAD_CHECK(x.shape()[x.ndim() - 1] == in, "linear", "the input has ", x.shape()[x.ndim() - 1], " features (shape ",
                x.shape().str(), ") but the weight is ", weight.shape().str(), " (", in, " input features)");
  if (bias.defined()) {
    ops::check_same_dtype("linear", x, bias);
    BITGRAD_CHECK(bias.ndim() == 1 && bias.shape()[0] == out, "linear", "the bias must be [", out, "] for weight ",
                  weight.shape().str(), ", got ", bias.shape().str());
  }
  const std::int64_t rows = x.shape().without(x.ndim() - 1).numel();
  Shape out_shape = x.shape();
  out_shape[out_shape.ndim() - 1] = out;
  Tensor xc = kern::contiguous(x), wc = kern::contiguous(weight);
  Tensor bc = bias.defined() ? kern::contiguous(bias) : Tensor();
  Tensor y = Tensor::empty(out_shape, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "linear", T, [&] {
    ops::gemm<T>(rows, out, in, row_major(xc.data<T>(), rows, in), row_major(wc.data<T>(), in, out, true), kern::out_ptr<T>(y),
                 bc.defined() ? bc.data<T>() : nullptr);
  });
  Node* n = bias.defined() ? ops::record("linear", linear_bw, {&x, &weight, &bias}, y, site)
                           : ops::record("linear", linear_bw, {&x, &weight}, y, site);
  if (n) {
    n->save(0, xc);
    n->save(1, wc);
    n->set_payload(LinearSaved{rows, in, out, ops::samples_of(x, rows)});
  }
  return y;
}

namespace {
Tensor matmul_impl(const Tensor& a, const Tensor& b, const Tensor& bias, CallSite site) {
  ops::check_same_dtype("matmul", a, b);
  BITGRAD_CHECK(a.ndim() >= 1 && b.ndim() >= 1, "matmul", "operands must have at least one dimension, got ", a.shape().str(),
                " and ", b.shape().str());
  // promote vectors: a [K] -> [1, K], b [K] -> [K, 1]; the added dimension is dropped at the end
  // (plain views: the node below records a and b themselves)
  Tensor a2 = a.ndim() == 1 ? Tensor::view_of(a, Shape{1, a.shape()[0]}, Shape{a.shape()[0] * a.strides()[0], a.strides()[0]}, a.offset()) : a;
  Tensor b2 = b.ndim() == 1 ? Tensor::view_of(b, Shape{b.shape()[0], 1}, Shape{b.strides()[0], 1}, b.offset()) : b;
  const Shape& as = a2.shape();
  const Shape& bs = b2.shape();
  const std::int64_t M = as[as.ndim() - 2], K = as[as.ndim() - 1], K2 = bs[bs.ndim() - 2], N = bs[bs.ndim() - 1];
  BITGRAD_CHECK(K == K2, "matmul", "inner dimensions differ: a is ", a.shape().str(), ", b is ", b.shape().str());
  Shape abatch, bbatch;
  for (int d = 0; d < as.ndim() - 2; ++d) abatch.push_back(as[d]);
  for (int d = 0; d < bs.ndim() - 2; ++d) bbatch.push_back(bs[d]);
  Shape batch;
  std::int64_t Ba = abatch.numel(), Bb = bbatch.numel(), B;
  if (abatch.ndim() == 0 || bbatch.ndim() == 0 || abatch == bbatch) {
    batch = abatch.ndim() ? abatch : bbatch;
    B = batch.numel();
    if (abatch.ndim() == 0) Ba = 1;
    if (bbatch.ndim() == 0) Bb = 1;
  } else {
    detail::fail("matmul", "batch dimensions must be equal or absent on one side: a is ", a.shape().str(), ", b is ",
                 b.shape().str());
  }
  // Operands read through their strides where the batch collapses to one stride; with b shared
  // a's B*M rows must also lie rs apart (one GEMM over them, and the weight gradient's samples).
  Strides sa{}, sb{};
  Tensor ac = a2, bc = b2;
  const bool a_rows = strides_of(a2, sa) && (Bb != 1 || Ba == 1 || M == 1 || sa.sb == M * sa.rs);
  if (!a_rows) {
    ac = kern::contiguous(a2);
    sa = {M * K, K, 1};
  } else if (Bb == 1 && Ba != 1 && M == 1) {
    sa.rs = sa.sb;  // one row a batch: the rows are the batch's
  }
  if (!strides_of(b2, sb)) {
    bc = kern::contiguous(b2);
    sb = {K * N, N, 1};
  }
  const Tensor biasc = bias.defined() ? kern::contiguous(bias) : Tensor();
  Shape out3{B, M, N};
  Tensor c = Tensor::empty(out3, a.dtype());
  BITGRAD_DISPATCH_FLOAT(a.dtype(), "matmul", T, [&] {
    const T *pa = ac.data<T>(), *pb = bc.data<T>(), *pbias = biasc.defined() ? biasc.data<T>() : nullptr;
    T* pc = kern::out_ptr<T>(c);
    if (Bb == 1) {
      // b shared (or no batch): one GEMM over all B*M rows of a
      ops::gemm<T>(B * M, N, K, ops::Mat<T>{pa, sa.rs, sa.cs}, ops::Mat<T>{pb, sb.rs, sb.cs}, pc, pbias);
    } else {  // a batch of GEMMs (the small ones, an attention's per head, whole to the threads)
      ops::gemm_batch<T>(B, M, N, K, ops::Mat<T>{pa, sa.rs, sa.cs}, Ba == 1 ? 0 : sa.sb, ops::Mat<T>{pb, sb.rs, sb.cs}, sb.sb, pc, M * N,
                         pbias);
    }
  });
  // the result's shape: batch.., M (unless a was a vector), N (unless b was a vector)
  Shape out = batch;
  if (a.ndim() > 1) out.push_back(M);
  if (b.ndim() > 1) out.push_back(N);
  Tensor y = Tensor::view_of(c, out, contiguous_strides(out), 0);
  // in a backward (a custom function's, `x.T @ g`): a 2-d product over K = the piece's samples
  // sums them in blocks of 32 by the pairwise tree (§5), a complete subtree per aligned piece
  if (a.ndim() == 2 && b.ndim() == 2 && !bias.defined()) autograd::SampleCountCheck::summed(y, K);
  Node* n = bias.defined() ? ops::record("matmul_add", matmul_bw, {&a, &b, &bias}, y, site)
                           : ops::record("matmul", matmul_bw, {&a, &b}, y, site);
  if (n) {
    n->save(0, ac);
    n->save(1, bc);
    n->set_payload(MatmulSaved{B, M, K, N, batch.ndim() > 0 ? batch[0] : 1, sa, sb, Ba == B, Bb == B});
  }
  return y;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, CallSite site) { return matmul_impl(a, b, Tensor(), site); }

Tensor matmul_add(const Tensor& a, const Tensor& b, const Tensor& bias, CallSite site) {
  BITGRAD_CHECK(a.defined() && b.defined() && bias.defined(), "matmul_add", "an operand or the bias is undefined");
  ops::check_same_dtype("matmul_add", a, bias);
  const std::int64_t N = b.ndim() ? b.shape()[b.ndim() - 1] : 0;
  BITGRAD_CHECK(b.ndim() >= 2 && bias.ndim() == 1 && bias.shape()[0] == N, "matmul_add", "the bias must be [", N,
                "] (b's columns, b at least 2-d), got bias ", bias.shape().str(), " for b ", b.shape().str());
  return matmul_impl(a, b, bias, site);
}

}  // namespace bitgrad
