// Pooling with padding, dilation and ceil mode, adaptive and global pooling (numerics.md §35),
// forward and backward side by side.
//   x [N, C, H, W] -> y [N, C, OH, OW] (one spatial axis: [N, C, L], run as H = 1)
//   a window: its taps inside the input, in row-major order (taps in the padding are skipped:
//     max ignores them, avg's sum would add +0, which moves no bit of a sum from +0)
//   max: the first maximum of the window, the first NaN winning (as max_pool2d); an empty
//     window (wholly in the padding) gives -inf and no gradient. dx: +0, then g added at the
//     chosen pixel, windows in row-major order, per plane
//   avg: (the taps summed from +0 in row-major order) / divisor, one division by an integer
//     (count_include_pad: the window's extent within the padded input; else its tap count;
//     adaptive: the bin's size). dx: +0, then t = g / divisor added to each tap, windows and
//     taps in row-major order, per plane
// The plain case (a square window, the same stride on both axes, no padding, dilation or ceil
// mode) is max_pool2d / avg_pool2d (src/ops/conv.cpp), whose kernels compute the same order.
// Otherwise one implementation, no fast path of its own (max takes each row's windows first, then
// the rows of each window: the same first maximum, max_plane): planes are split over the threads
// and each plane (forward or gradient) is computed whole by one thread, so the threads move no bit.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bitgrad/ops_spatial.hpp"
#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// One spatial axis: input length L, output O; a window of k taps d apart, stride s, pads pb/pe
// (adaptive: PyTorch's bins instead)
struct AxisGeom {
  std::int64_t L, O;
  std::int32_t k, s, pb, pe, d;
  bool adaptive;
};
struct PoolGeom {  // the node's payload
  AxisGeom h, w;
  std::int64_t planes;
  bool include_pad, max;
};

// The taps of output o along an axis inside the input: first + j*step, j < count; size is the
// avg divisor's factor along the axis
struct Taps {
  std::int64_t first, count, step, size;
};
Taps taps_of(const AxisGeom& a, std::int64_t o, bool include_pad) {
  if (a.adaptive) {
    const std::int64_t b = (o * a.L) / a.O, e = ((o + 1) * a.L + a.O - 1) / a.O;
    return {b, e - b, 1, e - b};
  }
  const std::int64_t start = o * a.s - a.pb;
  std::int64_t jlo = start >= 0 ? 0 : (-start + a.d - 1) / a.d;
  std::int64_t jhi = a.L - 1 - start < 0 ? 0 : (a.L - 1 - start) / a.d + 1;
  if (jhi > a.k) jhi = a.k;
  if (jlo > jhi) jlo = jhi;
  // PyTorch: hend = min(hstart + k, H + pad_end), divide by hend - hstart (before clipping)
  const std::int64_t end = std::min<std::int64_t>(start + a.k, a.L + a.pe);
  return {start + jlo * a.d, jhi - jlo, a.d, include_pad ? end - start : jhi - jlo};
}
std::vector<Taps> all_taps(const AxisGeom& a, bool include_pad) {
  std::vector<Taps> t(static_cast<std::size_t>(a.O));
  for (std::int64_t o = 0; o < a.O; ++o) t[static_cast<std::size_t>(o)] = taps_of(a, o, include_pad);
  return t;
}

// take ? v : keep (take 0 or 1), on the bits
template <class T>
T pick_if(std::int64_t take, T v, T keep) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const U m = static_cast<U>(-take);
  return std::bit_cast<T>(static_cast<U>((std::bit_cast<U>(v) & m) | (std::bit_cast<U>(keep) & ~m)));
}

// planes per task: about 4096 taps of work, at least one plane
std::int64_t plane_grain(const PoolGeom& G) {
  const std::int64_t work = std::max<std::int64_t>(1, G.h.L * G.w.L + G.h.O * G.w.O);
  return std::max<std::int64_t>(1, 4096 / work);
}

// The rule's step: a state bv meets a tap v; taken where v is larger or a NaN, unless bv is a
// NaN already (a NaN, once taken, stays)
template <class T>
std::int64_t takes(T v, T bv) {
  return static_cast<std::int64_t>((bv == bv) & ((v != v) | (v > bv)));
}

// One plane of max pooling: each window's first maximum in row-major order of its taps (the
// first NaN winning). Rows first: each input row's windows (their first maximum along the row),
// then each output's rows of its window in order, the first larger or NaN row winner taken.
// That is the row-major rule: the first NaN of the window is the first NaN of the first row
// holding one; else its first maximum is the first maximum of the first row reaching it. Each
// pass runs over contiguous values, tap by tap, so the compiler vectorizes it (a window's taps
// taken output by output read one value a cache line apart).
template <class T>
void max_plane(const PoolGeom& G, const std::vector<Taps>& th, const std::vector<Taps>& tw, const T* plane, T* y, std::int64_t* idx,
               std::vector<T>& m, std::vector<std::int64_t>& mj, std::vector<T>& hv, std::vector<std::int64_t>& hc) {
  const std::int64_t H = G.h.L, W = G.w.L, OW = G.w.O, kw = G.w.adaptive ? 0 : G.w.k, dw = G.w.d;
  // windows wholly inside a row start at 0 .. full - 1 (adaptive bins: none, output by output)
  const std::int64_t full = G.w.adaptive ? 0 : W - (kw - 1) * dw;
  m.resize(static_cast<std::size_t>(std::max<std::int64_t>(full, 1)));
  mj.resize(m.size());
  hv.resize(static_cast<std::size_t>(H * OW));
  hc.resize(hv.size());
  for (std::int64_t r = 0; r < H; ++r) {
    const T* row = plane + r * W;
    T* mm = m.data();
    std::int64_t* mjj = mj.data();
    for (std::int64_t c = 0; c < full; ++c) {
      mm[c] = row[c];
      mjj[c] = 0;
    }
    for (std::int64_t j = 1; j < kw; ++j)
      for (std::int64_t c = 0; c < full; ++c) {
        const T v = row[c + j * dw], bv = mm[c];
        const std::int64_t t = takes(v, bv);
        mm[c] = pick_if(t, v, bv);
        mjj[c] = (j & -t) | (mjj[c] & (t - 1));
      }
    for (std::int64_t ow = 0; ow < OW; ++ow) {
      const Taps& c = tw[static_cast<std::size_t>(ow)];
      T& bv = hv[static_cast<std::size_t>(r * OW + ow)];
      std::int64_t& bc = hc[static_cast<std::size_t>(r * OW + ow)];
      if (kw > 0 && c.count == kw) {  // a whole window: from the row pass
        bv = mm[c.first];
        bc = c.first + mjj[c.first] * dw;
        continue;
      }
      bc = c.count > 0 ? c.first : -1;  // -1: the window is wholly in the padding
      bv = c.count > 0 ? row[c.first] : T(0);
      for (std::int64_t j = 1; j < c.count; ++j) {
        const std::int64_t at = c.first + j * c.step;
        const std::int64_t t = takes(row[at], bv);
        bv = pick_if(t, row[at], bv);
        bc = (at & -t) | (bc & (t - 1));
      }
    }
  }
  for (std::int64_t oh = 0; oh < G.h.O; ++oh) {
    const Taps& a = th[static_cast<std::size_t>(oh)];
    T* yr = y + oh * OW;
    std::int64_t* ir = idx + oh * OW;
    if (a.count == 0) {
      for (std::int64_t ow = 0; ow < OW; ++ow) yr[ow] = -std::numeric_limits<T>::infinity(), ir[ow] = -1;
      continue;
    }
    const T* h0 = hv.data() + a.first * OW;
    const std::int64_t* c0 = hc.data() + a.first * OW;
    for (std::int64_t ow = 0; ow < OW; ++ow) {
      yr[ow] = h0[ow];
      ir[ow] = a.first * W + c0[ow];
    }
    for (std::int64_t i = 1; i < a.count; ++i) {
      const std::int64_t r = a.first + i * a.step;
      const T* hr = hv.data() + r * OW;
      const std::int64_t* cr = hc.data() + r * OW;
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const T v = hr[ow], bv = yr[ow];
        const std::int64_t t = takes(v, bv);
        yr[ow] = pick_if(t, v, bv);
        ir[ow] = ((r * W + cr[ow]) & -t) | (ir[ow] & (t - 1));
      }
    }
    for (std::int64_t ow = 0; ow < OW; ++ow) {
      const bool empty = c0[ow] < 0;  // the column window is in the padding (then in every row)
      yr[ow] = empty ? -std::numeric_limits<T>::infinity() : kern::canon(yr[ow]);
      ir[ow] = empty ? -1 : ir[ow];
    }
  }
}

template <class T>
void pool_forward(const PoolGeom& G, const T* x, T* y, std::int64_t* idx) {
  const std::vector<Taps> th = all_taps(G.h, G.include_pad), tw = all_taps(G.w, G.include_pad);
  const std::int64_t HW = G.h.L * G.w.L, OP = G.h.O * G.w.O, W = G.w.L;
  kern::parallel_for(G.planes, plane_grain(G), [&](std::int64_t b, std::int64_t e) {
    std::vector<T> m, hv;
    std::vector<std::int64_t> mj, hc;
    for (std::int64_t q = b; q < e; ++q) {
      const T* plane = x + q * HW;
      if (G.max) {
        max_plane(G, th, tw, plane, y + q * OP, idx + q * OP, m, mj, hv, hc);
        continue;
      }
      for (std::int64_t oh = 0; oh < G.h.O; ++oh) {
        const Taps& a = th[static_cast<std::size_t>(oh)];
        for (std::int64_t ow = 0; ow < G.w.O; ++ow) {
          const Taps& c = tw[static_cast<std::size_t>(ow)];
          T acc = T(0);
          for (std::int64_t i = 0; i < a.count; ++i)
            for (std::int64_t j = 0; j < c.count; ++j) acc = acc + plane[(a.first + i * a.step) * W + c.first + j * c.step];
          y[q * OP + oh * G.w.O + ow] = kern::canon(acc / static_cast<T>(a.size * c.size));
        }
      }
    }
  });
}

template <class T>
void pool_backward(const PoolGeom& G, const T* g, const std::int64_t* idx, T* dx) {
  const std::vector<Taps> th = all_taps(G.h, G.include_pad), tw = all_taps(G.w, G.include_pad);
  const std::int64_t HW = G.h.L * G.w.L, OP = G.h.O * G.w.O, W = G.w.L;
  kern::parallel_for(G.planes, plane_grain(G), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      T* plane = dx + q * HW;
      for (std::int64_t i = 0; i < HW; ++i) plane[i] = T(0);
      for (std::int64_t oh = 0; oh < G.h.O; ++oh) {
        const Taps& a = th[static_cast<std::size_t>(oh)];
        for (std::int64_t ow = 0; ow < G.w.O; ++ow) {
          const Taps& c = tw[static_cast<std::size_t>(ow)];
          const std::int64_t o = q * OP + oh * G.w.O + ow;
          if (G.max) {
            if (idx[o] >= 0) plane[idx[o]] = kern::canon(plane[idx[o]] + g[o]);
            continue;
          }
          const T t = g[o] / static_cast<T>(a.size * c.size);
          for (std::int64_t i = 0; i < a.count; ++i)
            for (std::int64_t j = 0; j < c.count; ++j) {
              T& d = plane[(a.first + i * a.step) * W + c.first + j * c.step];
              d = kern::canon(d + t);
            }
        }
      }
    }
  });
}

// saved: 0 the chosen offsets (max); payload PoolGeom
void pool_bw(Node& n, const Tensor& g, Tensor* gi) {
  const PoolGeom G = n.payload<PoolGeom>();
  Tensor gc = kern::contiguous(g);
  Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
  const std::int64_t* idx = G.max ? n.saved_tensor(0).data<std::int64_t>() : nullptr;
  BITGRAD_DISPATCH_FLOAT(g.dtype(), G.max ? "max_pool" : "avg_pool", T,
                         [&] { pool_backward<T>(G, gc.data<T>(), idx, kern::out_ptr<T>(dx)); });
  gi[0] = dx;
}

// x [N, C, H, W] (4-d) with the geometry filled; records the node
Tensor run_pool(const char* op, const Tensor& x, const PoolGeom& G, CallSite site) {
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(Shape{x.shape()[0], x.shape()[1], G.h.O, G.w.O}, x.dtype());
  Tensor idx = G.max ? Tensor::empty(Shape{G.planes * G.h.O * G.w.O}, DType::i64) : Tensor();
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] {
    pool_forward<T>(G, xc.data<T>(), kern::out_ptr<T>(y), G.max ? kern::out_ptr<std::int64_t>(idx) : nullptr);
  });
  if (Node* n = ops::record(op, pool_bw, {&x}, y, site)) {
    if (G.max) n->save(0, idx);
    n->set_payload(G);
  }
  return y;
}

// Views x as [N, C, H, W] (a 3-d x as [N, C, 1, L]) and calls f(x4) -> y4, then back to 3-d
template <class F>
Tensor as_2d(const char* op, const Tensor& x, F&& f) {
  ops::check_float(op, x);
  BITGRAD_CHECK(x.ndim() == 3 || x.ndim() == 4, op, "expects x [N, C, L] or [N, C, H, W], got ", x.shape().str());
  if (x.ndim() == 4) return f(x);
  const Shape& s = x.shape();
  Tensor y = f(reshape(x, Shape{s[0], s[1], 1, s[2]}));
  return reshape(y, Shape{s[0], s[1], y.shape()[3]});
}

bool pads_all_zero(const std::vector<int>& pads) {
  return std::all_of(pads.begin(), pads.end(), [](int p) { return p == 0; });
}

Tensor pool(const char* op, bool max, const Tensor& x, const PoolOptions& o, CallSite site) {
  ops::check_float(op, x);
  const int sp = static_cast<int>(o.kernel.size());
  BITGRAD_CHECK(sp == 1 || sp == 2, op, "expects a kernel of 1 or 2 sizes, got ", ops::list_text(o.kernel));
  BITGRAD_CHECK(x.ndim() == 2 + sp, op, "a kernel of ", sp, " sizes expects x [N, C", sp == 2 ? ", H, W" : ", L", "], got ",
                x.shape().str());
  auto per_axis = [&](const std::vector<int>& v, const char* what, std::size_t n) {
    BITGRAD_CHECK(v.empty() || v.size() == n, op, what, " must have ", n, " entries (or none), got ", ops::list_text(v));
    return v;
  };
  const std::vector<int> st = per_axis(o.stride, "stride", static_cast<std::size_t>(sp)), pads = per_axis(o.pads, "pads", static_cast<std::size_t>(2 * sp)),
                         dil = per_axis(o.dilation, "dilation", static_cast<std::size_t>(sp));
  BITGRAD_CHECK(max || dil.empty() || std::all_of(dil.begin(), dil.end(), [](int d) { return d == 1; }), op,
                "has no dilation (got ", ops::list_text(dil), ")");
  PoolGeom G{};
  G.planes = x.shape()[0] * x.shape()[1];
  G.include_pad = o.count_include_pad;
  G.max = max;
  G.h = {1, 1, 1, 1, 0, 0, 1, false};
  for (int a = 0; a < sp; ++a) {
    AxisGeom& g = (sp == 2 && a == 0) ? G.h : G.w;
    const std::int64_t L = x.shape()[2 + a];
    g.L = L;
    g.k = o.kernel[static_cast<std::size_t>(a)];
    g.s = st.empty() ? g.k : st[static_cast<std::size_t>(a)];
    g.pb = pads.empty() ? 0 : pads[static_cast<std::size_t>(a)];
    g.pe = pads.empty() ? 0 : pads[static_cast<std::size_t>(a + sp)];
    g.d = dil.empty() ? 1 : dil[static_cast<std::size_t>(a)];
    g.adaptive = false;
    BITGRAD_CHECK(g.k >= 1 && g.s >= 1 && g.d >= 1 && g.pb >= 0 && g.pe >= 0, op,
                  "kernel, stride and dilation must be >= 1 and pads >= 0, got kernel ", ops::list_text(o.kernel), ", stride ",
                  ops::list_text(st), ", pads ", ops::list_text(pads), ", dilation ", ops::list_text(dil));
    const std::int64_t span = static_cast<std::int64_t>(g.d) * (g.k - 1) + 1, room = L + g.pb + g.pe - span;
    BITGRAD_CHECK(room >= 0, op, "the window (kernel ", ops::list_text(o.kernel), ", dilation ", ops::list_text(dil),
                  ") is larger than the padded input ", x.shape().str(), " (pads ", ops::list_text(pads), ")");
    g.O = (o.ceil_mode ? (room + g.s - 1) / g.s : room / g.s) + 1;
    if (o.ceil_mode && (g.O - 1) * g.s >= L + g.pb) --g.O;  // the last window must start inside the input or its begin padding
  }
  // the plain case is max_pool2d / avg_pool2d themselves (the same order; their fast paths)
  if (sp == 2 && G.h.k == G.w.k && G.h.s == G.w.s && G.h.d == 1 && G.w.d == 1 && pads_all_zero(pads) && !o.ceil_mode)
    return max ? max_pool2d(x, static_cast<int>(G.h.k), static_cast<int>(G.h.s), site)
               : avg_pool2d(x, static_cast<int>(G.h.k), static_cast<int>(G.h.s), site);
  Tensor x4 = sp == 2 ? x : reshape(x, Shape{x.shape()[0], x.shape()[1], 1, x.shape()[2]});
  Tensor y = run_pool(op, x4, G, site);
  return sp == 2 ? y : reshape(y, Shape{x.shape()[0], x.shape()[1], G.w.O});
}

Tensor adaptive(const char* op, bool max, const Tensor& x4, std::int64_t oh, std::int64_t ow, CallSite site) {
  const std::int64_t H = x4.shape()[2], W = x4.shape()[3];
  BITGRAD_CHECK(oh >= 1 && ow >= 1, op, "output size must be >= 1, got ", oh, " x ", ow);
  BITGRAD_CHECK(H >= 1 && W >= 1, op, "expects a non-empty plane, got x ", x4.shape().str());
  PoolGeom G{};
  G.planes = x4.shape()[0] * x4.shape()[1];
  G.max = max;
  G.h = {H, oh, 0, 0, 0, 0, 1, true};
  G.w = {W, ow, 0, 0, 0, 0, 1, true};
  return run_pool(op, x4, G, site);
}

Tensor global(const char* op, bool max, const Tensor& x, CallSite site) {
  ops::check_float(op, x);
  BITGRAD_CHECK(x.ndim() >= 3, op, "expects x [N, C, d1, ...], got ", x.shape().str());
  std::int64_t S = 1;
  for (int d = 2; d < x.ndim(); ++d) S *= x.shape()[d];
  Tensor y = adaptive(op, max, reshape(x, Shape{x.shape()[0], x.shape()[1], 1, S}), 1, 1, site);
  std::vector<std::int64_t> dims(static_cast<std::size_t>(x.ndim()), 1);
  dims[0] = x.shape()[0];
  dims[1] = x.shape()[1];
  return reshape(y, Shape(dims));
}

}  // namespace

Tensor max_pool(const Tensor& x, const PoolOptions& options, CallSite site) { return pool("max_pool", true, x, options, site); }
Tensor avg_pool(const Tensor& x, const PoolOptions& options, CallSite site) { return pool("avg_pool", false, x, options, site); }

Tensor adaptive_avg_pool2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, CallSite site) {
  ops::check_float("adaptive_avg_pool2d", x);
  BITGRAD_CHECK(x.ndim() == 4, "adaptive_avg_pool2d", "expects x [N, C, H, W], got ", x.shape().str());
  return adaptive("adaptive_avg_pool2d", false, x, out_h, out_w, site);
}
Tensor adaptive_max_pool2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, CallSite site) {
  ops::check_float("adaptive_max_pool2d", x);
  BITGRAD_CHECK(x.ndim() == 4, "adaptive_max_pool2d", "expects x [N, C, H, W], got ", x.shape().str());
  return adaptive("adaptive_max_pool2d", true, x, out_h, out_w, site);
}
Tensor adaptive_avg_pool1d(const Tensor& x, std::int64_t out_l, CallSite site) {
  ops::check_float("adaptive_avg_pool1d", x);
  BITGRAD_CHECK(x.ndim() == 3, "adaptive_avg_pool1d", "expects x [N, C, L], got ", x.shape().str());
  return as_2d("adaptive_avg_pool1d", x, [&](const Tensor& x4) { return adaptive("adaptive_avg_pool1d", false, x4, 1, out_l, site); });
}
Tensor adaptive_max_pool1d(const Tensor& x, std::int64_t out_l, CallSite site) {
  ops::check_float("adaptive_max_pool1d", x);
  BITGRAD_CHECK(x.ndim() == 3, "adaptive_max_pool1d", "expects x [N, C, L], got ", x.shape().str());
  return as_2d("adaptive_max_pool1d", x, [&](const Tensor& x4) { return adaptive("adaptive_max_pool1d", true, x4, 1, out_l, site); });
}
Tensor global_avg_pool(const Tensor& x, CallSite site) { return global("global_avg_pool", false, x, site); }
Tensor global_max_pool(const Tensor& x, CallSite site) { return global("global_max_pool", true, x, site); }

}  // namespace bitgrad
