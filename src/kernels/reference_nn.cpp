// Scalar reference kernels of the layers and optimizers (layer norm, pooling, im2col, updates):
// each spells out its order literally (docs/numerics.md §14, §15, §17), on one thread. The
// fast paths (fast_nn.hpp) must give the same bits; tests/kernels compares them with ==.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/kernels.hpp"
#include "kernels/reference.hpp"
#include "kernels/row_rule.hpp"

namespace bitgrad::kern::ref {

namespace {

template <class T>
void layer_norm_rows(const T* x, const T* gamma, const T* beta, std::int64_t R, std::int64_t D, T eps, T* y, T* mean,
                     T* rstd) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * D;
    const T m = row_rule<T>(D, [&](T& l, std::int64_t j) { l = l + xr[j]; }) / static_cast<T>(D);
    const T var = row_rule<T>(D, [&](T& l, std::int64_t j) {
                    const T d = xr[j] - m;
                    l = std::fma(d, d, l);
                  }) /
                  static_cast<T>(D);
    const T rs = T(1) / std::sqrt(var + eps);
    mean[r] = canon(m);
    rstd[r] = canon(rs);
    for (std::int64_t j = 0; j < D; ++j) {
      T h = (xr[j] - m) * rs;
      if (gamma) h = h * gamma[j];
      if (beta) h = h + beta[j];
      y[r * D + j] = canon(h);
    }
  }
}

template <class T>
void layer_norm_grad_rows(const T* g, const T* xhat, const T* gamma, const T* rstd, std::int64_t R, std::int64_t D, T* dx) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* gr = g + r * D;
    const T* hr = xhat + r * D;
    auto gx = [&](std::int64_t j) { return gamma ? gr[j] * gamma[j] : gr[j]; };
    const T a = row_rule<T>(D, [&](T& l, std::int64_t j) { l = l + gx(j); }) / static_cast<T>(D);
    const T b = row_rule<T>(D, [&](T& l, std::int64_t j) { l = std::fma(gx(j), hr[j], l); }) / static_cast<T>(D);
    for (std::int64_t j = 0; j < D; ++j) dx[r * D + j] = canon(rstd[r] * ((gx(j) - a) - hr[j] * b));
  }
}

template <class T>
void max_pool(const T* x, const PoolShape& s, T* y, std::int64_t* idx) {
  for (std::int64_t q = 0; q < s.planes; ++q) {
    const T* plane = x + q * s.H * s.W;
    for (std::int64_t oh = 0; oh < s.OH; ++oh)
      for (std::int64_t ow = 0; ow < s.OW; ++ow) {
        std::int64_t best = oh * s.s * s.W + ow * s.s;
        T bv = plane[best];
        for (std::int64_t kh = 0; kh < s.k; ++kh)
          for (std::int64_t kw = 0; kw < s.k; ++kw) {
            const std::int64_t at = (oh * s.s + kh) * s.W + ow * s.s + kw;
            const T v = plane[at];
            if (bv == bv && (v != v || v > bv)) {  // a NaN, once taken, stays
              bv = v;
              best = at;
            }
          }
        y[(q * s.OH + oh) * s.OW + ow] = canon(bv);
        idx[(q * s.OH + oh) * s.OW + ow] = best;
      }
  }
}

template <class T>
void max_pool_grad(const T* g, const std::int64_t* idx, const PoolShape& s, T* dx) {
  for (std::int64_t i = 0; i < s.planes * s.H * s.W; ++i) dx[i] = T(0);
  for (std::int64_t q = 0; q < s.planes; ++q)
    for (std::int64_t o = 0; o < s.OH * s.OW; ++o) {
      T& d = dx[q * s.H * s.W + idx[q * s.OH * s.OW + o]];
      d = canon(d + g[q * s.OH * s.OW + o]);
    }
}

template <class T>
void avg_pool(const T* x, const PoolShape& s, T* y) {
  const T area = static_cast<T>(s.k * s.k);
  for (std::int64_t q = 0; q < s.planes; ++q)
    for (std::int64_t oh = 0; oh < s.OH; ++oh)
      for (std::int64_t ow = 0; ow < s.OW; ++ow) {
        T acc = T(0);
        for (std::int64_t kh = 0; kh < s.k; ++kh)
          for (std::int64_t kw = 0; kw < s.k; ++kw) acc = acc + x[(q * s.H + oh * s.s + kh) * s.W + ow * s.s + kw];
        y[(q * s.OH + oh) * s.OW + ow] = canon(acc / area);
      }
}

template <class T>
void avg_pool_grad(const T* g, const PoolShape& s, T* dx) {
  const T area = static_cast<T>(s.k * s.k);
  for (std::int64_t i = 0; i < s.planes * s.H * s.W; ++i) dx[i] = T(0);
  for (std::int64_t q = 0; q < s.planes; ++q)
    for (std::int64_t oh = 0; oh < s.OH; ++oh)
      for (std::int64_t ow = 0; ow < s.OW; ++ow) {
        const T t = g[(q * s.OH + oh) * s.OW + ow] / area;
        for (std::int64_t kh = 0; kh < s.k; ++kh)
          for (std::int64_t kw = 0; kw < s.k; ++kw) {
            T& d = dx[(q * s.H + oh * s.s + kh) * s.W + ow * s.s + kw];
            d = canon(d + t);
          }
      }
}

// Calls f(offset in cols, pixel offset in x or -1 for padding) in row-major order of
// (c, kh, kw, oh, ow).
template <class F>
void for_each_col(const ConvShape& s, F f) {
  for (std::int64_t c = 0; c < s.C; ++c)
    for (std::int64_t kh = 0; kh < s.KH; ++kh)
      for (std::int64_t kw = 0; kw < s.KW; ++kw)
        for (std::int64_t oh = 0; oh < s.OH; ++oh)
          for (std::int64_t ow = 0; ow < s.OW; ++ow) {
            const std::int64_t ih = oh * s.s + kh - s.p, iw = ow * s.s + kw - s.p;
            const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
            f(((c * s.KH + kh) * s.KW + kw) * s.cols_ld() + oh * s.OW + ow, inside ? (c * s.H + ih) * s.W + iw : -1);
          }
}

template <class T>
void im2col(const T* x, const ConvShape& s, T* cols) {
  for_each_col(s, [&](std::int64_t at, std::int64_t px) { cols[at] = px >= 0 ? x[px] : T(0); });
}

template <class T>
void im2row(const T* x, const ConvShape& s, T* rows) {
  const std::int64_t P = s.OH * s.OW, CKK = s.ckk();
  ConvShape c = s;
  c.ld = 0;
  for_each_col(c, [&](std::int64_t at, std::int64_t px) { rows[(at % P) * CKK + at / P] = px >= 0 ? x[px] : T(0); });
}

template <class T>
void col2im(const T* dcols, const ConvShape& s, T* dx) {
  for (std::int64_t i = 0; i < s.C * s.H * s.W; ++i) dx[i] = T(0);
  for_each_col(s, [&](std::int64_t at, std::int64_t px) {
    if (px >= 0) dx[px] = canon(dx[px] + dcols[at]);
  });
}

// ---- depthwise convolution -----------------------------------------------------------------
// f(tap, output position, input pixel in the plane or -1): taps (kh, kw) outer, outputs (oh, ow)
// inner, each in row-major order
template <class F>
void for_each_tap(const DwShape& s, F&& f) {
  for (std::int64_t kh = 0; kh < s.KH; ++kh)
    for (std::int64_t kw = 0; kw < s.KW; ++kw)
      for (std::int64_t oh = 0; oh < s.OH; ++oh) {
        const std::int64_t ih = oh * s.sh - s.pt + kh * s.dh;
        for (std::int64_t ow = 0; ow < s.OW; ++ow) {
          const std::int64_t iw = ow * s.sw - s.pl + kw * s.dw;
          const bool in = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
          f(kh * s.KW + kw, oh * s.OW + ow, in ? ih * s.W + iw : std::int64_t(-1));
        }
      }
}

// f(offset of a plane in the input, in the output, of its channel's taps in the weights) for the
// N*C (sample, channel) planes in order
template <class F>
void for_each_plane(const DwShape& s, F&& f) {
  const std::int64_t P = s.OH * s.OW, X = s.H * s.W, KK = s.KH * s.KW;
  for (std::int64_t q = 0; q < s.N * s.C; ++q) f(q * X, q * P, (q % s.C) * KK);
}

template <class T>
void dw_conv(const T* x, const T* w, const DwShape& s, T* y) {
  const std::int64_t P = s.OH * s.OW;
  for_each_plane(s, [&](std::int64_t xo, std::int64_t yo, std::int64_t wo) {
    T* ys = y + yo;
    std::fill(ys, ys + P, T(0));
    for_each_tap(s, [&](std::int64_t t, std::int64_t p, std::int64_t px) { ys[p] = std::fma(w[wo + t], px >= 0 ? x[xo + px] : T(0), ys[p]); });
    for (std::int64_t p = 0; p < P; ++p) ys[p] = canon(ys[p]);
  });
}

template <class T>
void dw_conv_dx(const T* w, const T* dy, const DwShape& s, T* dx) {
  const std::int64_t X = s.H * s.W;
  for_each_plane(s, [&](std::int64_t xo, std::int64_t yo, std::int64_t wo) {
    T* dxs = dx + xo;
    std::fill(dxs, dxs + X, T(0));
    for_each_tap(s, [&](std::int64_t t, std::int64_t p, std::int64_t px) {
      if (px >= 0) dxs[px] = canon(dxs[px] + canon(std::fma(w[wo + t], dy[yo + p], T(0))));
    });
  });
}

template <class T>
void dw_conv_dw(const T* x, const T* dy, const DwShape& s, T* dwt) {
  const std::int64_t P = s.OH * s.OW, X = s.H * s.W, KK = s.KH * s.KW;
  std::vector<T> col(static_cast<std::size_t>(KK * P));
  for (std::int64_t c = 0; c < s.C; ++c) {
    std::vector<PairwiseStack<T>> batch(static_cast<std::size_t>(KK));
    std::vector<T> block(static_cast<std::size_t>(KK), T(0));
    for (std::int64_t n = 0; n < s.N; ++n) {
      const T* xs = x + (n * s.C + c) * X;
      const T* dys = dy + (n * s.C + c) * P;
      for_each_tap(s, [&](std::int64_t t, std::int64_t p, std::int64_t px) { col[static_cast<std::size_t>(t * P + p)] = px >= 0 ? xs[px] : T(0); });
      for (std::int64_t t = 0; t < KK; ++t) {
        // the sample's product: blocks of 32 positions, each an fma chain from +0, the pairwise tree
        PairwiseStack<T> st;
        for (std::int64_t p0 = 0; p0 < P; p0 += kBatchBlock) {
          T acc = T(0);
          for (std::int64_t p = p0; p < p0 + kBatchBlock && p < P; ++p) acc = std::fma(dys[p], col[static_cast<std::size_t>(t * P + p)], acc);
          st.push(acc);
        }
        T& b = block[static_cast<std::size_t>(t)];
        b = b + canon(st.total());
      }
      if ((n + 1) % kBatchBlock == 0 || n + 1 == s.N)
        for (std::int64_t t = 0; t < KK; ++t) {
          batch[static_cast<std::size_t>(t)].push(block[static_cast<std::size_t>(t)]);
          block[static_cast<std::size_t>(t)] = T(0);
        }
    }
    for (std::int64_t t = 0; t < KK; ++t) dwt[c * KK + t] = canon(batch[static_cast<std::size_t>(t)].total());
  }
}

template <class T>
void sgd_update(T* p, const T* g, T* v, std::int64_t n, const SgdCoef<T>& c) {
  for (std::int64_t k = 0; k < n; ++k) {
    const T gk = c.decay ? g[k] + c.wd * p[k] : g[k];
    if (!v) {
      p[k] = canon(p[k] - c.lr * gk);
      continue;
    }
    v[k] = canon(c.momentum * v[k] + gk);
    const T d = c.nesterov ? gk + c.momentum * v[k] : v[k];
    p[k] = canon(p[k] - c.lr * d);
  }
}

#include "kernels/update_rule.hpp"

template <class T>
void adam_update(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamCoef<T>& c) {
  for (std::int64_t k = 0; k < n; ++k) adam_element(p[k], g[k], m[k], v[k], c);
}

template <class T>
void dropout_mask(const rng::Stream& s, std::uint64_t first, std::int64_t n, double p, bool f32_words, T keep, T* m) {
  const float p32 = static_cast<float>(p);
  for (std::int64_t k = 0; k < n; ++k) {
    const std::uint64_t i = first + static_cast<std::uint64_t>(k);
    const bool on = f32_words ? rng::Stream::uniform_of(s.u32(i)) >= p32 : rng::Stream::uniform_of(s.u64(i)) >= p;
    m[k] = on ? keep : T(0);
  }
}

}  // namespace

template <class T>
void add_nn_kernels(Table<T>& tb) {
  tb.layer_norm_rows = &layer_norm_rows<T>;
  tb.layer_norm_grad_rows = &layer_norm_grad_rows<T>;
  tb.max_pool = &max_pool<T>;
  tb.max_pool_grad = &max_pool_grad<T>;
  tb.avg_pool = &avg_pool<T>;
  tb.avg_pool_grad = &avg_pool_grad<T>;
  tb.im2col = &im2col<T>;
  tb.im2row = &im2row<T>;
  tb.col2im = &col2im<T>;
  tb.dw_conv = &dw_conv<T>;
  tb.dw_conv_dx = &dw_conv_dx<T>;
  tb.dw_conv_dw = &dw_conv_dw<T>;
  tb.sgd_update = &sgd_update<T>;
  tb.adam_update = &adam_update<T>;
  tb.dropout_mask = &dropout_mask<T>;
}
template void add_nn_kernels<float>(Table<float>&);
template void add_nn_kernels<double>(Table<double>&);

}  // namespace bitgrad::kern::ref
