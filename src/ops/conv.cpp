// conv2d, max_pool2d and avg_pool2d, forward and backward side by side.
//   conv2d: x [N, C, H, W], w [OC, C, KH, KW], b [OC] -> y [N, OC, OH, OW]
//     y: each output one fma chain over (c, kh, kw) row-major, then + b[oc]; computed for a
//        block of samples at once: cols [C*KH*KW, block*OH*OW] (im2col, padding +0, the
//        samples side by side; or its transpose by im2row where output rows are short) and one
//        canonical GEMM w cols (a chain over k whatever N is)
//     dw: per sample dy rows (rows = im2row, [OH*OW, C*KH*KW]: chain over positions), then
//         the batch rule over samples
//     db: per sample the row rule over positions, then the batch rule over samples
//     dx: per block dcols = w^T dy_block (chain over oc); col2im adds each dcols element into
//         its input pixel in row-major order of (c, kh, kw, oh, ow), from +0
//   max_pool2d: first maximum of each window (row-major; NaN wins); dx: g added at that pixel,
//     windows in row-major order
//   avg_pool2d: (sum of the window, row-major from +0) / (k*k); dx: t = g / (k*k) added to each
//     pixel of the window, windows and pixels in row-major order
//   (im2col, im2row, col2im and the pooling kernels are entries of the kernel table)
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;
using ops::row_major;

struct ConvGeom {
  std::int64_t N, C, H, W, OC, KH, KW, OH, OW, s, p;
  std::int64_t ckk() const { return C * KH * KW; }
  std::int64_t positions() const { return OH * OW; }
  kern::ConvShape sample() const { return {C, H, W, KH, KW, OH, OW, s, p}; }
  // The taps t = kh * KW + kw that read the image at some output position. Any other reads only
  // padding everywhere (a 1x1 image under a 3x3 kernel with padding 1 has one live tap of nine):
  // col2im drops every input-gradient term of it and its weight gradient is a chain of +0
  // products, so the backward computes neither.
  std::vector<std::int64_t> live_taps() const {
    auto reaches = [&](std::int64_t k, std::int64_t out, std::int64_t in) {
      for (std::int64_t o = 0; o < out; ++o)
        if (o * s + k - p >= 0 && o * s + k - p < in) return true;
      return false;
    };
    std::vector<std::int64_t> t;
    for (std::int64_t kh = 0; kh < KH; ++kh)
      for (std::int64_t kw = 0; kw < KW; ++kw)
        if (reaches(kh, OH, H) && reaches(kw, OW, W)) t.push_back(kh * KW + kw);
    return t;
  }
  // Samples per block of the forward and input-gradient GEMMs: a cols block of about 512 KiB
  // (it stays in L2 between im2col and the GEMM), or as large as the weight where that is larger,
  // up to 8 MiB (each block's GEMM streams the whole weight: resnet18's 1x1 and 2x2 images have
  // weights of 2-9 MiB and 18-36 KiB a sample), the samples shared evenly among the blocks (a last block of
  // a few samples made a GEMM too narrow for its tiles). From the shape alone, so that the
  // blocks, and under order perturbation the GEMM calls that draw orders, never depend on the threads.
  std::int64_t block(std::size_t elem) const {
    const std::int64_t per = ckk() * positions() * static_cast<std::int64_t>(elem);
    const std::int64_t weight = OC * ckk() * static_cast<std::int64_t>(elem);
    // the block is each thread's scratch, kept across calls: bounded
    const std::int64_t budget = std::clamp(weight, std::int64_t(512) << 10, std::int64_t(8) << 20);
    std::int64_t b = per > 0 ? budget / per : N;
    if (b > N) b = N;
    if (b < 1) return 1;  // an empty batch still has a (zero-sample) block size
    const std::int64_t blocks = (N + b - 1) / b;
    return (N + blocks - 1) / blocks;
  }
};

// Work over the kernel threads, [0, n) in chunks. Under order perturbation the items run in
// order on this thread: the perturbed orders are drawn from its state (numerics.md §19), which
// the pool's workers do not see.
template <class F>
void for_items(std::int64_t n, F&& f) {
  if (kern::perturbation_active()) f(std::int64_t(0), n);
  else kern::parallel_for(n, 1, f);
}

// Blocks of samples go to the threads when there are at least as many; fewer (a 1x1
// convolution's whole batch is often one block) run one after another, each block's im2col and
// GEMM over the threads (fewer blocks than 4 a thread were measured slower that way). The same
// bits either way: each output is its own chain, whichever thread computes it.
bool blocks_to_threads(std::int64_t blocks) {
  return kern::perturbation_active() || kern::in_parallel_region() || blocks >= static_cast<std::int64_t>(kern::pool_threads());
}
// for_items over blocks, or the blocks in order with `each(i0, i1)` for the samples inside
template <class Block>
void over_blocks(std::int64_t blocks, Block&& block) {
  if (blocks_to_threads(blocks)) {
    for_items(blocks, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t blk = b; blk < e; ++blk) block(blk, [](std::int64_t m, auto&& each) { each(std::int64_t(0), m); });
    });
  } else {
    for (std::int64_t blk = 0; blk < blocks; ++blk)
      block(blk, [](std::int64_t m, auto&& each) { kern::parallel_for(m, 1, each); });
  }
}

// A buffer per thread, kept across calls (no heap allocation per step); `slot` tells the
// buffers of one call apart.
template <class T, int slot>
T* scratch(std::int64_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < static_cast<std::size_t>(n)) buf.resize(static_cast<std::size_t>(n));
  return buf.data();
}

// The weight gradient's gemm_samples where some taps are dead (ConvGeom::live_taps): the live
// taps' columns of each sample's rows (c, t), KK apart, each into [OC, C] and then to its place;
// a dead tap's element (oc, c, t) is every sample's chain of dy * (+0) products — +0, or NaN
// where one of those dy is not finite — summed by the batch rule: +0, or the canonical NaN.
template <class T>
void dead_taps_weight_grad(const ConvGeom& G, const std::vector<std::int64_t>& live, const T* dy, const T* rows, T* dw) {
  const std::int64_t P = G.positions(), CKK = G.ckk(), KK = G.KH * G.KW;
  for (std::int64_t o = 0; o < G.OC; ++o) {  // every tap the dead value, the live ones overwritten below
    bool finite = true;
    for (std::int64_t i = 0; i < G.N; ++i)
      for (std::int64_t q = 0; q < P; ++q) finite = finite && std::isfinite(dy[(i * G.OC + o) * P + q]);
    std::fill(dw + o * CKK, dw + (o + 1) * CKK, finite ? T(0) : kern::canonical_nan<T>());
  }
  T* part = scratch<T, 3>(G.OC * G.C);
  for (const std::int64_t t : live) {
    ops::gemm_samples<T>(G.N, G.OC, G.C, P, {dy, P, 1}, G.OC * P, {rows + t, CKK, KK}, P * CKK, part);
    for (std::int64_t o = 0; o < G.OC; ++o)
      for (std::int64_t c = 0; c < G.C; ++c) dw[o * CKK + c * KK + t] = part[o * G.C + c];
  }
}

// saved: 0 x (contiguous), 1 weight; payload ConvGeom
void conv2d_bw(Node& n, const Tensor& g, Tensor* gi) {
  const ConvGeom G = n.payload<ConvGeom>();
  const std::int64_t P = G.positions(), CKK = G.ckk(), X = G.C * G.H * G.W, KK = G.KH * G.KW;
  const std::vector<std::int64_t> live = G.live_taps();
  const bool all_live = static_cast<std::int64_t>(live.size()) == KK;
  const Tensor& x = n.saved_tensor(0);
  const Tensor& w = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "conv2d", T, [&] {
    const T* pg = gc.data<T>();
    const T* px = x.data<T>();
    const T* pw = w.data<T>();
    const auto& K = kern::active<T>();
    if (n.in[0].needs_grad()) {
      Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
      T* pdx = kern::out_ptr<T>(dx);
      const std::int64_t nb = G.block(sizeof(T)), blocks = (G.N + nb - 1) / nb;
      over_blocks(blocks, [&](std::int64_t blk, auto&& samples) {
        T* dyb = scratch<T, 0>(G.OC * nb * P);
        T* dcols = scratch<T, 1>(CKK * nb * P);
        const std::int64_t n0 = blk * nb, m = G.N - n0 < nb ? G.N - n0 : nb, L = m * P;
        // dy of the block as one matrix [OC, m*P], the samples side by side
        samples(m, [&](std::int64_t i0, std::int64_t i1) {
          for (std::int64_t i = i0; i < i1; ++i)
            for (std::int64_t o = 0; o < G.OC; ++o) std::copy_n(pg + ((n0 + i) * G.OC + o) * P, P, dyb + o * L + i * P);
        });
        if (all_live) ops::gemm<T>(CKK, L, G.OC, row_major(pw, CKK, G.OC, true), row_major(dyb, G.OC, L), dcols);
        else  // the live taps' rows of dcols (rows (c, t), KK apart), each element the same chain over oc
          for (const std::int64_t t : live)
            ops::gemm<T>(G.C, L, G.OC, {pw + t, KK, CKK}, row_major(dyb, G.OC, L), dcols + t * L, nullptr, nullptr, KK * L);
        kern::ConvShape s = G.sample();
        s.ld = L;
        samples(m, [&](std::int64_t i0, std::int64_t i1) {
          for (std::int64_t i = i0; i < i1; ++i) K.col2im(dcols + i * P, s, pdx + (n0 + i) * X);
        });
      });
      gi[0] = dx;
    }
    if (n.in[1].needs_grad()) {
      Tensor dw = Tensor::empty(n.in_shape[1], g.dtype());
      autograd::SampleCountCheck::note("conv2d's weight gradient", G.N, n.in_shape[0]);
      if (ops::samples_in_one_gemm(P, G.N * P * CKK)) {
        // every sample's rows, then one gemm_samples: the samples' products are not stored
        Tensor rows = Tensor::empty(Shape{G.N, P, CKK}, g.dtype());
        T* pr = kern::out_ptr<T>(rows);
        for_items(G.N, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) K.im2row(px + i * X, G.sample(), pr + i * P * CKK);
        });
        T* pdw = kern::out_ptr<T>(dw);
        if (all_live) ops::gemm_samples<T>(G.N, G.OC, CKK, P, {pg, P, 1}, G.OC * P, {pr, CKK, 1}, P * CKK, pdw);
        else dead_taps_weight_grad(G, live, pg, pr, pdw);
      } else {
        Tensor part = Tensor::empty(Shape{G.N, G.OC * CKK}, g.dtype());
        T* pp = kern::out_ptr<T>(part);
        // rows_n = cols_nᵀ: at stride 1 with output rows at least as wide as the kernel and at
        // least 64 taps per output, built as cols (each output row one run) and read transposed by
        // the GEMM, rather than as rows of KW-element segments; the same values in the same places
        // of B, so the same bits. Measured on Zen 4: 8 and 16 channels at 3x3 (72, 144 taps) 15-20%
        // faster, 1 or 3 channels (9-27 taps, a GEMM of a few columns read transposed) 10-35% slower.
        const bool by_cols = G.s == 1 && G.OW >= G.KW && CKK >= 64;
        for_items(G.N, [&](std::int64_t b, std::int64_t e) {
          T* rows = scratch<T, 2>(P * CKK);
          for (std::int64_t i = b; i < e; ++i) {
            if (by_cols) K.im2col(px + i * X, G.sample(), rows);
            else K.im2row(px + i * X, G.sample(), rows);
            ops::gemm<T>(G.OC, CKK, P, row_major(pg + i * G.OC * P, G.OC, P), row_major(rows, P, CKK, by_cols), pp + i * G.OC * CKK);
          }
        });
        K.sum_cols(pp, G.N, G.OC * CKK, kern::out_ptr<T>(dw));
      }
      gi[1] = dw;
      autograd::SampleCountCheck::summed(dw, G.N);
    }
    if (n.n_inputs > 2 && n.in[2].needs_grad()) {
      Tensor per = Tensor::empty(Shape{G.N, G.OC}, g.dtype());
      K.sum_rows(pg, G.N * G.OC, P, kern::out_ptr<T>(per));
      Tensor db = Tensor::empty(n.in_shape[2], g.dtype());
      autograd::SampleCountCheck::note("conv2d's bias gradient", G.N, n.in_shape[0]);
      K.sum_cols(per.data<T>(), G.N, G.OC, kern::out_ptr<T>(db));
      gi[2] = db;
      autograd::SampleCountCheck::summed(db, G.N);
    }
  });
}

// ---- pooling -----------------------------------------------------------------------------
kern::PoolShape pool_shape(const char* op, const Tensor& x, int kernel, int& stride) {
  ops::check_float(op, x);
  BITGRAD_CHECK(x.ndim() == 4, op, "expects x [N, C, H, W], got ", x.shape().str());
  BITGRAD_CHECK(kernel >= 1, op, "kernel must be >= 1, got ", kernel);
  if (stride == 0) stride = kernel;
  BITGRAD_CHECK(stride >= 1, op, "stride must be >= 1, got ", stride);
  const std::int64_t H = x.shape()[2], W = x.shape()[3];
  BITGRAD_CHECK(H >= kernel && W >= kernel, op, "kernel ", kernel, " is larger than the input ", x.shape().str());
  return {x.shape()[0] * x.shape()[1], H, W, kernel, stride, (H - kernel) / stride + 1, (W - kernel) / stride + 1};
}

// payload kern::PoolShape (max: saved 0 = the index of each window's maximum in its plane)
void max_pool_bw(Node& n, const Tensor& g, Tensor* gi) {
  const kern::PoolShape G = n.payload<kern::PoolShape>();
  const std::int64_t* idx = n.saved_tensor(0).data<std::int64_t>();
  Tensor gc = kern::contiguous(g);
  Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "max_pool2d", T, [&] {
    kern::active<T>().max_pool_grad(gc.data<T>(), idx, G, kern::out_ptr<T>(dx));
  });
  gi[0] = dx;
}

void avg_pool_bw(Node& n, const Tensor& g, Tensor* gi) {
  const kern::PoolShape G = n.payload<kern::PoolShape>();
  Tensor gc = kern::contiguous(g);
  Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "avg_pool2d", T, [&] { kern::active<T>().avg_pool_grad(gc.data<T>(), G, kern::out_ptr<T>(dx)); });
  gi[0] = dx;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride, int padding, CallSite site) {
  ops::check_same_dtype("conv2d", x, weight);
  BITGRAD_CHECK(x.ndim() == 4, "conv2d", "expects x [N, C, H, W], got ", x.shape().str());
  BITGRAD_CHECK(weight.ndim() == 4, "conv2d", "expects weight [OC, C, KH, KW], got ", weight.shape().str());
  BITGRAD_CHECK(weight.shape()[1] == x.shape()[1], "conv2d", "the input has ", x.shape()[1], " channels (", x.shape().str(),
                ") but the weight expects ", weight.shape()[1], " (", weight.shape().str(), ")");
  BITGRAD_CHECK(stride >= 1 && padding >= 0, "conv2d", "stride must be >= 1 and padding >= 0, got ", stride, " and ", padding);
  ConvGeom G{x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3], weight.shape()[0], weight.shape()[2], weight.shape()[3],
             0, 0, stride, padding};
  BITGRAD_CHECK(G.H + 2 * G.p >= G.KH && G.W + 2 * G.p >= G.KW, "conv2d", "kernel ", weight.shape().str(),
                " is larger than the padded input ", x.shape().str(), " (padding ", padding, ")");
  G.OH = (G.H + 2 * G.p - G.KH) / G.s + 1;
  G.OW = (G.W + 2 * G.p - G.KW) / G.s + 1;
  if (bias.defined()) {
    ops::check_same_dtype("conv2d", x, bias);
    BITGRAD_CHECK(bias.ndim() == 1 && bias.shape()[0] == G.OC, "conv2d", "bias must be [", G.OC, "], got ", bias.shape().str());
  }
  const std::int64_t P = G.positions(), CKK = G.ckk(), X = G.C * G.H * G.W;
  Tensor xc = kern::contiguous(x), wc = kern::contiguous(weight);
  Tensor bc = bias.defined() ? kern::contiguous(bias) : Tensor();
  Tensor y = Tensor::empty(Shape{G.N, G.OC, G.OH, G.OW}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "conv2d", T, [&] {
    const T* px = xc.data<T>();
    const T* pw = wc.data<T>();
    const T* pb = bc.defined() ? bc.data<T>() : nullptr;
    T* py = kern::out_ptr<T>(y);
    const auto& K = kern::active<T>();
    const std::int64_t nb = G.block(sizeof(T)), blocks = (G.N + nb - 1) / nb;
    // Output rows narrower than the kernel's (resnet18's 4x4 to 1x1 images): the lowering as
    // rows [positions, C*KH*KW], each window row one short contiguous segment, and the GEMM reads
    // it transposed; wider: cols, each output row one run. The same values in the same places of
    // the GEMM's B, so the same bits.
    const bool by_rows = G.OW < G.KW;
    over_blocks(blocks, [&](std::int64_t blk, auto&& samples) {
      T* cols = scratch<T, 1>(CKK * nb * P);
      T* yb = scratch<T, 0>(G.OC * nb * P);
      const std::int64_t n0 = blk * nb, m = G.N - n0 < nb ? G.N - n0 : nb, L = m * P;
      kern::ConvShape s = G.sample();
      s.ld = L;
      samples(m, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) {
          if (by_rows) K.im2row(px + (n0 + i) * X, G.sample(), cols + i * P * CKK);
          else K.im2col(px + (n0 + i) * X, s, cols + i * P);
        }
      });
      ops::gemm<T>(G.OC, L, CKK, row_major(pw, G.OC, CKK), row_major(cols, CKK, L, by_rows), yb);
      // + b[oc] after the chain (row o of the block, on the vector units), then [OC, m*P] back
      // to the samples' [OC, P]
      if (pb) K.binary(kern::Binary::add, kern::Bcast::col, yb, pb, yb, G.OC, L);
      samples(m, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t o = 0; o < G.OC; ++o) std::copy_n(yb + o * L + i * P, P, py + ((n0 + i) * G.OC + o) * P);
      });
    });
  });
  Node* n = bias.defined() ? ops::record("conv2d", conv2d_bw, {&x, &weight, &bias}, y, site)
                           : ops::record("conv2d", conv2d_bw, {&x, &weight}, y, site);
  if (n) {
    n->save(0, xc);
    n->save(1, wc);
    n->set_payload(G);
  }
  return y;
}

namespace {
// max: also the index of each window's maximum, saved for the backward
Tensor pool2d(const char* op, bool max, const Tensor& x, int kernel, int stride, CallSite site) {
  const kern::PoolShape G = pool_shape(op, x, kernel, stride);
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(Shape{x.shape()[0], x.shape()[1], G.OH, G.OW}, x.dtype());
  Tensor idx = max ? Tensor::empty(Shape{G.planes * G.OH * G.OW}, DType::i64) : Tensor();
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] {
    if (max) kern::active<T>().max_pool(xc.data<T>(), G, kern::out_ptr<T>(y), kern::out_ptr<std::int64_t>(idx));
    else kern::active<T>().avg_pool(xc.data<T>(), G, kern::out_ptr<T>(y));
  });
  if (Node* n = ops::record(op, max ? max_pool_bw : avg_pool_bw, {&x}, y, site)) {
    if (max) n->save(0, idx);
    n->set_payload(G);
  }
  return y;
}
}  // namespace

Tensor max_pool2d(const Tensor& x, int kernel, int stride, CallSite site) { return pool2d("max_pool2d", true, x, kernel, stride, site); }

Tensor avg_pool2d(const Tensor& x, int kernel, int stride, CallSite site) { return pool2d("avg_pool2d", false, x, kernel, stride, site); }

}  // namespace bitgrad
