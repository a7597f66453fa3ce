// Fast paths of the layer and optimizer kernels (layer norm, pooling, im2col, updates), written
// once over the lane types of simd.hpp and instantiated by isa_avx2.cpp and isa_avx512.cpp. Each
// reproduces its reference in reference_nn.cpp exactly. Threads split rows, planes or
// elements, and each output is computed whole by one thread, so the split never moves a bit.
//
// Included inside an ISA namespace after fast_impl.hpp.

// ---- layer norm -----------------------------------------------------------------------------
template <class T>
void layer_norm_rows_fast(const T* x, const T* gamma, const T* beta, std::int64_t R, std::int64_t D, T eps, T* y, T* mean,
                          T* rstd) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  constexpr int NV = Lanes16<T>::NV;
  parallel_for(R, row_grain(D), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      T* yr = y + r * D;
      const T m = row_rule_fast<T>(D, [&](Lanes16<T>& ln, std::int64_t i, int c) { add_lanes(ln, xr + i, c); }) /
                  static_cast<T>(D);
      const V mv = V(m);
      const T var = row_rule_fast<T>(D, [&](Lanes16<T>& ln, std::int64_t i, int c) {
                      if (c < kLanes) {
                        tail_lanes(ln, c, [&](T& l, int j) {
                          const T d = xr[i + j] - m;
                          l = std::fma(d, d, l);
                        });
                        return;
                      }
                      for (int v = 0; v < NV; ++v) {
                        const V d = Tr::load(xr + i + v * Tr::W) - mv;
                        ln.acc[v] = fma(d, d, ln.acc[v]);
                      }
                    }) /
                    static_cast<T>(D);
      const T rs = T(1) / std::sqrt(var + eps);
      mean[r] = canon(m);
      rstd[r] = canon(rs);
      const V rv = V(rs);
      std::int64_t j = 0;
      for (; j + Tr::W <= D; j += Tr::W) {
        V h = (Tr::load(xr + j) - mv) * rv;
        if (gamma) h = h * Tr::load(gamma + j);
        if (beta) h = h + Tr::load(beta + j);
        Tr::store(yr + j, h);
      }
      for (; j < D; ++j) {
        T h = (xr[j] - m) * rs;
        if (gamma) h = h * gamma[j];
        if (beta) h = h + beta[j];
        yr[j] = canon(h);
      }
    }
  });
}

template <class T>
void layer_norm_grad_rows_fast(const T* g, const T* xhat, const T* gamma, const T* rstd, std::int64_t R, std::int64_t D,
                               T* dx) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  parallel_for(R, row_grain(D), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<T>& buf = scratch<T>();
    if (static_cast<std::int64_t>(buf.size()) < D) buf.resize(static_cast<std::size_t>(D));
    T* gx = buf.data();
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * D;
      const T* hr = xhat + r * D;
      T* dr = dx + r * D;
      for (std::int64_t j = 0; j < D; ++j) gx[j] = gamma ? gr[j] * gamma[j] : gr[j];
      const T a = row_rule_fast<T>(D, [&](Lanes16<T>& ln, std::int64_t i, int c) { add_lanes(ln, gx + i, c); }) /
                  static_cast<T>(D);
      const T b = row_rule_fast<T>(D, [&](Lanes16<T>& ln, std::int64_t i, int c) { fma_lanes(ln, gx + i, hr + i, c); }) /
                  static_cast<T>(D);
      const V av = V(a), bv = V(b), rv = V(rstd[r]);
      std::int64_t j = 0;
      for (; j + Tr::W <= D; j += Tr::W)
        Tr::store(dr + j, rv * ((Tr::load(gx + j) - av) - Tr::load(hr + j) * bv));
      for (; j < D; ++j) dr[j] = canon(rstd[r] * ((gx[j] - a) - hr[j] * b));
    }
  });
}

// ---- pooling --------------------------------------------------------------------------------
// "First NaN, else first maximum" of (l, r) with l first, as bit masks: on real data the
// comparisons are coin flips, and as branches they mispredict. The index follows.
template <class T>
inline T first_max(T l, T r, std::int64_t& il, std::int64_t ir) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const bool take = (l == l) & ((r != r) | (r > l));
  const U m = U(0) - static_cast<U>(take);
  const std::uint64_t mi = std::uint64_t(0) - static_cast<std::uint64_t>(take);
  il = static_cast<std::int64_t>((static_cast<std::uint64_t>(ir) & mi) | (static_cast<std::uint64_t>(il) & ~mi));
  return std::bit_cast<T>(static_cast<U>((std::bit_cast<U>(r) & m) | (std::bit_cast<U>(l) & ~m)));
}

// One output row of 2x2 windows at stride 2 (LeNet's, and the most common pooling); at0 is the
// plane offset of its first window. The selection is associative, so reducing the window
// (a, b; c, d) as ((a, b), (c, d)) picks the element the row-major scan picks, without branches.
template <class T>
void pool2x2_row(const T* plane, std::int64_t W, std::int64_t OW, std::int64_t at0, T* y, std::int64_t* idx) {
  std::int64_t ow = 0;
#if BITGRAD_SIMD_LEVEL == 2
  // f32 on AVX-512, 16 windows at a time: the even and odd columns of the two rows are split
  // out by permutes, then the same ((a, b), (c, d)) selection in lanes (plane offsets fit 32
  // bits, checked by the caller)
  if constexpr (std::is_same_v<T, float>) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i two_iota = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    // take the right one: the left is not NaN and the right is NaN or greater
    auto take = [](__m512 l, __m512 r) -> __mmask16 {
      return static_cast<__mmask16>(~_mm512_cmp_ps_mask(l, l, _CMP_UNORD_Q) &
                                    (_mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(r, l, _CMP_GT_OQ)));
    };
    for (; ow < OW; ow += 16) {
      const int n = static_cast<int>(OW - ow < 16 ? OW - ow : 16);  // windows in this group
      const float* r0 = plane + at0 + 2 * ow;
      const float* r1 = r0 + W;
      const __m512 a0 = loadf_part(r0, 2 * n, 0.0f).v, a1 = loadf_part(r0 + 16, 2 * n - 16, 0.0f).v;
      const __m512 b0 = loadf_part(r1, 2 * n, 0.0f).v, b1 = loadf_part(r1 + 16, 2 * n - 16, 0.0f).v;
      const __m512 a = _mm512_permutex2var_ps(a0, ev, a1), b = _mm512_permutex2var_ps(a0, od, a1);
      const __m512 c = _mm512_permutex2var_ps(b0, ev, b1), d = _mm512_permutex2var_ps(b0, od, b1);
      const __mmask16 tab = take(a, b), tcd = take(c, d);
      const __m512 mab = _mm512_mask_blend_ps(tab, a, b), mcd = _mm512_mask_blend_ps(tcd, c, d);
      const __mmask16 t = take(mab, mcd);
      VT<float>::store_part(y + ow, F(_mm512_mask_blend_ps(t, mab, mcd)), n);
      // offset in the window: 0 / 1 on the first row, W / W + 1 on the second
      const __m512i one = _mm512_set1_epi32(1);
      const __m512i oab = _mm512_maskz_mov_epi32(tab, one);
      const __m512i ocd = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(W)), _mm512_maskz_mov_epi32(tcd, one));
      const __m512i at = _mm512_add_epi32(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(at0 + 2 * ow)), two_iota),
                                          _mm512_mask_blend_epi32(t, oab, ocd));
      const __mmask8 lo = static_cast<__mmask8>(n >= 8 ? 0xff : (1u << n) - 1u), hi = static_cast<__mmask8>(n > 8 ? (1u << (n - 8)) - 1u : 0u);
      _mm512_mask_storeu_epi64(idx + ow, lo, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at)));
      _mm512_mask_storeu_epi64(idx + ow + 8, hi, _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1)));
    }
    return;
  }
#endif
  for (; ow < OW; ++ow) {
    const std::int64_t i0 = at0 + 2 * ow, i2 = i0 + W;
    std::int64_t j01 = i0, j23 = i2;
    const T m01 = first_max(plane[i0], plane[i0 + 1], j01, i0 + 1);
    const T m23 = first_max(plane[i2], plane[i2 + 1], j23, i2 + 1);
    y[ow] = canon(first_max(m01, m23, j01, j23));
    idx[ow] = j01;
  }
}

template <class T>
void max_pool_fast(const T* x, const PoolShape& s, T* y, std::int64_t* idx) {
  parallel_for(s.planes, 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      const T* plane = x + q * s.H * s.W;
      for (std::int64_t oh = 0; oh < s.OH; ++oh) {
        T* yr = y + (q * s.OH + oh) * s.OW;
        std::int64_t* ir = idx + (q * s.OH + oh) * s.OW;
        if (s.k == 2 && s.s == 2 && s.H * s.W < (std::int64_t(1) << 30)) {
          pool2x2_row(plane, s.W, s.OW, 2 * oh * s.W, yr, ir);
          continue;
        }
        for (std::int64_t ow = 0; ow < s.OW; ++ow) {
          std::int64_t best = oh * s.s * s.W + ow * s.s;
          T bv = plane[best];
          for (std::int64_t kh = 0; kh < s.k && bv == bv; ++kh)
            for (std::int64_t kw = 0; kw < s.k; ++kw) {
              const std::int64_t at = (oh * s.s + kh) * s.W + ow * s.s + kw;
              const T v = plane[at];
              if (v != v || v > bv) {
                bv = v;
                best = at;
                if (v != v) break;
              }
            }
          yr[ow] = canon(bv);
          ir[ow] = best;
        }
      }
    }
  });
}

template <class T>
void max_pool_grad_fast(const T* g, const std::int64_t* idx, const PoolShape& s, T* dx) {
  parallel_for(s.planes, 8, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t q = b; q < e; ++q) {
      T* plane = dx + q * s.H * s.W;
      for (std::int64_t i = 0; i < s.H * s.W; ++i) plane[i] = T(0);
      for (std::int64_t o = 0; o < s.OH * s.OW; ++o) {
        T& d = plane[idx[q * s.OH * s.OW + o]];
        d = canon(d + g[q * s.OH * s.OW + o]);
      }
    }
  });
}

// Average pooling has no SIMD form: the reference's loops (the documented order), split over
// the planes. `in` and `out` are the per-plane sizes of the entry's first and last arrays.
template <class T, class Entry>
void by_planes(Entry entry, const T* a, std::int64_t in, const PoolShape& s, T* b, std::int64_t out) {
  parallel_for(s.planes, 8, [&](std::int64_t p0, std::int64_t p1) {
    PoolShape part = s;
    part.planes = p1 - p0;
    (table<T>(Isa::scalar).*entry)(a + p0 * in, part, b + p0 * out);
  });
}
template <class T>
void avg_pool_fast(const T* x, const PoolShape& s, T* y) {
  by_planes(&Table<T>::avg_pool, x, s.H * s.W, s, y, s.OH * s.OW);
}
template <class T>
void avg_pool_grad_fast(const T* g, const PoolShape& s, T* dx) {
  by_planes(&Table<T>::avg_pool_grad, g, s.OH * s.OW, s, dx, s.H * s.W);
}

// ---- im2col ----------------------------------------------------------------------------------
// Pure data movement through raw lanes (a NaN's bits move unchanged, as in the reference):
// n elements from src to dst, the last partial vector masked.
inline void move_run(const float* __restrict src, float* __restrict dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kWF <= n; i += kWF) storef(dst + i, loadf(src + i));
  if (i < n) storef_part(dst + i, loadf_part(src + i, static_cast<int>(n - i), 0.0f), static_cast<int>(n - i));
}
inline void move_run(const double* __restrict src, double* __restrict dst, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kWD <= n; i += kWD) store(dst + i, load(src + i));
  if (i < n) store_part(dst + i, load_part(src + i, static_cast<int>(n - i), 0.0), static_cast<int>(n - i));
}

// The sample padded with +0 by p on every side, [C, H + 2p, W + 2p], then one vector of +0
// (loads of a whole vector near the end stay inside), in a buffer of the calling thread: every window
// then reads a plain segment, with no bounds to test.
template <class T>
const T* padded_image(const T* __restrict x, const ConvShape& g) {
  const std::int64_t Hp = g.H + 2 * g.p, Wp = g.W + 2 * g.p, n = g.C * Hp * Wp + VT<T>::W;
  thread_local std::vector<T> buf;
  if (buf.size() < static_cast<std::size_t>(n)) buf.resize(static_cast<std::size_t>(n));
  T* xp = buf.data();
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t h = 0; h < Hp; ++h) {
      T* row = xp + (c * Hp + h) * Wp;
      const std::int64_t ih = h - g.p;
      if (ih < 0 || ih >= g.H) {
        for (std::int64_t w = 0; w < Wp; ++w) row[w] = T(0);
        continue;
      }
      for (std::int64_t w = 0; w < g.p; ++w) row[w] = row[g.p + g.W + w] = T(0);
      move_run(x + (c * g.H + ih) * g.W, row + g.p, g.W);
    }
  for (std::int64_t i = g.C * Hp * Wp; i < n; ++i) xp[i] = T(0);
  return xp;
}

// cols row (c, kh, kw), output row oh: pixels (oh*s + kh, ow*s + kw) of the padded image, a
// contiguous run at stride 1.
template <class T>
void im2col_fast(const T* __restrict x, const ConvShape& g, T* __restrict cols) {
  const std::int64_t ld = g.cols_ld(), Hp = g.H + 2 * g.p, Wp = g.W + 2 * g.p;
  const T* xp = padded_image(x, g);
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t kh = 0; kh < g.KH; ++kh)
      for (std::int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = cols + ((c * g.KH + kh) * g.KW + kw) * ld;
        if (g.s == 1) {
          // whole vectors while their excess past the run stays inside this row's later runs,
          // which are written after it and overwrite it; the rest masked to the run
          constexpr std::int64_t W = VT<T>::W;
          const std::int64_t whole = (g.OW + W - 1) / W * W;
          const T* src = xp + (c * Hp + kh) * Wp + kw;
          std::int64_t oh = 0;
          for (; oh + 1 < g.OH && oh * g.OW + whole <= g.OH * g.OW; ++oh, src += Wp)
            for (std::int64_t i = 0; i < whole; i += W) VT<T>::store_raw(row + oh * g.OW + i, VT<T>::load(src + i));
          for (; oh < g.OH; ++oh, src += Wp) move_run(src, row + oh * g.OW, g.OW);
          continue;
        }
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
          const T* src = xp + (c * Hp + oh * g.s + kh) * Wp + kw;
          T* dst = row + oh * g.OW;
          if constexpr (std::is_same_v<T, float>) {
            if (g.s == 2) {  // the even pixels of the window's row, a vector at a time
              for (std::int64_t ow = 0; ow < g.OW; ow += kWF) {
                const int n = g.OW - ow < kWF ? static_cast<int>(g.OW - ow) : kWF;
                storef_part(dst + ow, loadf_even(src + 2 * ow, n), n);
              }
              continue;
            }
          }
          for (std::int64_t ow = 0; ow < g.OW; ++ow) dst[ow] = src[ow * g.s];
        }
      }
}

// rows[(oh, ow), (c, kh, kw)]: per output position, for each (c, kh) the KW pixels of one
// padded input row, contiguous whatever the stride. A segment shorter than a vector is stored
// as a whole vector when the buffer goes on past it: the segments after it, written later,
// overwrite the excess.
// 32 bytes from src to dst, raw (a short segment: a 64-byte store would split a cache line
// far more often)
inline void move32(const float* src, float* dst) { _mm256_storeu_ps(dst, _mm256_loadu_ps(src)); }
inline void move32(const double* src, double* dst) { _mm256_storeu_pd(dst, _mm256_loadu_pd(src)); }

template <class T>
void im2row_fast(const T* __restrict x, const ConvShape& g, T* __restrict rows) {
  constexpr std::int64_t S = 32 / sizeof(T);
  const std::int64_t CKK = g.ckk(), Hp = g.H + 2 * g.p, Wp = g.W + 2 * g.p;
  const T* xp = padded_image(x, g);
#if BITGRAD_SIMD_LEVEL == 2
  // A window row of at most 32 bytes: one load and one store masked to exactly KW elements,
  // so the segments can be written in any order — here (c, kh) outer and the positions of an
  // output row inner, whose source windows are neighbours in one padded input row (no
  // overlapping stores to wait on, no per-segment address arithmetic).
  if (g.KW <= S) {
    const __mmask8 m = static_cast<__mmask8>((1u << g.KW) - 1u);
    for (std::int64_t oh = 0; oh < g.OH; ++oh)
      for (std::int64_t c = 0; c < g.C; ++c)
        for (std::int64_t kh = 0; kh < g.KH; ++kh) {
          const T* src = xp + (c * Hp + oh * g.s + kh) * Wp;
          T* dst = rows + oh * g.OW * CKK + (c * g.KH + kh) * g.KW;
          for (std::int64_t ow = 0; ow < g.OW; ++ow, src += g.s, dst += CKK) {
            if constexpr (std::is_same_v<T, float>) _mm256_mask_storeu_ps(dst, m, _mm256_loadu_ps(src));
            else _mm256_mask_storeu_pd(dst, m, _mm256_loadu_pd(src));
          }
        }
    return;
  }
#endif
  T* const end = rows + g.OH * g.OW * CKK;
  for (std::int64_t oh = 0; oh < g.OH; ++oh)
    for (std::int64_t ow = 0; ow < g.OW; ++ow) {
      T* dst = rows + (oh * g.OW + ow) * CKK;
      for (std::int64_t c = 0; c < g.C; ++c)
        for (std::int64_t kh = 0; kh < g.KH; ++kh, dst += g.KW) {
          const T* src = xp + (c * Hp + oh * g.s + kh) * Wp + ow * g.s;
          if (g.KW <= S && end - dst >= S) move32(src, dst);
          else move_run(src, dst, g.KW);
        }
    }
}

// Output columns ow whose input column ow*s + kw - p lies inside [0, W): [lo, hi).
struct ColRange {
  std::int64_t lo, hi;
};
inline ColRange valid_cols(const ConvShape& g, std::int64_t kw) {
  const std::int64_t off = kw - g.p;  // iw = ow*s + off
  std::int64_t lo = off >= 0 ? 0 : (-off + g.s - 1) / g.s;
  std::int64_t hi = g.W - 1 - off < 0 ? 0 : (g.W - 1 - off) / g.s + 1;
  if (hi > g.OW) hi = g.OW;
  if (lo > hi) lo = hi;
  return {lo, hi};
}

#if BITGRAD_SIMD_LEVEL == 2
// Stride 2 and more: as stride 1 below, each pixel's chain of taps in (kh, kw) order summed in
// registers, four image rows at once; a tap (kh, kw) reaches every s-th pixel of a row, so its
// terms, consecutive output columns, are spread to those lanes by an expanding load (+0 in the
// others, which changes no sum from +0).
inline void col2im_strided_f32(const float* __restrict dcols, const ConvShape& g, float* __restrict dx) {
  constexpr std::int64_t kRows = 4;
  const std::int64_t P = g.cols_ld(), vecs = (g.W + 15) / 16;
  // per (kw, vector of pixels): the lanes a tap reaches, and the output column of the first (a
  // scratch table, rebuilt in full from g on every call: no state carries over)
  thread_local std::vector<std::pair<__mmask16, std::int64_t>> reach;
  reach.assign(static_cast<std::size_t>(g.KW * vecs), {0, 0});
  for (std::int64_t kw = 0; kw < g.KW; ++kw)
    for (std::int64_t v = 0; v < vecs; ++v) {
      auto& [m, first] = reach[static_cast<std::size_t>(kw * vecs + v)];
      for (std::int64_t l = 0; l < 16 && v * 16 + l < g.W; ++l) {
        const std::int64_t t = v * 16 + l + g.p - kw;  // = ow * s
        if (t < 0 || t % g.s || t / g.s >= g.OW) continue;
        if (!m) first = t / g.s;
        m = static_cast<__mmask16>(m | (1u << l));
      }
    }
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t ih0 = 0; ih0 < g.H; ih0 += kRows) {
      const std::int64_t nr = g.H - ih0 < kRows ? g.H - ih0 : kRows;
      for (std::int64_t v = 0; v < vecs; ++v) {
        __m512 acc[kRows];
        for (std::int64_t r = 0; r < kRows; ++r) acc[r] = _mm512_setzero_ps();
        for (std::int64_t kh = 0; kh < g.KH; ++kh) {
          const float* tap_rows = dcols + (c * g.KH + kh) * g.KW * P;
          for (std::int64_t kw = 0; kw < g.KW; ++kw) {
            const auto [m, first] = reach[static_cast<std::size_t>(kw * vecs + v)];
            if (!m) continue;
            for (std::int64_t r = 0; r < nr; ++r) {
              const std::int64_t t = ih0 + r + g.p - kh;  // = oh * s
              if (t < 0 || t % g.s || t / g.s >= g.OH) continue;
              acc[r] = _mm512_add_ps(acc[r], _mm512_maskz_expandloadu_ps(m, tap_rows + kw * P + (t / g.s) * g.OW + first));
            }
          }
        }
        const int nl = g.W - v * 16 < 16 ? static_cast<int>(g.W - v * 16) : 16;
        for (std::int64_t r = 0; r < nr; ++r) VT<float>::store_part(dx + (c * g.H + ih0 + r) * g.W + v * 16, acc[r], nl);
      }
    }
}
#endif

// Stride 1: each input row is summed in registers, a vector of pixels at a time, from +0 over
// its terms in increasing (kh, kw) — each pixel's row-major (c, kh, kw, oh, ow) order — and
// stored once. A lane a term does not reach adds +0, which changes no sum (a sum from +0 is
// never -0). Other strides: f32 on AVX-512 as col2im_strided_f32 above; otherwise each
// (c, kh, kw, oh) row segment added into its pixels in turn.
template <class T>
void col2im_fast(const T* __restrict dcols, const ConvShape& g, T* __restrict dx) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  constexpr std::int64_t W = Tr::W;
  const std::int64_t P = g.cols_ld();
  if (g.s == 1) {
    // kRows image rows at once: each pixel's sum is a chain of its taps in (kh, kw) order, and
    // the rows' chains are independent, so the core overlaps them (one row's chain alone waits
    // an addition's latency per tap)
    constexpr std::int64_t kRows = 4;
    for (std::int64_t c = 0; c < g.C; ++c)
      for (std::int64_t ih0 = 0; ih0 < g.H; ih0 += kRows) {
        const std::int64_t nr = g.H - ih0 < kRows ? g.H - ih0 : kRows;
        for (std::int64_t w0 = 0; w0 < g.W; w0 += W) {
          const std::int64_t nl = g.W - w0 < W ? g.W - w0 : W;
          V acc[kRows];
          for (std::int64_t r = 0; r < kRows; ++r) acc[r] = V(T(0));
          for (std::int64_t kh = 0; kh < g.KH; ++kh) {
            const T* tap_rows = dcols + (c * g.KH + kh) * g.KW * P;
            for (std::int64_t kw = 0; kw < g.KW; ++kw) {
              // lane l: pixel w0 + l, output column ow = w0 + l - off, inside [0, OW)
              const std::int64_t off = kw - g.p, sh = w0 - off;
              const std::int64_t a = sh < 0 ? -sh : 0, b = g.OW - sh < nl ? g.OW - sh : nl;
              if (a >= b) continue;
              for (std::int64_t r = 0; r < nr; ++r) {
                const std::int64_t oh = ih0 + r + g.p - kh;
                if (oh < 0 || oh >= g.OH) continue;
                acc[r] = acc[r] + Tr::load_range(tap_rows + kw * P + oh * g.OW + sh, static_cast<int>(a), static_cast<int>(b));
              }
            }
          }
          for (std::int64_t r = 0; r < nr; ++r) Tr::store_part(dx + (c * g.H + ih0 + r) * g.W + w0, acc[r], static_cast<int>(nl));
        }
      }
    return;
  }
#if BITGRAD_SIMD_LEVEL == 2
  if constexpr (std::is_same_v<T, float>) {
    col2im_strided_f32(dcols, g, dx);
    return;
  }
#endif
  for (std::int64_t i = 0; i < g.C * g.H * g.W; ++i) dx[i] = T(0);
  for (std::int64_t c = 0; c < g.C; ++c)
    for (std::int64_t kh = 0; kh < g.KH; ++kh)
      for (std::int64_t kw = 0; kw < g.KW; ++kw) {
        const T* row = dcols + ((c * g.KH + kh) * g.KW + kw) * P;
        const ColRange r = valid_cols(g, kw);
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
          const std::int64_t ih = oh * g.s + kh - g.p;
          if (ih < 0 || ih >= g.H) continue;
          T* d = dx + (c * g.H + ih) * g.W;  // pixel (ih, ow*s + off)
          const std::int64_t off = kw - g.p;
          const T* src = row + oh * g.OW;
          for (std::int64_t ow = r.lo; ow < r.hi; ++ow) d[ow * g.s + off] = canon(d[ow * g.s + off] + src[ow]);
        }
      }
}

// ---- depthwise convolution ---------------------------------------------------------------
// Each plane padded with +0 into a buffer that holds every tap's reach, so that a tap reads
// without bounds checks; the outputs of a row in lanes where the stride is 1.
struct DwPad {
  std::int64_t Hp, Wp;
  explicit DwPad(const DwShape& s)
      : Hp(std::max(s.pt + s.H, (s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1)), Wp(std::max(s.pl + s.W, (s.OW - 1) * s.sw + (s.KW - 1) * s.dw + 1)) {}
};
template <class T>
void dw_pad_plane(const T* x, const DwShape& s, const DwPad& d, T* xp) {
  std::fill(xp, xp + d.Hp * d.Wp, T(0));
  for (std::int64_t h = 0; h < s.H; ++h) std::copy(x + h * s.W, x + (h + 1) * s.W, xp + (h + s.pt) * d.Wp + s.pl);
}

// f(plane q, its channel's taps, the thread's padded-plane buffer) for the N*C (sample, channel)
// planes, split over threads
template <class T, class F>
void dw_planes(const T* w, const DwShape& s, const DwPad& d, F&& f) {
  const std::int64_t P = s.OH * s.OW, KK = s.KH * s.KW;
  parallel_for(s.N * s.C, std::max<std::int64_t>(1, 4096 / (P * KK + 1)), [&](std::int64_t q0, std::int64_t q1) {
    std::vector<T>& buf = scratch<T>();
    buf.resize(static_cast<std::size_t>(d.Hp * d.Wp + VT<T>::W));
    for (std::int64_t q = q0; q < q1; ++q) f(q, w + (q % s.C) * KK, buf.data());
  });
}

template <class T>
void dw_conv_fast(const T* x, const T* w, const DwShape& s, T* y) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  const std::int64_t P = s.OH * s.OW, X = s.H * s.W;
  const DwPad d(s);
  dw_planes(w, s, d, [&](std::int64_t q, const T* wc, T* xp) {
      T* ys = y + q * P;
      dw_pad_plane(x + q * X, s, d, xp);
      for (std::int64_t oh = 0; oh < s.OH; ++oh) {
        T* yr = ys + oh * s.OW;
        std::int64_t ow = 0;
        if (s.sw == 1)
          for (; ow < s.OW; ow += Tr::W) {
            const int m = static_cast<int>(s.OW - ow < Tr::W ? s.OW - ow : Tr::W);
            V acc = V(T(0));
            for (std::int64_t kh = 0; kh < s.KH; ++kh) {
              const T* row = xp + (oh * s.sh + kh * s.dh) * d.Wp + ow;
              for (std::int64_t kw = 0; kw < s.KW; ++kw)
                acc = fma(V(wc[kh * s.KW + kw]), m == Tr::W ? Tr::load(row + kw * s.dw) : Tr::load_part(row + kw * s.dw, m, T(0)), acc);
            }
            if (m == Tr::W) Tr::store(yr + ow, acc);
            else Tr::store_part(yr + ow, acc, m);
          }
        for (; ow < s.OW; ++ow) {
          T acc = T(0);
          for (std::int64_t kh = 0; kh < s.KH; ++kh)
            for (std::int64_t kw = 0; kw < s.KW; ++kw)
              acc = std::fma(wc[kh * s.KW + kw], xp[(oh * s.sh + kh * s.dh) * d.Wp + ow * s.sw + kw * s.dw], acc);
          yr[ow] = canon(acc);
        }
      }
  });
}

// One plane's dx pulled row by row (stride 1 along the rows, finite weights): each pixel's
// terms fma(w, dy, +0) summed in tap order in a register, where the reference pushes them into
// memory in the same order. A lane that a tap does not reach reads dy as +0 and adds
// fma(w, +0, +0) = +0 (w finite), which changes no sum: a sum of such terms from +0 is never -0.
template <class T>
void dw_dx_pull(const T* wc, const T* dys, const DwShape& s, T* dxs) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  for (std::int64_t ih = 0; ih < s.H; ++ih)
    for (std::int64_t iw = 0; iw < s.W; iw += Tr::W) {
      const int m = static_cast<int>(s.W - iw < Tr::W ? s.W - iw : Tr::W);
      V acc = V(T(0));
      for (std::int64_t kh = 0; kh < s.KH; ++kh) {
        const std::int64_t r = ih + s.pt - kh * s.dh;  // = oh * sh
        if (r < 0 || r % s.sh != 0 || r / s.sh >= s.OH) continue;
        const T* g = dys + (r / s.sh) * s.OW;
        for (std::int64_t kw = 0; kw < s.KW; ++kw) {
          const std::int64_t o0 = iw + s.pl - kw * s.dw;  // lane j reads dy at ow = o0 + j, if in [0, OW)
          const std::int64_t a = o0 < 0 ? -o0 : 0, b = s.OW - o0 < m ? s.OW - o0 : m;
          if (b <= a) continue;
          acc = acc + fma(V(wc[kh * s.KW + kw]), Tr::load_range(g + o0, static_cast<int>(a), static_cast<int>(b)), V(T(0)));
        }
      }
      if (m == Tr::W) Tr::store(dxs + ih * s.W + iw, acc);
      else Tr::store_part(dxs + ih * s.W + iw, acc, m);
    }
}

template <class T>
void dw_conv_dx_fast(const T* w, const T* dy, const DwShape& s, T* dx) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  const std::int64_t P = s.OH * s.OW, X = s.H * s.W, KK = s.KH * s.KW;
  const DwPad d(s);
  dw_planes(w, s, d, [&](std::int64_t q, const T* wc, T* dp) {
      const T* dys = dy + q * P;
      bool finite = true;
      for (std::int64_t t = 0; t < KK; ++t) finite = finite && wc[t] - wc[t] == T(0);
      if (s.sw == 1 && finite) {
        dw_dx_pull(wc, dys, s, dx + q * X);
        return;
      }
      std::fill(dp, dp + d.Hp * d.Wp, T(0));
      // taps outer, outputs inner, as the reference: each pixel's terms in tap order (a pixel
      // takes at most one output per tap); what lands in the padding is dropped
      for (std::int64_t kh = 0; kh < s.KH; ++kh)
        for (std::int64_t kw = 0; kw < s.KW; ++kw) {
          const T wt = wc[kh * s.KW + kw];
          for (std::int64_t oh = 0; oh < s.OH; ++oh) {
            T* row = dp + (oh * s.sh + kh * s.dh) * d.Wp + kw * s.dw;
            const T* g = dys + oh * s.OW;
            std::int64_t ow = 0;
            if (s.sw == 1) {
              for (; ow + Tr::W <= s.OW; ow += Tr::W)
                Tr::store_raw(row + ow, Tr::load(row + ow) + fma(V(wt), Tr::load(g + ow), V(T(0))));
              if (ow < s.OW) {  // the row's tail in masked lanes (a NaN stored canonical: it stays a NaN)
                const int m = static_cast<int>(s.OW - ow);
                Tr::store_part(row + ow, Tr::load_part(row + ow, m, T(0)) + fma(V(wt), Tr::load_part(g + ow, m, T(0)), V(T(0))), m);
                ow = s.OW;
              }
            }
            for (; ow < s.OW; ++ow) row[ow * s.sw] = row[ow * s.sw] + std::fma(wt, g[ow], T(0));
          }
        }
      T* dxs = dx + q * X;
      for (std::int64_t h = 0; h < s.H; ++h)
        for (std::int64_t c = 0; c < s.W; ++c) dxs[h * s.W + c] = canon(dp[(h + s.pt) * d.Wp + s.pl + c]);
  });
}

// The sample's product of each tap over its positions (numerics §37: per tap, blocks of 32
// positions, each an fma chain from +0, the blocks by the pairwise tree). The taps' chains are
// independent: they advance together, position by position, so that the core overlaps them (a
// tap's chain alone waits an fma's latency per position). KK_ > 0: the taps count, known at
// compile time (the accumulators stay in registers).
template <class T, int KK_>
void dw_taps_products_n(const T* xp, const T* dys, const DwShape& s, const DwPad& d, std::int64_t KK, T* prod) {
  constexpr int kMax = kBatchBlock;  // a tap count the callers allow
  const std::int64_t nt = KK_ > 0 ? KK_ : KK;
  std::int64_t off[kMax];
  for (std::int64_t t = 0; t < nt; ++t) off[t] = (t / s.KW) * s.dh * d.Wp + (t % s.KW) * s.dw;
  T acc[KK_ > 0 ? KK_ : kMax];
  PairwiseStack<T> st[KK_ > 0 ? KK_ : kMax];
  for (std::int64_t t = 0; t < nt; ++t) acc[t] = T(0);
  std::int64_t in_block = 0;
  for (std::int64_t oh = 0; oh < s.OH; ++oh) {
    const T* row = xp + oh * s.sh * d.Wp;
    const T* g = dys + oh * s.OW;
    for (std::int64_t ow = 0; ow < s.OW; ++ow) {
      const T gv = g[ow];
      const T* at = row + ow * s.sw;
      for (std::int64_t t = 0; t < nt; ++t) acc[t] = std::fma(gv, at[off[t]], acc[t]);
      if (++in_block == kBatchBlock) {
        for (std::int64_t t = 0; t < nt; ++t) {
          st[t].push(acc[t]);
          acc[t] = T(0);
        }
        in_block = 0;
      }
    }
  }
  for (std::int64_t t = 0; t < nt; ++t) {
    if (in_block) st[t].push(acc[t]);
    prod[t] = st[t].total();
  }
}
template <class T>
void dw_taps_products(const T* xp, const T* dys, const DwShape& s, const DwPad& d, T* prod) {
  const std::int64_t KK = s.KH * s.KW;
  if (KK == 9) dw_taps_products_n<T, 9>(xp, dys, s, d, KK, prod);
  else dw_taps_products_n<T, 0>(xp, dys, s, d, KK, prod);
}

template <class T>
void dw_conv_dw_fast(const T* x, const T* dy, const DwShape& s, T* dwt) {
  const std::int64_t P = s.OH * s.OW, X = s.H * s.W, KK = s.KH * s.KW;
  // the taps' chains and stacks are arrays of kBatchBlock (the op sends no more: conv_grouped.cpp)
  if (KK > kBatchBlock)
    throw std::invalid_argument("depthwise conv weight gradient: more than 32 taps (kBatchBlock)");
  const DwPad d(s);
  parallel_for(s.C, 1, [&](std::int64_t c0, std::int64_t c1) {
    std::vector<T>& buf = scratch<T>();
    buf.resize(static_cast<std::size_t>(d.Hp * d.Wp + 2 * KK));
    T* xp = buf.data();
    T* block = xp + d.Hp * d.Wp;
    T* prod = block + KK;
    for (std::int64_t c = c0; c < c1; ++c) {
      PairwiseStack<T> batch[kBatchBlock]{};  // one per tap (at most 32)
      std::fill(block, block + KK, T(0));
      for (std::int64_t n = 0; n < s.N; ++n) {
        dw_pad_plane(x + (n * s.C + c) * X, s, d, xp);
        const T* dys = dy + (n * s.C + c) * P;
        dw_taps_products<T>(xp, dys, s, d, prod);
        for (std::int64_t t = 0; t < KK; ++t) block[t] = block[t] + prod[t];
        if ((n + 1) % kBatchBlock == 0 || n + 1 == s.N)
          for (std::int64_t t = 0; t < KK; ++t) {
            batch[t].push(block[t]);
            block[t] = T(0);
          }
      }
      for (std::int64_t t = 0; t < KK; ++t) dwt[c * KK + t] = canon(batch[t].total());
    }
  });
}

// ---- optimizer updates ----------------------------------------------------------------------
constexpr std::int64_t kUpdateGrain = 16384;  // elements per chunk of a parameter update

// Restrict pointers, coefficients by value and branch-free loops per case let the compiler
// vectorise (a lambda's captures would be re-read after every store).
template <class T, bool Decay>
void sgd_chunk(T* __restrict p, const T* __restrict g, T* __restrict v, std::int64_t n, T lr, T m, T wd, bool nesterov) {
  auto grad = [&](std::int64_t k) { return Decay ? g[k] + wd * p[k] : g[k]; };
  if (!v) {
    for (std::int64_t k = 0; k < n; ++k) p[k] = canon(p[k] - lr * grad(k));
  } else if (!nesterov) {
    for (std::int64_t k = 0; k < n; ++k) {
      v[k] = canon(m * v[k] + grad(k));
      p[k] = canon(p[k] - lr * v[k]);
    }
  } else {
    for (std::int64_t k = 0; k < n; ++k) {
      const T gk = grad(k);
      v[k] = canon(m * v[k] + gk);
      p[k] = canon(p[k] - lr * (gk + m * v[k]));
    }
  }
}

template <class T>
void sgd_update_fast(T* p, const T* g, T* v, std::int64_t n, const SgdCoef<T>& c) {
  parallel_for(n, kUpdateGrain, [&](std::int64_t k0, std::int64_t k1) {
    T* vk = v ? v + k0 : nullptr;
    if (c.decay) sgd_chunk<T, true>(p + k0, g + k0, vk, k1 - k0, c.lr, c.momentum, c.wd, c.nesterov);
    else sgd_chunk<T, false>(p + k0, g + k0, vk, k1 - k0, c.lr, c.momentum, c.wd, c.nesterov);
  });
}

#include "kernels/update_rule.hpp"

template <class T>
void adam_chunk(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, std::int64_t n, const AdamCoef<T> c) {
  for (std::int64_t k = 0; k < n; ++k) adam_element(p[k], g[k], m[k], v[k], c);
}

template <class T>
void adam_update_fast(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamCoef<T>& c) {
  parallel_for(n, kUpdateGrain, [&](std::int64_t k0, std::int64_t k1) { adam_chunk(p + k0, g + k0, m + k0, v + k0, k1 - k0, c); });
}

// Philox-4x32-10 (rng::philox4x32_10) of 16 consecutive blocks b, b+1, .. of stream s at once:
// the same integer operations on 16 lanes (32x32 -> 64-bit products of the even and the odd
// lanes), so the same words; w[word][lane].
#if BITGRAD_SIMD_LEVEL == 2
using PhiloxV = __m512i;
constexpr int kPhiloxLanes = 16;
inline PhiloxV px_set1(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
inline PhiloxV px_xor(PhiloxV a, PhiloxV b) { return _mm512_xor_si512(a, b); }
inline PhiloxV px_load(const std::uint32_t* p) { return _mm512_loadu_si512(p); }
inline void px_store(std::uint32_t* p, PhiloxV v) { _mm512_storeu_si512(p, v); }
inline void philox_mulhilo(PhiloxV a, PhiloxV m, PhiloxV& hi, PhiloxV& lo) {
  const PhiloxV pe = _mm512_mul_epu32(a, m), po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
}
#elif BITGRAD_SIMD_LEVEL == 1
using PhiloxV = __m256i;
constexpr int kPhiloxLanes = 8;
inline PhiloxV px_set1(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
inline PhiloxV px_xor(PhiloxV a, PhiloxV b) { return _mm256_xor_si256(a, b); }
inline PhiloxV px_load(const std::uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void px_store(std::uint32_t* p, PhiloxV v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline void philox_mulhilo(PhiloxV a, PhiloxV m, PhiloxV& hi, PhiloxV& lo) {
  const PhiloxV pe = _mm256_mul_epu32(a, m), po = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
}
#endif

inline void philox16(const rng::Stream& s, std::uint64_t b, std::uint32_t (&w)[4][16]) {
  constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  std::uint32_t lo[16], hi[16];
  for (int l = 0; l < 16; ++l) {
    const std::uint64_t i = b + static_cast<std::uint64_t>(l);
    lo[l] = static_cast<std::uint32_t>(i);
    hi[l] = static_cast<std::uint32_t>(i >> 32);
  }
  const std::uint32_t id0 = static_cast<std::uint32_t>(s.id()), id1 = static_cast<std::uint32_t>(s.id() >> 32);
  const std::uint32_t k0 = static_cast<std::uint32_t>(s.seed()), k1 = static_cast<std::uint32_t>(s.seed() >> 32);
#if BITGRAD_SIMD_LEVEL >= 1
  const PhiloxV m0 = px_set1(kM0), m1 = px_set1(kM1);
  for (int h = 0; h < 16; h += kPhiloxLanes) {
    std::uint32_t r0 = k0, r1 = k1;
    PhiloxV c0 = px_load(lo + h), c1 = px_load(hi + h), c2 = px_set1(id0), c3 = px_set1(id1);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        r0 += kW0;
        r1 += kW1;
      }
      PhiloxV hi0, lo0, hi1, lo1;
      philox_mulhilo(c0, m0, hi0, lo0);
      philox_mulhilo(c2, m1, hi1, lo1);
      c0 = px_xor(px_xor(hi1, c1), px_set1(r0));
      c1 = lo1;
      c2 = px_xor(px_xor(hi0, c3), px_set1(r1));
      c3 = lo0;
    }
    px_store(w[0] + h, c0);
    px_store(w[1] + h, c1);
    px_store(w[2] + h, c2);
    px_store(w[3] + h, c3);
  }
#else
  for (int l = 0; l < 16; ++l) {
    const rng::Block r = rng::philox4x32_10({lo[l], hi[l], id0, id1}, {k0, k1});
    for (int k = 0; k < 4; ++k) w[k][l] = r[static_cast<std::size_t>(k)];
  }
#endif
}

// The reference's mask (ref::dropout_mask) from 16 Philox blocks at a time, the uniforms and
// comparisons on vector lanes: from the block holding word `first`, each batch of blocks' words
// in stream order, of which the run's words are used (a partial block at either end included).
template <class T>
void dropout_mask_fast(const rng::Stream& s, std::uint64_t first, std::int64_t n, double p, bool f32_words, T keep, T* m) {
  const float p32 = static_cast<float>(p);
  const std::uint64_t per = f32_words ? 4 : 2;
  const std::int64_t batch = static_cast<std::int64_t>(16 * per);
  std::uint64_t b = first / per;
  std::int64_t skip = static_cast<std::int64_t>(first % per), k = 0;
  std::uint32_t w[4][16];
  alignas(64) std::uint32_t u32[64];
  alignas(64) std::uint64_t u64[32];
  while (k < n) {
    philox16(s, b, w);
    const std::int64_t take = std::min<std::int64_t>(batch - skip, n - k);
    T* mk = m + k;
    if (f32_words) {
      for (int l = 0; l < 16; ++l)
        for (int j = 0; j < 4; ++j) u32[4 * l + j] = w[j][l];
      // (w >> 8) < 2^24: exact as a signed int and as a float, as uniform_of computes it
      for (std::int64_t j = 0; j < take; ++j)
        mk[j] = static_cast<float>(static_cast<std::int32_t>(u32[skip + j] >> 8)) * 0x1p-24f >= p32 ? keep : T(0);
    } else {
      for (int l = 0; l < 16; ++l) {
        u64[2 * l] = static_cast<std::uint64_t>(w[0][l]) | (static_cast<std::uint64_t>(w[1][l]) << 32);
        u64[2 * l + 1] = static_cast<std::uint64_t>(w[2][l]) | (static_cast<std::uint64_t>(w[3][l]) << 32);
      }
      for (std::int64_t j = 0; j < take; ++j)
        mk[j] = static_cast<double>(static_cast<std::int64_t>(u64[skip + j] >> 11)) * 0x1p-53 >= p ? keep : T(0);
    }
    k += take;
    skip = 0;
    b += 16;
  }
}

template <class T>
Table<T> fast_nn_table(Table<T> tb) {
  tb.layer_norm_rows = &layer_norm_rows_fast<T>;
  tb.layer_norm_grad_rows = &layer_norm_grad_rows_fast<T>;
  tb.max_pool = &max_pool_fast<T>;
  tb.max_pool_grad = &max_pool_grad_fast<T>;
  tb.avg_pool = &avg_pool_fast<T>;
  tb.avg_pool_grad = &avg_pool_grad_fast<T>;
  tb.im2col = &im2col_fast<T>;
  tb.im2row = &im2row_fast<T>;
  tb.col2im = &col2im_fast<T>;
  tb.dw_conv = &dw_conv_fast<T>;
  tb.dw_conv_dx = &dw_conv_dx_fast<T>;
  tb.dw_conv_dw = &dw_conv_dw_fast<T>;
  tb.sgd_update = &sgd_update_fast<T>;
  tb.adam_update = &adam_update_fast<T>;
  tb.dropout_mask = &dropout_mask_fast<T>;
  return tb;
}

// A code path's table of T: the reference's entries, this ISA's fast kernels over them, and its
// GEMM entry points (the frame instantiated with the ISA's microkernels).
template <class T>
Table<T> isa_table(const Table<T>& reference, void (*gemm)(const GemmArgs<T>&), GemmPacking (*packing)(std::int64_t, std::int64_t, std::int64_t),
                   void (*gemm_samples)(const GemmSamplesArgs<T>&), void (*gemm_batch)(const GemmBatchArgs<T>&)) {
  Table<T> tb = fast_nn_table<T>(fast_table<T>(reference));
  tb.gemm = gemm;
  tb.gemm_packing = packing;
  tb.gemm_samples = gemm_samples;
  tb.gemm_batch = gemm_batch;
  return tb;
}
