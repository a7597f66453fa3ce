// conv (stride, pads and dilation per axis, asymmetric pads, groups; 1-d and 2-d) and
// conv_transpose, forward and backward side by side (numerics.md §37).
//   conv: x [N, C, H, W], w [OC, C/g, KH, KW], b [OC] -> y [N, OC, OH, OW] (1-d: H = KH = 1)
//     y: per sample and group, cols = im2col of the group's channels ([Cg*KH*KW, OH*OW], +0
//        outside the input) and one canonical GEMM w_g cols: each output one fma chain over
//        (c, kh, kw) of its group from +0, then + b[oc] (conv2d's order, §14)
//     dx: per sample and group dcols = w_g^T dy_g (chains over the group's oc), then col2im:
//         dx = +0, each dcols element added into its pixel in row-major order of (c, kh, kw, oh, ow)
//     dw: per sample and group dy_g cols_g^T (chains over the positions (oh, ow)), then the batch
//         rule over the samples; db: per sample the row rule over the positions, then the batch rule
//   conv_transpose: the adjoint. In conv terms its output is the conv's input and its input the
//     conv's output: y = col2im(w_g^T x_g) + b (the conv's dx, then + b[oc] per element);
//     dx = the conv's forward of dy without bias; dw = the conv's dw with (dy, x) for (x, dy)
//   The plain case of conv (groups 1, equal strides, equal pads on every side, no dilation) runs
//   conv2d itself (its fast im2col and col2im); every other case runs the loops here, whose
//   order is the same, with the same GEMM.
#include <algorithm>
#include <string>
#include <vector>

#include "bitgrad/ops_spatial.hpp"
#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;
using ops::row_major;

// In the conv's orientation: input [N, Cin, H, W] -> output [N, Cout, OH, OW]
struct CGeom {
  std::int64_t N, Cin, H, W, Cout, OH, OW;
  std::int32_t groups, KH, KW, sh, sw, pt, pl, dh, dw;
  std::int64_t cin_g() const { return Cin / groups; }
  std::int64_t cout_g() const { return Cout / groups; }
  std::int64_t ckk() const { return cin_g() * KH * KW; }  // a group's cols rows
  std::int64_t P() const { return OH * OW; }
};

// f(cols offset, input offset in the sample or -1) in row-major order of (c, kh, kw, oh, ow),
// c over group gi's channels
template <class F>
void for_each_col(const CGeom& G, std::int64_t gi, F&& f) {
  const std::int64_t Cg = G.cin_g(), P = G.P();
  for (std::int64_t c = 0; c < Cg; ++c)
    for (std::int64_t kh = 0; kh < G.KH; ++kh)
      for (std::int64_t kw = 0; kw < G.KW; ++kw) {
        const std::int64_t row = (c * G.KH + kh) * G.KW + kw;
        for (std::int64_t oh = 0; oh < G.OH; ++oh) {
          const std::int64_t ih = oh * G.sh - G.pt + kh * G.dh;
          const bool hin = ih >= 0 && ih < G.H;
          for (std::int64_t ow = 0; ow < G.OW; ++ow) {
            const std::int64_t iw = ow * G.sw - G.pl + kw * G.dw;
            const bool in = hin && iw >= 0 && iw < G.W;
            f(row * P + oh * G.OW + ow, in ? ((gi * Cg + c) * G.H + ih) * G.W + iw : std::int64_t(-1));
          }
        }
      }
}

template <class T, int slot>
T* scratch(std::int64_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < static_cast<std::size_t>(n)) buf.resize(static_cast<std::size_t>(n));
  return buf.data();
}

template <class F>
void for_items(std::int64_t n, F&& f) {
  if (kern::perturbation_active()) f(std::int64_t(0), n);
  else kern::parallel_for(n, 1, f);
}

// A depthwise conv (one input and one output channel per group, at most one block of taps)
// runs the kernels made for it: the same chains, without a GEMM per sample and channel.
// Perturbation (§19) takes the GEMM path, whose reductions it perturbs.
bool depthwise(const CGeom& G) {
  return G.cin_g() == 1 && G.cout_g() == 1 && G.KH * G.KW <= kern::kBatchBlock && !kern::perturbation_active();
}
kern::DwShape dw_shape(const CGeom& G) {
  return {G.N, G.Cin, G.H, G.W, G.KH, G.KW, G.OH, G.OW, G.sh, G.sw, G.pt, G.pl, G.dh, G.dw};
}

// y [N, Cout, P] = conv of x [N, Cin, H, W] with w [Cout, Cin/g, KH, KW] (+ b[oc] when b)
template <class T>
void conv_forward(const CGeom& G, const T* x, const T* w, const T* b, T* y) {
  const std::int64_t P = G.P(), CKK = G.ckk(), OCg = G.cout_g(), X = G.Cin * G.H * G.W;
  if (depthwise(G)) {
    kern::active<T>().dw_conv(x, w, dw_shape(G), y);
    if (b)
      for (std::int64_t q = 0; q < G.N * G.Cout; ++q)
        for (std::int64_t p = 0; p < P; ++p) y[q * P + p] = kern::canon(y[q * P + p] + b[q % G.Cout]);
    return;
  }
  for_items(G.N, [&](std::int64_t n0, std::int64_t n1) {
    T* cols = scratch<T, 0>(CKK * P);
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t gi = 0; gi < G.groups; ++gi) {
        const T* xs = x + n * X;
        for_each_col(G, gi, [&](std::int64_t at, std::int64_t px) { cols[at] = px >= 0 ? xs[px] : T(0); });
        T* yg = y + (n * G.Cout + gi * OCg) * P;
        ops::gemm<T>(OCg, P, CKK, row_major(w + gi * OCg * CKK, OCg, CKK), row_major(cols, CKK, P), yg);
        if (b)
          for (std::int64_t o = 0; o < OCg; ++o) {
            const T bo = b[gi * OCg + o];
            for (std::int64_t q = 0; q < P; ++q) yg[o * P + q] = kern::canon(yg[o * P + q] + bo);
          }
      }
  });
}

// dx [N, Cin, H, W] = col2im(w_g^T dy_g) per sample and group, from +0
template <class T>
void conv_input_grad(const CGeom& G, const T* w, const T* dy, T* dx) {
  const std::int64_t P = G.P(), CKK = G.ckk(), OCg = G.cout_g(), X = G.Cin * G.H * G.W;
  if (depthwise(G)) return kern::active<T>().dw_conv_dx(w, dy, dw_shape(G), dx);
  for_items(G.N, [&](std::int64_t n0, std::int64_t n1) {
    T* dcols = scratch<T, 1>(CKK * P);
    for (std::int64_t n = n0; n < n1; ++n) {
      T* dxs = dx + n * X;
      std::fill(dxs, dxs + X, T(0));
      for (std::int64_t gi = 0; gi < G.groups; ++gi) {
        ops::gemm<T>(CKK, P, OCg, row_major(w + gi * OCg * CKK, CKK, OCg, true), row_major(dy + (n * G.Cout + gi * OCg) * P, OCg, P),
                     dcols);
        for_each_col(G, gi, [&](std::int64_t at, std::int64_t px) {
          if (px >= 0) dxs[px] = kern::canon(dxs[px] + dcols[at]);
        });
      }
    }
  });
}

// dw [Cout, Cin/g, KH, KW]: per sample dy_g cols_g^T (chains over positions), then the batch rule
template <class T>
Tensor conv_weight_grad(const CGeom& G, const T* x, const T* dy, const Shape& wshape, DType dt) {
  const std::int64_t P = G.P(), CKK = G.ckk(), OCg = G.cout_g(), X = G.Cin * G.H * G.W, WN = G.Cout * CKK;
  autograd::SampleCountCheck::note("a convolution's weight gradient", G.N, wshape);
  if (depthwise(G)) {
    Tensor dw = Tensor::empty(wshape, dt);
    kern::active<T>().dw_conv_dw(x, dy, dw_shape(G), kern::out_ptr<T>(dw));
    return dw;
  }
  if (ops::samples_in_one_gemm(P, G.N * CKK * P)) {
    // per group: every sample's cols, then one gemm_samples (no sample's product stored)
    Tensor dw = Tensor::empty(wshape, dt);
    Tensor cols = Tensor::empty(Shape{G.N, CKK, P}, dt);
    T* pc = kern::out_ptr<T>(cols);
    for (std::int64_t gi = 0; gi < G.groups; ++gi) {
      for_items(G.N, [&](std::int64_t n0, std::int64_t n1) {
        for (std::int64_t n = n0; n < n1; ++n) {
          const T* xs = x + n * X;
          T* cs = pc + n * CKK * P;
          for_each_col(G, gi, [&](std::int64_t at, std::int64_t px) { cs[at] = px >= 0 ? xs[px] : T(0); });
        }
      });
      ops::gemm_samples<T>(G.N, OCg, CKK, P, {dy + gi * OCg * P, P, 1}, G.Cout * P, {pc, 1, P}, CKK * P,
                           kern::out_ptr<T>(dw) + gi * OCg * CKK);
    }
    return dw;
  }
  Tensor part = Tensor::empty(Shape{G.N, WN}, dt);
  T* pp = kern::out_ptr<T>(part);
  for_items(G.N, [&](std::int64_t n0, std::int64_t n1) {
    T* cols = scratch<T, 2>(CKK * P);
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t gi = 0; gi < G.groups; ++gi) {
        const T* xs = x + n * X;
        for_each_col(G, gi, [&](std::int64_t at, std::int64_t px) { cols[at] = px >= 0 ? xs[px] : T(0); });
        ops::gemm<T>(OCg, CKK, P, row_major(dy + (n * G.Cout + gi * OCg) * P, OCg, P), row_major(cols, P, CKK, true),
                     pp + n * WN + gi * OCg * CKK);
      }
  });
  Tensor dw = Tensor::empty(wshape, dt);
  kern::active<T>().sum_cols(pp, G.N, WN, kern::out_ptr<T>(dw));
  return dw;
}

// db [C]: per sample the row rule over the P positions of g [N, C, P], then the batch rule
template <class T>
Tensor bias_grad(const T* g, std::int64_t N, std::int64_t C, std::int64_t P, const Shape& bshape, DType dt) {
  Tensor per = Tensor::empty(Shape{N, C}, dt);
  kern::active<T>().sum_rows(g, N * C, P, kern::out_ptr<T>(per));
  Tensor db = Tensor::empty(bshape, dt);
  autograd::SampleCountCheck::note("a convolution's bias gradient", N, Shape{N, C, P});
  kern::active<T>().sum_cols(per.data<T>(), N, C, kern::out_ptr<T>(db));
  return db;
}

// saved: 0 x, 1 weight (contiguous); payload CGeom
void conv_bw(Node& n, const Tensor& g, Tensor* gi) {
  const CGeom G = n.payload<CGeom>();
  const Tensor& x = n.saved_tensor(0);
  const Tensor& w = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "conv", T, [&] {
    if (n.in[0].needs_grad()) {
      Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
      conv_input_grad<T>(G, w.data<T>(), gc.data<T>(), kern::out_ptr<T>(dx));
      gi[0] = dx;
    }
    if (n.in[1].needs_grad()) gi[1] = conv_weight_grad<T>(G, x.data<T>(), gc.data<T>(), n.in_shape[1], g.dtype());
    if (n.n_inputs > 2 && n.in[2].needs_grad()) gi[2] = bias_grad<T>(gc.data<T>(), G.N, G.Cout, G.P(), n.in_shape[2], g.dtype());
    autograd::SampleCountCheck::summed(gi[1], G.N);
    if (n.n_inputs > 2) autograd::SampleCountCheck::summed(gi[2], G.N);
  });
}

// conv_transpose: G in the conv's orientation (its input = this op's output); saved 0 x, 1 w
void conv_transpose_bw(Node& n, const Tensor& g, Tensor* gi) {
  const CGeom G = n.payload<CGeom>();
  const Tensor& x = n.saved_tensor(0);
  const Tensor& w = n.saved_tensor(1);
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "conv_transpose", T, [&] {
    if (n.in[0].needs_grad()) {
      Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
      conv_forward<T>(G, gc.data<T>(), w.data<T>(), nullptr, kern::out_ptr<T>(dx));
      gi[0] = dx;
    }
    if (n.in[1].needs_grad()) gi[1] = conv_weight_grad<T>(G, gc.data<T>(), x.data<T>(), n.in_shape[1], g.dtype());
    autograd::SampleCountCheck::summed(gi[1], G.N);
    if (n.n_inputs > 2 && n.in[2].needs_grad()) {
      gi[2] = bias_grad<T>(gc.data<T>(), G.N, G.Cin, G.H * G.W, n.in_shape[2], g.dtype());
      autograd::SampleCountCheck::summed(gi[2], G.N);
    }
  });
}

// The options per axis, checked: [stride, pad begin, pad end, dilation, output padding] of
// each of the sp axes
struct AxisOpt {
  int s, pb, pe, d, op;
};
std::vector<AxisOpt> axis_options(const char* op, const ConvOptions& o, int sp, bool transpose) {
  auto check = [&](const std::vector<int>& v, std::size_t n, const char* what) {
    BITGRAD_CHECK(v.empty() || v.size() == n, op, what, " must have ", n, " entries (or none), got ", ops::list_text(v));
  };
  const auto n = static_cast<std::size_t>(sp);
  check(o.stride, n, "stride");
  check(o.pads, 2 * n, "pads");
  check(o.dilation, n, "dilation");
  check(o.output_padding, n, "output_padding");
  BITGRAD_CHECK(transpose || o.output_padding.empty() || std::all_of(o.output_padding.begin(), o.output_padding.end(), [](int v) { return v == 0; }),
                op, "has no output_padding (conv_transpose has), got ", ops::list_text(o.output_padding));
  std::vector<AxisOpt> r(n);
  for (std::size_t a = 0; a < n; ++a) {
    AxisOpt& x = r[a];
    x.s = o.stride.empty() ? 1 : o.stride[a];
    x.pb = o.pads.empty() ? 0 : o.pads[a];
    x.pe = o.pads.empty() ? 0 : o.pads[a + n];
    x.d = o.dilation.empty() ? 1 : o.dilation[a];
    x.op = o.output_padding.empty() ? 0 : o.output_padding[a];
    BITGRAD_CHECK(x.s >= 1 && x.d >= 1 && x.pb >= 0 && x.pe >= 0 && x.op >= 0, op,
                  "stride and dilation must be >= 1, pads and output_padding >= 0; got stride ", ops::list_text(o.stride), ", pads ",
                  ops::list_text(o.pads), ", dilation ", ops::list_text(o.dilation), ", output_padding ", ops::list_text(o.output_padding));
    BITGRAD_CHECK(x.op < std::max(x.s, x.d), op, "output_padding must be smaller than the stride or the dilation, got ",
                  ops::list_text(o.output_padding), " with stride ", ops::list_text(o.stride), " and dilation ", ops::list_text(o.dilation));
  }
  return r;
}

struct Prepared {
  int sp;
  Shape x4, w4;  // 4-d views
};
Prepared prepare(const char* op, const Tensor& x, const Tensor& w, const Tensor& b, int groups, bool transpose) {
  ops::check_same_dtype(op, x, w);
  BITGRAD_CHECK(x.ndim() == 3 || x.ndim() == 4, op, "expects x [N, C, L] or [N, C, H, W], got ", x.shape().str());
  BITGRAD_CHECK(w.ndim() == x.ndim(), op, "expects a weight of ", x.ndim(), " dimensions for x ", x.shape().str(), ", got ",
                w.shape().str());
  BITGRAD_CHECK(groups >= 1, op, "groups must be >= 1, got ", groups);
  const std::int64_t C = x.shape()[1];
  BITGRAD_CHECK(C % groups == 0, op, "the input's ", C, " channels (", x.shape().str(), ") do not split into ", groups, " groups");
  if (transpose) {
    BITGRAD_CHECK(w.shape()[0] == C, op, "the input has ", C, " channels (", x.shape().str(), ") but the weight ", w.shape().str(),
                  " expects ", w.shape()[0], " (weight [C, OC / groups, ...])");
  } else {
    BITGRAD_CHECK(w.shape()[0] % groups == 0, op, "the weight's ", w.shape()[0], " output channels (", w.shape().str(),
                  ") do not split into ", groups, " groups");
    BITGRAD_CHECK(w.shape()[1] * groups == C, op, "the input has ", C, " channels (", x.shape().str(), ") but the weight ",
                  w.shape().str(), " with ", groups, " groups expects ", w.shape()[1] * groups);
  }
  const std::int64_t OC = transpose ? w.shape()[1] * groups : w.shape()[0];
  if (b.defined()) {
    ops::check_same_dtype(op, x, b);
    BITGRAD_CHECK(b.ndim() == 1 && b.shape()[0] == OC, op, "bias must be [", OC, "], got ", b.shape().str());
  }
  const int sp = x.ndim() - 2;
  if (sp == 2) return {2, x.shape(), w.shape()};
  return {1, Shape{x.shape()[0], x.shape()[1], 1, x.shape()[2]}, Shape{w.shape()[0], w.shape()[1], 1, w.shape()[2]}};
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& o, CallSite site) {
  const char* op = "conv";
  const Prepared pr = prepare(op, x, weight, bias, o.groups, false);
  const std::vector<AxisOpt> ax = axis_options(op, o, pr.sp, false);
  const AxisOpt hz{1, 0, 0, 1, 0};
  const AxisOpt& ah = pr.sp == 2 ? ax[0] : hz;
  const AxisOpt& aw = ax[static_cast<std::size_t>(pr.sp - 1)];
  CGeom G{pr.x4[0], pr.x4[1], pr.x4[2], pr.x4[3], pr.w4[0], 0, 0, o.groups, static_cast<std::int32_t>(pr.w4[2]),
          static_cast<std::int32_t>(pr.w4[3]), ah.s, aw.s, ah.pb, aw.pb, ah.d, aw.d};
  auto out = [&](std::int64_t L, std::int64_t K, const AxisOpt& a, const char* axis) {
    const std::int64_t room = L + a.pb + a.pe - (static_cast<std::int64_t>(a.d) * (K - 1) + 1);
    BITGRAD_CHECK(room >= 0, op, "the kernel ", weight.shape().str(), " (dilation ", ops::list_text(o.dilation), ") is larger than the ",
                  axis, " axis of the padded input ", x.shape().str(), " (pads ", ops::list_text(o.pads), ")");
    return room / a.s + 1;
  };
  G.OH = out(G.H, G.KH, ah, "H");
  G.OW = out(G.W, G.KW, aw, pr.sp == 2 ? "W" : "L");
  // the plain case: conv2d itself, its kernels and bits
  if (pr.sp == 2 && G.groups == 1 && ah.s == aw.s && ah.d == 1 && aw.d == 1 && ah.pb == ah.pe && aw.pb == aw.pe && ah.pb == aw.pb)
    return conv2d(x, weight, bias, ah.s, ah.pb, site);
  Tensor x4 = kern::contiguous(x), w4 = kern::contiguous(weight);  // the kernels read them flat
  Tensor bc = bias.defined() ? kern::contiguous(bias) : Tensor();
  Tensor y = Tensor::empty(pr.sp == 2 ? Shape{G.N, G.Cout, G.OH, G.OW} : Shape{G.N, G.Cout, G.OW}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] {
    conv_forward<T>(G, x4.data<T>(), w4.data<T>(), bc.defined() ? bc.data<T>() : nullptr, kern::out_ptr<T>(y));
  });
  Node* n = bias.defined() ? ops::record(op, conv_bw, {&x, &weight, &bias}, y, site) : ops::record(op, conv_bw, {&x, &weight}, y, site);
  if (n) {
    n->save(0, x4);
    n->save(1, w4);
    n->set_payload(G);
  }
  return y;
}

Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& o, CallSite site) {
  const char* op = "conv_transpose";
  const Prepared pr = prepare(op, x, weight, bias, o.groups, true);
  const std::vector<AxisOpt> ax = axis_options(op, o, pr.sp, true);
  const AxisOpt hz{1, 0, 0, 1, 0};
  const AxisOpt& ah = pr.sp == 2 ? ax[0] : hz;
  const AxisOpt& aw = ax[static_cast<std::size_t>(pr.sp - 1)];
  auto out = [&](std::int64_t L, std::int64_t K, const AxisOpt& a) {
    const std::int64_t v = (L - 1) * a.s - a.pb - a.pe + static_cast<std::int64_t>(a.d) * (K - 1) + 1 + a.op;
    BITGRAD_CHECK(v >= 1, op, "the output would be empty: x ", x.shape().str(), ", weight ", weight.shape().str(), ", stride ",
                  ops::list_text(o.stride), ", pads ", ops::list_text(o.pads), ", dilation ", ops::list_text(o.dilation));
    return v;
  };
  const std::int64_t OC = pr.w4[1] * o.groups;
  // the conv whose input gradient this is: input [N, OC, OH, OW] -> output [N, C, H, W]
  CGeom G{pr.x4[0], OC, out(pr.x4[2], pr.w4[2], ah), out(pr.x4[3], pr.w4[3], aw), pr.x4[1], pr.x4[2], pr.x4[3], o.groups,
          static_cast<std::int32_t>(pr.w4[2]), static_cast<std::int32_t>(pr.w4[3]), ah.s, aw.s, ah.pb, aw.pb, ah.d, aw.d};
  Tensor x4 = kern::contiguous(x), w4 = kern::contiguous(weight);  // the kernels read them flat
  Tensor bc = bias.defined() ? kern::contiguous(bias) : Tensor();
  Tensor y = Tensor::empty(pr.sp == 2 ? Shape{G.N, OC, G.H, G.W} : Shape{G.N, OC, G.W}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] {
    T* py = kern::out_ptr<T>(y);
    conv_input_grad<T>(G, w4.data<T>(), x4.data<T>(), py);
    if (bc.defined()) {
      const T* pb = bc.data<T>();
      const std::int64_t P = G.H * G.W;
      for (std::int64_t i = 0; i < G.N * OC; ++i)
        for (std::int64_t q = 0; q < P; ++q) py[i * P + q] = kern::canon(py[i * P + q] + pb[i % OC]);
    }
  });
  Node* n = bias.defined() ? ops::record(op, conv_transpose_bw, {&x, &weight, &bias}, y, site)
                           : ops::record(op, conv_transpose_bw, {&x, &weight}, y, site);
  if (n) {
    n->save(0, x4);
    n->save(1, w4);
    n->set_payload(G);
  }
  return y;
}

}  // namespace bitgrad
