// Upsampling (interpolation) of the last two axes, PyTorch's F.interpolate (numerics.md §36),
// forward and backward side by side.
//   x [N, C, H, W] -> y [N, C, OH, OW]
//   nearest: y[oh, ow] = x[src(oh), src(ow)], src(o) = o when O = L, o >> 1 when O = 2L, else
//     min(floor(float(o) * scale), L - 1) in f32 with scale = float(1 / scale_factor) or
//     float(L) / O (PyTorch's nearest_idx). dx: +0, then g added at its source pixel, outputs
//     in row-major order, per plane
//   bilinear: per axis, in the dtype (PyTorch's opmath for f32 and f64): r = scale * o
//     (align_corners, scale = (L - 1) / (O - 1), 0 for O = 1) or max(scale * (o + 0.5) - 0.5, 0)
//     (scale = 1 / scale_factor or L / O); i0 = trunc(r), i1 = i0 + (i0 < L - 1), l1 =
//     min(max(r - i0, 0), 1), l0 = 1 - l1 (O = L without align_corners: i0 = i1 = o, l0 = 1,
//     l1 = 0). y = h0 * (w0 * x00 + w1 * x01) + h1 * (w0 * x10 + w1 * x11), each operation
//     rounded, left to right. dx: +0, then for each output in row-major order its four terms
//     (h * w) * g added at 00, 01, 10, 11 in that order, per plane
// One implementation: planes split over the threads, each plane whole on one thread.
#include <cmath>
#include <vector>

#include "bitgrad/ops_spatial.hpp"
#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct UpGeom {  // the node's payload
  std::int64_t planes, H, W, OH, OW;
  double scale_h, scale_w;
  bool bilinear, align_corners;
};

std::int64_t nearest_src(std::int64_t o, std::int64_t L, std::int64_t O, double scale) {
  if (O == L) return o;
  if (O == 2 * L) return o >> 1;
  const float sc = scale > 0 ? static_cast<float>(1.0 / scale) : static_cast<float>(L) / static_cast<float>(O);
  const auto i = static_cast<std::int64_t>(std::floor(static_cast<float>(o) * sc));
  return i < L - 1 ? i : L - 1;
}

template <class T>
struct Lerp {
  std::int64_t i0, i1;
  T l0, l1;
};
template <class T>
Lerp<T> lerp_of(std::int64_t o, std::int64_t L, std::int64_t O, double scale, bool align) {
  if (O == L && !align) return {o, o, T(1), T(0)};
  T sc;
  if (align) sc = O > 1 ? static_cast<T>(L - 1) / static_cast<T>(O - 1) : T(0);
  else sc = scale > 0 ? static_cast<T>(1.0 / scale) : static_cast<T>(L) / static_cast<T>(O);
  T r;
  if (align) {
    r = sc * static_cast<T>(o);
  } else {
    r = sc * (static_cast<T>(o) + T(0.5)) - T(0.5);
    if (r < T(0)) r = T(0);
  }
  const auto i0 = static_cast<std::int64_t>(r);
  const std::int64_t i1 = i0 + (i0 < L - 1 ? 1 : 0);
  T l1 = r - static_cast<T>(i0);
  l1 = l1 < T(0) ? T(0) : (l1 > T(1) ? T(1) : l1);
  return {i0, i1, T(1) - l1, l1};
}

std::int64_t plane_grain(const UpGeom& G) { return std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, G.OH * G.OW)); }

template <class T>
void up_forward(const UpGeom& G, const T* x, T* y) {
  const std::int64_t HW = G.H * G.W, OP = G.OH * G.OW;
  if (!G.bilinear) {
    std::vector<std::int64_t> sh(static_cast<std::size_t>(G.OH)), sw(static_cast<std::size_t>(G.OW));
    for (std::int64_t o = 0; o < G.OH; ++o) sh[static_cast<std::size_t>(o)] = nearest_src(o, G.H, G.OH, G.scale_h);
    for (std::int64_t o = 0; o < G.OW; ++o) sw[static_cast<std::size_t>(o)] = nearest_src(o, G.W, G.OW, G.scale_w);
    kern::parallel_for(G.planes, plane_grain(G), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t q = b; q < e; ++q)
        for (std::int64_t oh = 0; oh < G.OH; ++oh)
          for (std::int64_t ow = 0; ow < G.OW; ++ow)
            y[q * OP + oh * G.OW + ow] = x[q * HW + sh[static_cast<std::size_t>(oh)] * G.W + sw[static_cast<std::size_t>(ow)]];
    });
    return;
  }
  std::vector<Lerp<T>> lh(static_cast<std::size_t>(G.OH)), lw(static_cast<std::size_t>(G.OW));
  for (std::int64_t o = 0; o < G.OH; ++o) lh[static_cast<std::size_t>(o)] = lerp_of<T>(o, G.H, G.OH, G.scale_h, G.align_corners);
  for (std::int64_t o = 0; o < G.OW; ++o) lw[static_cast<std::size_t>(o)] = lerp_of<T>(o, G.W, G.OW, G.scale_w, G.align_corners);
  kern::parallel_for(G.planes, plane_grain(G), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      const T* p = x + q * HW;
      for (std::int64_t oh = 0; oh < G.OH; ++oh) {
        const Lerp<T>& h = lh[static_cast<std::size_t>(oh)];
        for (std::int64_t ow = 0; ow < G.OW; ++ow) {
          const Lerp<T>& w = lw[static_cast<std::size_t>(ow)];
          const T top = w.l0 * p[h.i0 * G.W + w.i0] + w.l1 * p[h.i0 * G.W + w.i1];
          const T bot = w.l0 * p[h.i1 * G.W + w.i0] + w.l1 * p[h.i1 * G.W + w.i1];
          y[q * OP + oh * G.OW + ow] = kern::canon(h.l0 * top + h.l1 * bot);
        }
      }
    }
  });
}

template <class T>
void up_backward(const UpGeom& G, const T* g, T* dx) {
  const std::int64_t HW = G.H * G.W, OP = G.OH * G.OW;
  std::vector<Lerp<T>> lh(static_cast<std::size_t>(G.OH)), lw(static_cast<std::size_t>(G.OW));
  for (std::int64_t o = 0; o < G.OH; ++o)
    lh[static_cast<std::size_t>(o)] =
        G.bilinear ? lerp_of<T>(o, G.H, G.OH, G.scale_h, G.align_corners) : Lerp<T>{nearest_src(o, G.H, G.OH, G.scale_h), 0, T(1), T(0)};
  for (std::int64_t o = 0; o < G.OW; ++o)
    lw[static_cast<std::size_t>(o)] =
        G.bilinear ? lerp_of<T>(o, G.W, G.OW, G.scale_w, G.align_corners) : Lerp<T>{nearest_src(o, G.W, G.OW, G.scale_w), 0, T(1), T(0)};
  kern::parallel_for(G.planes, plane_grain(G), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      T* d = dx + q * HW;
      for (std::int64_t i = 0; i < HW; ++i) d[i] = T(0);
      for (std::int64_t oh = 0; oh < G.OH; ++oh) {
        const Lerp<T>& h = lh[static_cast<std::size_t>(oh)];
        for (std::int64_t ow = 0; ow < G.OW; ++ow) {
          const Lerp<T>& w = lw[static_cast<std::size_t>(ow)];
          const T gv = g[q * OP + oh * G.OW + ow];
          if (!G.bilinear) {
            T& t = d[h.i0 * G.W + w.i0];
            t = kern::canon(t + gv);
            continue;
          }
          auto add = [&](std::int64_t at, T hl, T wl) { d[at] = kern::canon(d[at] + (hl * wl) * gv); };
          add(h.i0 * G.W + w.i0, h.l0, w.l0);
          add(h.i0 * G.W + w.i1, h.l0, w.l1);
          add(h.i1 * G.W + w.i0, h.l1, w.l0);
          add(h.i1 * G.W + w.i1, h.l1, w.l1);
        }
      }
    }
  });
}

void upsample_bw(Node& n, const Tensor& g, Tensor* gi) {
  const UpGeom G = n.payload<UpGeom>();
  Tensor gc = kern::contiguous(g);
  Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "upsample", T, [&] { up_backward<T>(G, gc.data<T>(), kern::out_ptr<T>(dx)); });
  gi[0] = dx;
}

Tensor upsample(const char* op, const Tensor& x, std::int64_t oh, std::int64_t ow, bool bilinear, bool align, double sh, double sw,
                CallSite site) {
  ops::check_float(op, x);
  BITGRAD_CHECK(x.ndim() == 4, op, "expects x [N, C, H, W], got ", x.shape().str());
  BITGRAD_CHECK(oh >= 1 && ow >= 1, op, "output size must be >= 1, got ", oh, " x ", ow);
  BITGRAD_CHECK(x.shape()[2] >= 1 && x.shape()[3] >= 1, op, "expects a non-empty plane, got x ", x.shape().str());
  BITGRAD_CHECK(sh >= 0 && sw >= 0, op, "scale factors must be > 0 (0: none), got ", sh, " and ", sw);
  const UpGeom G{x.shape()[0] * x.shape()[1], x.shape()[2], x.shape()[3], oh, ow, sh, sw, bilinear, align};
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(Shape{x.shape()[0], x.shape()[1], oh, ow}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] { up_forward<T>(G, xc.data<T>(), kern::out_ptr<T>(y)); });
  if (Node* n = ops::record(op, upsample_bw, {&x}, y, site)) n->set_payload(G);
  return y;
}

}  // namespace

Tensor upsample_nearest2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, double scale_h, double scale_w, CallSite site) {
  return upsample("upsample_nearest2d", x, out_h, out_w, false, false, scale_h, scale_w, site);
}
Tensor upsample_bilinear2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, bool align_corners, double scale_h,
                           double scale_w, CallSite site) {
  return upsample("upsample_bilinear2d", x, out_h, out_w, true, align_corners, scale_h, scale_w, site);
}

}  // namespace bitgrad
