// Fast paths of the non-GEMM kernels, written once over the lane types of simd.hpp and
// instantiated by isa_avx2.cpp and isa_avx512.cpp. Each function reproduces the order of
// its reference in reference.cpp exactly; comments name the step they mirror.
//
// Included inside an ISA namespace after simd.hpp, tables.inc, mathfn_impl.hpp.

// A line of bitgrad/op_list.hpp without its case in a switch below does not build
#pragma GCC diagnostic error "-Wswitch"

constexpr int kWD = W;   // f64 lanes
constexpr int kWF = WF;  // f32 lanes

template <class T>
struct VT;
template <>
struct VT<float> {
  using V = F;
  static constexpr int W = kWF;
  static V load(const float* p) { return loadf(p); }
  static V load_part(const float* p, int n, float fill) { return loadf_part(p, n, fill); }
  // lanes [a, b) of p[lane], +0 in the others (which are not read)
  static V load_range(const float* p, int a, int b) { return loadf_range(p, a, b); }
  // raw moves: a NaN's bits unchanged
  static V load_raw(const float* p) { return loadf(p); }
  static void store_raw(float* p, V v) { storef(p, v); }
  // stores write NaNs as the canonical NaN (kernels.hpp)
  static V canon(V v) { return selectf(nanf_(v), V(canonical_nan<float>()), v); }
  static void store(float* p, V v) { storef(p, canon(v)); }
  static void store_part(float* p, V v, int n) { storef_part(p, canon(v), n); }
  static float lane(V v, int i) { return lanef(v, i); }
  static float fold_sum(V v) { return foldf_sum(v); }
  static float fold_max(V v) { return foldf_max(v); }
  static bool any_nan(V v) { return anyf(nanf_(v)); }
  static V max_gt(V v, V m) { return selectf(gtf(v, m), v, m); }
};
template <>
struct VT<double> {
  using V = D;
  static constexpr int W = kWD;
  static V load(const double* p) { return ::bitgrad::kern::ISA_NS::load(p); }
  static V load_part(const double* p, int n, double fill) { return ::bitgrad::kern::ISA_NS::load_part(p, n, fill); }
  static V load_range(const double* p, int a, int b) { return ::bitgrad::kern::ISA_NS::load_range(p, a, b); }
  static V load_raw(const double* p) { return ::bitgrad::kern::ISA_NS::load(p); }
  static void store_raw(double* p, V v) { ::bitgrad::kern::ISA_NS::store(p, v); }
  static V canon(V v) { return select(v != v, V(canonical_nan<double>()), v); }
  static void store(double* p, V v) { ::bitgrad::kern::ISA_NS::store(p, canon(v)); }
  static void store_part(double* p, V v, int n) { ::bitgrad::kern::ISA_NS::store_part(p, canon(v), n); }
  static double lane(V v, int i) { return ::bitgrad::kern::ISA_NS::lane(v, i); }
  static double fold_sum(V v) { return ::bitgrad::kern::ISA_NS::fold_sum(v); }
  static double fold_max(V v) { return ::bitgrad::kern::ISA_NS::fold_max(v); }
  static bool any_nan(V v) { return any(v != v); }
  static V max_gt(V v, V m) { return select(v > m, v, m); }
};

// f64 lanes loaded from / stored to T memory (f32 values widen exactly, narrow once; the
// canonical f64 NaN narrows to the canonical f32 NaN)
inline D load_d(const float* p) { return load_f32(p); }
inline D load_d(const double* p) { return load(p); }
inline D load_d_part(const float* p, int n, double fill) { return load_f32_part(p, n, fill); }
inline D load_d_part(const double* p, int n, double fill) { return load_part(p, n, fill); }
inline void store_d(float* p, D v) { store_f32(p, VT<double>::canon(v)); }
inline void store_d(double* p, D v) { VT<double>::store(p, v); }
inline void store_d_part(float* p, D v, int n) { store_f32_part(p, VT<double>::canon(v), n); }
inline void store_d_part(double* p, D v, int n) { VT<double>::store_part(p, v, n); }

// An f32 result lets a function take its *_f32r form (mathfn_impl.hpp): the same f32 bits.
template <class T>
constexpr bool f32_out() { return std::is_same_v<T, float>; }

// The fast forms as functors whose call always inlines (a lambda's call was left out of line,
// and one vector at a time its latency was the loop's)
#define BITGRAD_LANE_FN(name_, f32_, f64_)                                                     \
  template <class T>                                                                          \
  struct name_ {                                                                              \
    [[gnu::always_inline]] D operator()(D v) const {                                          \
      if constexpr (f32_out<T>()) return f32_(v);                                             \
      else return f64_(v);                                                                    \
    }                                                                                         \
  };
BITGRAD_LANE_FN(ExpT, exp_f32r, exp_f64)
#undef BITGRAD_LANE_FN
// sigmoid and tanh in T's own lanes: f32 formulas in f32 lanes (numerics §8), f64 functions in
// f64 lanes; the unary ops and the recurrent gates share them
template <class T>
struct SigmoidLanes {
  [[gnu::always_inline]] typename VT<T>::V operator()(typename VT<T>::V v) const {
    if constexpr (f32_out<T>()) return sigmoid_f32(v);
    else return sigmoid_f64(v);
  }
};
template <class T>
struct TanhLanes {
  [[gnu::always_inline]] typename VT<T>::V operator()(typename VT<T>::V v) const {
    if constexpr (f32_out<T>()) return tanh_f32(v);
    else return tanh_f64(v);
  }
};

// y[i] = f(x[i]) in f64 lanes
template <class T, class Fn>
inline void map_d(const T* x, T* y, std::int64_t n, Fn f) {
  std::int64_t i = 0;
  for (; i + kWD <= n; i += kWD) store_d(y + i, f(load_d(x + i)));
  if (i < n) store_d_part(y + i, f(load_d_part(x + i, static_cast<int>(n - i), 0.0)), static_cast<int>(n - i));
}
// map_d two vectors an iteration, so that one's latency hides behind the other's
template <class T, class Fn>
inline void map_d_x2(const T* x, T* y, std::int64_t n, Fn f) {
  std::int64_t i = 0;
  for (; i + 2 * kWD <= n; i += 2 * kWD) {
    const D a = f(load_d(x + i)), b = f(load_d(x + i + kWD));
    store_d(y + i, a);
    store_d(y + i + kWD, b);
  }
  map_d(x + i, y + i, n - i, f);
}
// y[i] = f(x[i]) in f32 lanes, two vectors an iteration
template <class Fn>
inline void map_f_x2(const float* x, float* y, std::int64_t n, Fn f) {
  using VF = VT<float>;
  std::int64_t i = 0;
  for (; i + 2 * kWF <= n; i += 2 * kWF) {
    const F a = f(loadf(x + i)), b = f(loadf(x + i + kWF));
    VF::store(y + i, a);
    VF::store(y + i + kWF, b);
  }
  for (; i + kWF <= n; i += kWF) VF::store(y + i, f(loadf(x + i)));
  if (i < n) VF::store_part(y + i, f(loadf_part(x + i, static_cast<int>(n - i), 0.0f)), static_cast<int>(n - i));
}
// y[i] = f(x[i]) in T's own lanes
template <class T, class Fn>
inline void map_lanes_x2(const T* x, T* y, std::int64_t n, Fn f) {
  if constexpr (f32_out<T>()) map_f_x2(x, y, n, f);
  else map_d_x2(x, y, n, f);
}
template <class T, class Fn>
inline void map2_d(const T* a, const T* b, T* y, std::int64_t n, Fn f) {
  std::int64_t i = 0;
  for (; i + kWD <= n; i += kWD) store_d(y + i, f(load_d(a + i), load_d(b + i)));
  if (i < n) {
    int r = static_cast<int>(n - i);
    store_d_part(y + i, f(load_d_part(a + i, r, 0.0), load_d_part(b + i, r, 0.0)), r);
  }
}

constexpr double kSqrtHalfD = 0x1.6a09e667f3bcdp-1;
constexpr double kInvSqrt2PiD = 0x1.9884533d43651p-2;

// erf_f64 of n values in place, each as erf_f64 computes it (the same lane operations, so the
// same bits): the small branch on every value, the costlier one (exp and a table polynomial)
// only on the values that take it, gathered into a block of their own. erf_f64 on lanes pays
// for both branches everywhere; a GELU's arguments are mostly below 0.84375.
inline void erf_in_place(double* u, std::int64_t n) {
  constexpr int kBlock = 256;
  alignas(64) double big[kBlock + 8];  // + 8: whole-vector stores of the packed arguments
#if BITGRAD_SIMD_LEVEL != 2
  int at[kBlock];  // where each packed argument came from
#endif
  for (std::int64_t b0 = 0; b0 < n; b0 += kBlock) {
    double* p = u + b0;
    const int m = static_cast<int>(std::min<std::int64_t>(kBlock, n - b0));
    int nb = 0;
#if BITGRAD_SIMD_LEVEL == 2
    // the big arguments packed (NaN included: "not less than" is true for it, as erf_takes_small
    // is false), each vector's mask of them kept to expand them back
    __mmask8 took[kBlock / kWD + 1];
    const __m512d bound = _mm512_set1_pd(kErfSmallBound);
    for (int i = 0, v = 0; i < m; i += kWD, ++v) {
      const int c = m - i < kWD ? m - i : kWD;
      const __mmask8 in = static_cast<__mmask8>(c == kWD ? 0xff : (1u << c) - 1u);
      const __m512d x = _mm512_maskz_loadu_pd(in, p + i);
      const __m512d ax = _mm512_andnot_pd(_mm512_set1_pd(-0.0), x);
      took[v] = static_cast<__mmask8>(_mm512_cmp_pd_mask(ax, bound, _CMP_NLT_UQ) & in);
      // compressed in a register and stored whole (the lanes past the packed ones are
      // overwritten by the next store): a compressing store to memory is microcoded on Zen 4
      _mm512_storeu_pd(big + nb, _mm512_maskz_compress_pd(took[v], x));
      nb += __builtin_popcount(took[v]);
    }
#else
    for (int j = 0; j < m; ++j) {  // without a branch: small and big arguments mix at random
      at[nb] = j;
      big[nb] = p[j];
      nb += !(std::fabs(p[j]) < kErfSmallBound);  // NaN included, as erf_takes_small
    }
#endif
    int i = 0;
    for (; i + kWD <= m; i += kWD) store(p + i, erf_small_f64(load(p + i)));
    if (i < m) store_part(p + i, erf_small_f64(load_part(p + i, m - i, 0.0)), m - i);
    for (i = 0; i + kWD <= nb; i += kWD) store(big + i, erf_big_f64(load(big + i)));
    if (i < nb) store_part(big + i, erf_big_f64(load_part(big + i, nb - i, 1.0)), nb - i);
#if BITGRAD_SIMD_LEVEL == 2
    for (int j = 0, at_big = 0, v = 0; j < m; j += kWD, ++v) {
      _mm512_mask_storeu_pd(p + j, took[v], _mm512_maskz_expand_pd(took[v], _mm512_loadu_pd(big + at_big)));
      at_big += __builtin_popcount(took[v]);
    }
#else
    for (int j = 0; j < nb; ++j) p[at[j]] = big[j];
#endif
  }
}

// e[i] = erf(x[i] s) (GELU: s = 1/sqrt 2)
template <class T>
inline void erf_scaled(const T* x, double s, double* e, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + kWD <= n; i += kWD) store(e + i, load_d(x + i) * D(s));
  if (i < n) store_part(e + i, load_d_part(x + i, static_cast<int>(n - i), 0.0) * D(s), static_cast<int>(n - i));
  erf_in_place(e, n);
}

// e[i] = erf(x[i] s), then y[i] = f(x[i], e[i])
template <class T, class Fn>
inline void erf_then(const T* x, double s, double* e, T* y, std::int64_t n, Fn f) {
  erf_scaled(x, s, e, n);
  std::int64_t i = 0;
  for (; i + kWD <= n; i += kWD) store_d(y + i, f(load_d(x + i), load(e + i)));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    store_d_part(y + i, f(load_d_part(x + i, r, 0.0), load_part(e + i, r, 0.0)), r);
  }
}

// erf_then with a block-sized buffer of its own (erf and GELU without a kept erf)
template <class T, class Fn>
inline void erf_map(const T* x, double s, T* y, std::int64_t n, Fn f) {
  alignas(64) double e[256];
  for (std::int64_t b = 0; b < n; b += 256) erf_then(x + b, s, e, y + b, std::min<std::int64_t>(256, n - b), f);
}

// the GELU gradient from e = erf(x/sqrt 2): g (cdf + x pdf)
template <class T>
inline void gelu_grad_from_erf(const T* x, const double* e, const T* g, T* out, std::int64_t n) {
  auto one = [](D v, D r, D gg) {
    D pdf = exp_f64(D(-0.5) * (v * v)) * D(kInvSqrt2PiD);
    return gg * (D(0.5) * (D(1.0) + r) + v * pdf);
  };
  std::int64_t i = 0;
  for (; i + kWD <= n; i += kWD) store_d(out + i, one(load_d(x + i), load(e + i), load_d(g + i)));
  if (i < n) {
    const int m = static_cast<int>(n - i);
    store_d_part(out + i, one(load_d_part(x + i, m, 0.0), load_part(e + i, m, 0.0), load_d_part(g + i, m, 0.0)), m);
  }
}

// softplus_d and softplus_grad_d of reference.cpp
inline D softplus_lanes(D x) {
  D y = select(x > D(0.0), x, D(0.0)) + log1p_f64(exp_f64(-abs(x)));
  return select(x > D(20.0), x, y);
}
inline D softplus_grad_lanes(D x, D g) { return select(x > D(20.0), g, g * sigmoid_f64(x)); }

// the activations of numerics.md §32: silu_d, mish_d and their gradients, sign_one, hardswish_one of reference.cpp
constexpr double kTwoOverSqrtPiD = 0x1.20dd750429b6dp+0;
inline D silu_lanes(D x) { return x * sigmoid_f64(x); }
inline D silu_grad_lanes(D x, D g) {
  D s = sigmoid_f64(x);
  return g * (s * (D(1.0) + x * (D(1.0) - s)));
}
inline D mish_lanes(D x) { return x * tanh_f64(softplus_lanes(x)); }
inline D mish_grad_lanes(D x, D g) {
  D t = tanh_f64(softplus_lanes(x));
  return g * (t + (x * sigmoid_f64(x)) * (D(1.0) - t * t));
}
template <class T>
T sign_s(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}
template <class T>
T hardswish_s(T x) {
  T c = x + T(3);
  if (!(c > T(0)) && c == c) c = T(0);
  if (c > T(6)) c = T(6);
  return (x * c) / T(6);
}
template <class T>
T hardswish_grad_s(T x, T g) {
  return x < T(-3) ? T(0) : (x <= T(3) ? g * (x / T(3) + T(0.5)) : g);
}

template <class T>
T maximum_s(T a, T b) {
  if (a != a || b != b) return canonical_nan<T>();
  if (a > b) return a;
  if (b > a) return b;
  return std::signbit(a) ? b : a;
}
template <class T>
T minimum_s(T a, T b) {
  if (a != a || b != b) return canonical_nan<T>();
  if (a < b) return a;
  if (b < a) return b;
  return std::signbit(a) ? a : b;
}

// grain: elements per thread chunk, so small tensors stay on one thread
constexpr std::int64_t kGrainSimple = 1 << 15;
constexpr std::int64_t kGrainMath = 1 << 12;

template <class T>
void unary_fast(Unary op, const T* x, T* y, std::int64_t n) {
  parallel_for(n, info(op).cost == OpCost::math ? kGrainMath : kGrainSimple, [&](std::int64_t b, std::int64_t e) {
    const T* xs = x + b;
    T* ys = y + b;
    const std::int64_t m = e - b;
    switch (op) {
      case Unary::neg: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(-xs[i]); break;
      case Unary::abs: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(std::fabs(xs[i])); break;
      case Unary::relu: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon((xs[i] > T(0) || xs[i] != xs[i]) ? xs[i] : T(0)); break;
      case Unary::square: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(xs[i] * xs[i]); break;
      case Unary::reciprocal: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(T(1) / xs[i]); break;
      case Unary::sqrt: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(std::sqrt(xs[i])); break;
      case Unary::exp: map_d_x2(xs, ys, m, ExpT<T>{}); break;
      case Unary::expm1: map_d(xs, ys, m, [](D v) { return expm1_f64(v); }); break;
      case Unary::log: map_d(xs, ys, m, [](D v) { return log_f64(v); }); break;
      case Unary::log1p: map_d(xs, ys, m, [](D v) { return log1p_f64(v); }); break;
      case Unary::rsqrt: map_d(xs, ys, m, [](D v) { return rsqrt_f64(v); }); break;
      case Unary::tanh: map_lanes_x2(xs, ys, m, TanhLanes<T>{}); break;
      case Unary::sigmoid: map_lanes_x2(xs, ys, m, SigmoidLanes<T>{}); break;
      case Unary::erf: erf_map(xs, 1.0, ys, m, [](D, D r) { return r; }); break;
      case Unary::sin: map_d(xs, ys, m, [](D v) { return sincos_f64(v, 0); }); break;
      case Unary::cos: map_d(xs, ys, m, [](D v) { return sincos_f64(v, 1); }); break;
      case Unary::gelu: erf_map(xs, kSqrtHalfD, ys, m, [](D v, D r) { return (D(0.5) * v) * (D(1.0) + r); }); break;
      case Unary::softplus: map_d(xs, ys, m, [](D v) { return softplus_lanes(v); }); break;
      case Unary::sign: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(sign_s(xs[i])); break;
      case Unary::tan: map_d(xs, ys, m, [](D v) { return tan_f64(v); }); break;
      case Unary::floor: map_d(xs, ys, m, [](D v) { return floor_f64(v); }); break;
      case Unary::ceil: map_d(xs, ys, m, [](D v) { return ceil_f64(v); }); break;
      case Unary::round: map_d(xs, ys, m, [](D v) { return round_even_f64(v); }); break;
      case Unary::softsign: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(xs[i] / (T(1) + std::fabs(xs[i]))); break;
      case Unary::silu: map_d(xs, ys, m, [](D v) { return silu_lanes(v); }); break;
      case Unary::mish: map_d(xs, ys, m, [](D v) { return mish_lanes(v); }); break;
      case Unary::hardswish: for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(hardswish_s(xs[i])); break;
      case Unary::count: break;
    }
  });
}

template <class T, class Op>
inline void binary_loop(Bcast bc, const T* a, const T* b, T* y, std::int64_t o0, std::int64_t o1, std::int64_t inner, Op op) {
  for (std::int64_t o = o0; o < o1; ++o) {
    const T* ar = a + o * inner;
    T* yr = y + o * inner;
    switch (bc) {
      case Bcast::same: { const T* br = b + o * inner; for (std::int64_t i = 0; i < inner; ++i) yr[i] = canon(op(ar[i], br[i])); } break;
      case Bcast::row: for (std::int64_t i = 0; i < inner; ++i) yr[i] = canon(op(ar[i], b[i])); break;
      case Bcast::rrow: for (std::int64_t i = 0; i < inner; ++i) yr[i] = canon(op(b[i], ar[i])); break;
      case Bcast::col: { const T bo = b[o]; for (std::int64_t i = 0; i < inner; ++i) yr[i] = canon(op(ar[i], bo)); } break;
      case Bcast::rcol: { const T bo = b[o]; for (std::int64_t i = 0; i < inner; ++i) yr[i] = canon(op(bo, ar[i])); } break;
    }
  }
}

template <class T>
void pow_rows(Bcast bc, const T* a, const T* b, T* y, std::int64_t o0, std::int64_t o1, std::int64_t inner) {
  // b broadcast patterns are expanded per row into a small buffer of f64 lanes
  auto powd = [](D u, D v) { return pow_f64(u, v); };
  for (std::int64_t o = o0; o < o1; ++o) {
    const T* ar = a + o * inner;
    T* yr = y + o * inner;
    std::int64_t i = 0;
    for (; i < inner; i += kWD) {
      int r = static_cast<int>(inner - i < kWD ? inner - i : kWD);
      D av = load_d_part(ar + i, r, 1.0), bv;
      switch (bc) {
        case Bcast::same: bv = load_d_part(b + o * inner + i, r, 1.0); break;
        case Bcast::row: case Bcast::rrow: bv = load_d_part(b + i, r, 1.0); break;
        case Bcast::col: case Bcast::rcol: bv = D(static_cast<double>(b[o])); break;
      }
      D res = (bc == Bcast::rrow || bc == Bcast::rcol) ? powd(bv, av) : powd(av, bv);
      store_d_part(yr + i, res, r);
    }
  }
}

template <class T>
void binary_fast(Binary op, Bcast bc, const T* a, const T* b, T* y, std::int64_t outer, std::int64_t inner) {
  const std::int64_t grain_rows = inner >= kGrainSimple ? 1 : kGrainSimple / (inner > 0 ? inner : 1);
  parallel_for(outer, op == Binary::pow ? (grain_rows / 8 > 0 ? grain_rows / 8 : 1) : grain_rows,
               [&](std::int64_t o0, std::int64_t o1) {
                 switch (op) {
                   case Binary::add: binary_loop(bc, a, b, y, o0, o1, inner, [](T u, T v) { return u + v; }); break;
                   case Binary::sub: binary_loop(bc, a, b, y, o0, o1, inner, [](T u, T v) { return u - v; }); break;
                   case Binary::mul: binary_loop(bc, a, b, y, o0, o1, inner, [](T u, T v) { return u * v; }); break;
                   case Binary::div: binary_loop(bc, a, b, y, o0, o1, inner, [](T u, T v) { return u / v; }); break;
                   case Binary::maximum: binary_loop(bc, a, b, y, o0, o1, inner, [](T u, T v) { return maximum_s(u, v); }); break;
                   case Binary::minimum: binary_loop(bc, a, b, y, o0, o1, inner, [](T u, T v) { return minimum_s(u, v); }); break;
                   case Binary::pow: pow_rows(bc, a, b, y, o0, o1, inner); break;
                   case Binary::count: break;
                 }
               });
}

template <class T>
void act_grad_fast(ActGrad op, const T* v, const T* g, T* out, std::int64_t n) {
  parallel_for(n, info(op).cost == OpCost::math ? kGrainMath : kGrainSimple, [&](std::int64_t b, std::int64_t e) {
    const std::int64_t m = e - b;
    const T* vs = v + b;
    const T* gs = g + b;
    T* os = out + b;
    switch (op) {
      case ActGrad::relu: for (std::int64_t i = 0; i < m; ++i) os[i] = canon(vs[i] > T(0) ? gs[i] : T(0)); break;
      case ActGrad::tanh: for (std::int64_t i = 0; i < m; ++i) os[i] = canon(gs[i] * (T(1) - vs[i] * vs[i])); break;
      case ActGrad::sigmoid: for (std::int64_t i = 0; i < m; ++i) os[i] = canon((gs[i] * vs[i]) * (T(1) - vs[i])); break;
      case ActGrad::gelu: {  // erf gathered as in unary gelu (erf_in_place), then the kept-erf gradient
        alignas(64) double e[256];
        for (std::int64_t k = 0; k < m; k += 256) {
          const std::int64_t mm = std::min<std::int64_t>(256, m - k);
          erf_scaled(vs + k, kSqrtHalfD, e, mm);
          gelu_grad_from_erf(vs + k, e, gs + k, os + k, mm);
        }
        break;
      }
      case ActGrad::softplus: map2_d(vs, gs, os, m, [](D x, D gg) { return softplus_grad_lanes(x, gg); }); break;
      case ActGrad::abs: for (std::int64_t i = 0; i < m; ++i) os[i] = canon(vs[i] > T(0) ? gs[i] : (vs[i] < T(0) ? -gs[i] : T(0))); break;
      case ActGrad::erf: map2_d(vs, gs, os, m, [](D x, D gg) { return gg * (D(kTwoOverSqrtPiD) * exp_f64(-(x * x))); }); break;
      case ActGrad::sin: map2_d(vs, gs, os, m, [](D x, D gg) { return gg * sincos_f64(x, 1); }); break;
      case ActGrad::cos: map2_d(vs, gs, os, m, [](D x, D gg) { return gg * -sincos_f64(x, 0); }); break;
      case ActGrad::reciprocal: for (std::int64_t i = 0; i < m; ++i) os[i] = canon(-(gs[i] * (vs[i] * vs[i]))); break;
      case ActGrad::tan: for (std::int64_t i = 0; i < m; ++i) os[i] = canon(gs[i] * (T(1) + vs[i] * vs[i])); break;
      case ActGrad::softsign:
        for (std::int64_t i = 0; i < m; ++i) {
          const T d = T(1) + std::fabs(vs[i]);
          os[i] = canon(gs[i] / (d * d));
        }
        break;
      case ActGrad::silu: map2_d(vs, gs, os, m, [](D x, D gg) { return silu_grad_lanes(x, gg); }); break;
      case ActGrad::mish: map2_d(vs, gs, os, m, [](D x, D gg) { return mish_grad_lanes(x, gg); }); break;
      case ActGrad::hardswish: for (std::int64_t i = 0; i < m; ++i) os[i] = canon(hardswish_grad_s(vs[i], gs[i])); break;
      case ActGrad::count: break;
    }
  });
}

// ---- activations with parameters: unary_p_one and act_grad_p_one of reference.cpp -----------------
template <class T>
T unary_p_s(UnaryP op, T x, double a, double b) {
  const double d = static_cast<double>(x);
  switch (op) {
    case UnaryP::leaky_relu: return x > T(0) ? x : x * static_cast<T>(a);
    case UnaryP::hardsigmoid: {
      const double t = a * d + b;
      if (t != t) return static_cast<T>(t);
      return static_cast<T>(t > 0.0 ? (t < 1.0 ? t : 1.0) : 0.0);
    }
    case UnaryP::thresholded_relu: return (d > a || x != x) ? x : T(0);
    case UnaryP::elu: case UnaryP::selu: case UnaryP::celu: case UnaryP::count: break;  // lanes below
  }
  return x;
}
template <class T>
T act_grad_p_s(UnaryP op, T x, T g, double a, double b) {
  const double d = static_cast<double>(x);
  switch (op) {
    case UnaryP::leaky_relu: return x > T(0) ? g : g * static_cast<T>(a);
    case UnaryP::hardsigmoid: {
      const double t = a * d + b;
      return (t > 0.0 && t < 1.0) ? static_cast<T>(static_cast<double>(g) * a) : T(0);
    }
    case UnaryP::thresholded_relu: return d > a ? g : T(0);
    case UnaryP::elu: case UnaryP::selu: case UnaryP::celu: case UnaryP::count: break;  // lanes below
  }
  return g;
}
template <class T>
void unary_p_fast(UnaryP op, const T* x, T* y, std::int64_t n, double a, double b) {
  parallel_for(n, info(op).cost == OpCost::math ? kGrainMath : kGrainSimple, [&](std::int64_t lo, std::int64_t hi) {
    const T* xs = x + lo;
    T* ys = y + lo;
    const std::int64_t m = hi - lo;
    const D A(a), B(b);
    switch (op) {
      case UnaryP::elu: map_d(xs, ys, m, [&](D v) { return select(v > D(0.0), v, A * expm1_f64(v)); }); break;
      case UnaryP::selu: map_d(xs, ys, m, [&](D v) { return select(v > D(0.0), B * v, B * (A * expm1_f64(v))); }); break;
      case UnaryP::celu: map_d(xs, ys, m, [&](D v) { return select(v > D(0.0), v, A * expm1_f64(v / A)); }); break;
      case UnaryP::leaky_relu: case UnaryP::hardsigmoid: case UnaryP::thresholded_relu:
        for (std::int64_t i = 0; i < m; ++i) ys[i] = canon(unary_p_s(op, xs[i], a, b));
        break;
      case UnaryP::count: break;
    }
  });
}
template <class T>
void act_grad_p_fast(UnaryP op, const T* x, const T* g, T* out, std::int64_t n, double a, double b) {
  parallel_for(n, info(op).cost == OpCost::math ? kGrainMath : kGrainSimple, [&](std::int64_t lo, std::int64_t hi) {
    const T* xs = x + lo;
    const T* gs = g + lo;
    T* os = out + lo;
    const std::int64_t m = hi - lo;
    const D A(a), B(b);
    switch (op) {
      case UnaryP::elu: map2_d(xs, gs, os, m, [&](D v, D gg) { return select(v > D(0.0), gg, gg * (A * exp_f64(v))); }); break;
      case UnaryP::selu: map2_d(xs, gs, os, m, [&](D v, D gg) { return select(v > D(0.0), gg * B, gg * (B * (A * exp_f64(v)))); }); break;
      case UnaryP::celu: map2_d(xs, gs, os, m, [&](D v, D gg) { return select(v > D(0.0), gg, gg * exp_f64(v / A)); }); break;
      case UnaryP::leaky_relu: case UnaryP::hardsigmoid: case UnaryP::thresholded_relu:
        for (std::int64_t i = 0; i < m; ++i) os[i] = canon(act_grad_p_s(op, xs[i], gs[i], a, b));
        break;
      case UnaryP::count: break;
    }
  });
}

// GELU split at e = erf(x/sqrt 2), kept in f64: the same operations as unary gelu and
// act_grad gelu, so the same bits, and the backward skips its erf
template <class T>
void gelu_keep_fast(const T* x, T* y, double* e, std::int64_t n) {
  parallel_for(n, kGrainMath, [&](std::int64_t b, std::int64_t end) {
    erf_then(x + b, kSqrtHalfD, e + b, y + b, end - b, [](D v, D r) { return (D(0.5) * v) * (D(1.0) + r); });
  });
}
template <class T>
void gelu_grad_kept_fast(const T* x, const double* e, const T* g, T* out, std::int64_t n) {
  parallel_for(n, kGrainSimple / 4, [&](std::int64_t b, std::int64_t end) { gelu_grad_from_erf(x + b, e + b, g + b, out + b, end - b); });
}

// The recurrent steps' gates in T's lanes: every op rounds as the ops do; sigmoid and tanh are
// the unary ops' (SigmoidLanes, TanhLanes).
// The recurrent steps' kernels row by row: row(n, j, m) handles elements [j, j + m) of row n,
// m = W (a vector of the lanes) but at a row's end. ld / st (T lanes) load and store m of
// them; stores write NaNs canonical. (Plain functions and an int,
// not generic lambdas handed in: the demangler fails on those names, which the ISA leak check
// must read.)
template <std::int64_t W, class Row>
inline void rows_in_lanes(std::int64_t N, std::int64_t H, std::int64_t grain, Row row) {
  parallel_for(N, std::max<std::int64_t>(1, grain), [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) {
      std::int64_t j = 0;
      for (; j + W <= H; j += W) row(n, j, static_cast<int>(W));
      if (j < H) row(n, j, static_cast<int>(H - j));
    }
  });
}
template <class T>
inline typename VT<T>::V ld(const T* p, int m) {
  return m == VT<T>::W ? VT<T>::load(p) : VT<T>::load_part(p, m, T(0));
}
template <class T>
inline void st(T* p, typename VT<T>::V v, int m) {
  if (m == VT<T>::W) VT<T>::store(p, v);
  else VT<T>::store_part(p, v, m);
}

template <class T>
void lstm_gates_fast(const T* xz, std::int64_t ldx, const T* b, const T* hh, const T* c, std::int64_t N, std::int64_t H, T* c_out,
                     T* h_out, std::int64_t ldh, T* keep) {
  using V = typename VT<T>::V;
  const SigmoidLanes<T> sig;
  const TanhLanes<T> th;
  rows_in_lanes<VT<T>::W>(N, H, kGrainMath / (4 * H), [&](std::int64_t n, std::int64_t j, int m) {
    const T* x = xz + n * ldx + j;
    const T* r = hh + n * 4 * H + j;
    // z = (xz + b) + hh of the gate at q (b: the input part's b_hh, where given)
    auto zq = [&](std::int64_t q) { return (b ? ld(x + q, m) + ld(b + q + j, m) : ld(x + q, m)) + ld(r + q, m); };
    // the next row's xz, a sequence's step: rows T steps apart, from L3 (the stream prefetcher
    // starts late on each)
    if (n + 1 < N)
      for (std::int64_t q = 0; q < 4 * H; q += H) __builtin_prefetch(x + ldx + q);
    const V i = sig(zq(0));
    const V f = sig(zq(H));
    const V g = th(zq(2 * H));
    const V o = sig(zq(3 * H));
    const V cn = (f * ld(c + n * H + j, m)) + (i * g);
    const V tc = th(cn);
    st(c_out + n * H + j, cn, m);
    st(h_out + n * ldh + j, o * tc, m);
    if (keep) {
      T* k = keep + n * 5 * H + j;
      st(k, i, m);
      st(k + H, f, m);
      st(k + 2 * H, g, m);
      st(k + 3 * H, o, m);
      st(k + 4 * H, tc, m);
    }
  });
}

template <class T>
void gru_gates_fast(const T* xz, std::int64_t ldx, const T* hh, const T* h, std::int64_t ldh, std::int64_t N, std::int64_t H, T* h_out,
                    std::int64_t ldo, T* keep) {
  using V = typename VT<T>::V;
  const SigmoidLanes<T> sig;
  const TanhLanes<T> th;
  rows_in_lanes<VT<T>::W>(N, H, kGrainMath / (3 * H), [&](std::int64_t n, std::int64_t j, int m) {
    const T* x = xz + n * ldx + j;
    const T* r3 = hh + n * 3 * H + j;
    if (n + 1 < N)  // the next row's xz (lstm_gates_fast says why)
      for (std::int64_t q = 0; q < 3 * H; q += H) __builtin_prefetch(x + ldx + q);
    const V r = sig(ld(x, m) + ld(r3, m));
    const V z = sig(ld(x + H, m) + ld(r3 + H, m));
    const V nn = th(ld(x + 2 * H, m) + r * ld(r3 + 2 * H, m));
    st(h_out + n * ldo + j, ((ld(h + n * ldh + j, m) - nn) * z) + nn, m);
    if (keep) {
      T* k = keep + n * 3 * H + j;
      st(k, r, m);
      st(k + H, z, m);
      st(k + 2 * H, nn, m);
    }
  });
}

template <class T>
void lstm_cell_grad_fast(const T* keep, const T* c, const T* gc, std::int64_t N, std::int64_t H, T* gz, std::int64_t ldz, T* gc_prev) {
  using V = typename VT<T>::V;
  rows_in_lanes<VT<T>::W>(N, H, kGrainSimple / (8 * H), [&](std::int64_t n, std::int64_t j, int m) {
    const T* k = keep + n * 5 * H + j;
    T* z = gz + n * ldz + j;
    const V g = ld(gc + n * H + j, m), i = ld(k, m), f = ld(k + H, m), gg = ld(k + 2 * H, m), one(T(1)), zero(T(0));
    const V g_f = g * ld(c + n * H + j, m), g_i = g * gg, g_g = g * i;
    st(z, (g_i * i) * (one - i) + zero, m);
    st(z + H, (g_f * f) * (one - f) + zero, m);
    st(z + 2 * H, g_g * (one - gg * gg) + zero, m);
    if (gc_prev) st(gc_prev + n * H + j, g * f, m);
  });
}
template <class T>
void gru_grad_fast(const T* keep, const T* hh, const T* h, const T* g, std::int64_t N, std::int64_t H, T* gx, T* ghh, T* dh) {
  using V = typename VT<T>::V;
  rows_in_lanes<VT<T>::W>(N, H, kGrainSimple / (8 * H), [&](std::int64_t n, std::int64_t j, int m) {
    const T* k = keep + n * 3 * H + j;
    const V r = ld(k, m), z = ld(k + H, m), nn = ld(k + 2 * H, m), hn = ld(hh + n * 3 * H + 2 * H + j, m), gv = ld(g + n * H + j, m);
    const V one(T(1)), zero(T(0));
    const V a = ld(h + n * H + j, m) - nn;
    const V ga = gv * z, gz = gv * a;
    const V gn = gv - ga;  // the final add's g plus the sub's neg(ga): IEEE's x - y is x + (-y)
    const V gpn = gn * (one - nn * nn);
    const V gr = gpn * hn, ghn = gpn * r;
    const V gpr = (gr * r) * (one - r), gpz = (gz * z) * (one - z);
    T* x = gx + n * 3 * H + j;
    T* y = ghh + n * 3 * H + j;
    st(x, gpr + zero, m);
    st(y, gpr + zero, m);
    st(x + H, gpz + zero, m);
    st(y + H, gpz + zero, m);
    st(x + 2 * H, gpn + zero, m);
    st(y + 2 * H, ghn + zero, m);
    if (dh) st(dh + n * H + j, ga, m);
  });
}
template <class T>
void lstm_hidden_grad_fast(const T* keep, const T* gh, std::int64_t N, std::int64_t H, T* gz_o, std::int64_t ldz, T* gc) {
  using V = typename VT<T>::V;
  rows_in_lanes<VT<T>::W>(N, H, kGrainSimple / (8 * H), [&](std::int64_t n, std::int64_t j, int m) {
    const T* k = keep + n * 5 * H + j;
    const V g = ld(gh + n * H + j, m), o = ld(k + 3 * H, m), tc = ld(k + 4 * H, m), one(T(1)), zero(T(0));
    const V g_o = g * tc, g_tc = g * o;
    st(gz_o + n * ldz + j, (g_o * o) * (one - o) + zero, m);
    st(gc + n * H + j, g_tc * (one - tc * tc), m);
  });
}

// ---- the row rule in lanes ----------------------------------------------------------------
// 16 logical lanes = kNV vectors of W lanes; lane j of the block is element j mod 16.
template <class T>
struct Lanes16 {
  using Tr = VT<T>;
  using V = typename Tr::V;
  static constexpr int NV = kLanes / Tr::W;
  static_assert(NV >= 1 && NV * Tr::W == kLanes, "16 logical lanes must fill whole vectors");
  V acc[NV];
  Lanes16() {
    for (auto& a : acc) a = V(T(0));
  }
  // halving tree: lane j += lane j+h for h = 8, 4, 2, 1
  T fold() const {
    V t[NV];
    for (int v = 0; v < NV; ++v) t[v] = acc[v];
    for (int nv = NV; nv > 1; nv /= 2)
      for (int v = 0; v < nv / 2; ++v) t[v] = t[v] + t[v + nv / 2];
    // the rest of the halving inside the vector, in registers (through memory, a store and
    // narrower reloads of it stalled on store forwarding: a quarter of a softmax over rows of 32)
    return Tr::fold_sum(t[0]);
  }
};

// Row rule over a row of length L; step(acc, p, count) adds elements p[0..count) (count <= 16,
// missing lanes padded with 0) into the lanes.
template <class T, class Step>
inline T row_rule_fast(std::int64_t L, Step step) {
  PairwiseStack<T> st;
  for (std::int64_t b0 = 0; b0 < L; b0 += kRowBlock) {
    const std::int64_t blen = (L - b0 < kRowBlock) ? L - b0 : kRowBlock;
    Lanes16<T> ln;
    std::int64_t t = 0;
    for (; t + kLanes <= blen; t += kLanes) step(ln, b0 + t, kLanes);
    if (t < blen) step(ln, b0 + t, static_cast<int>(blen - t));
    st.push(ln.fold());
  }
  return st.total();
}

template <class T>
inline void add_lanes(Lanes16<T>& ln, const T* p, int count) {
  using Tr = VT<T>;
  constexpr int NV = Lanes16<T>::NV;
  if (count == kLanes) {
    for (int v = 0; v < NV; ++v) ln.acc[v] = ln.acc[v] + Tr::load(p + v * Tr::W);
  } else {
    for (int v = 0; v < NV; ++v) ln.acc[v] = ln.acc[v] + Tr::load_part(p + v * Tr::W, count - v * Tr::W, T(0));
  }
}

// A short group (count < 16) added into its own lanes only, in scalar: padding the other lanes
// with fma(0, 0, lane) would turn a lane's -0 into +0 (an fma of two tiny numbers of opposite
// signs from +0 can round to -0). Sums from +0 never reach -0, so add_lanes may pad. The lanes
// go through memory unchanged (a NaN lane stays NaN; its bits do not matter, see canon).
template <class T, class Term>
inline void tail_lanes(Lanes16<T>& ln, int count, Term term) {
  using Tr = VT<T>;
  alignas(64) T l[kLanes];
  for (int v = 0; v < Lanes16<T>::NV; ++v) Tr::store(l + v * Tr::W, ln.acc[v]);
  for (int j = 0; j < count; ++j) term(l[j], j);
  for (int v = 0; v < Lanes16<T>::NV; ++v) ln.acc[v] = Tr::load(l + v * Tr::W);
}

template <class T>
inline void fma_lanes(Lanes16<T>& ln, const T* a, const T* b, int count) {  // acc = fma(a, b, acc)
  using Tr = VT<T>;
  constexpr int NV = Lanes16<T>::NV;
  if (count < kLanes) {
    tail_lanes(ln, count, [&](T& l, int j) { l = std::fma(a[j], b[j], l); });
    return;
  }
  for (int v = 0; v < NV; ++v) ln.acc[v] = fma(Tr::load(a + v * Tr::W), Tr::load(b + v * Tr::W), ln.acc[v]);
}

template <class T>
inline void sqdiff_lanes(Lanes16<T>& ln, const T* a, const T* b, int count) {  // d = a - b; acc = fma(d, d, acc)
  using Tr = VT<T>;
  constexpr int NV = Lanes16<T>::NV;
  for (int v = 0; v < NV; ++v) {
    auto x = count == kLanes ? Tr::load(a + v * Tr::W) : Tr::load_part(a + v * Tr::W, count - v * Tr::W, T(0));
    if (b) {
      auto y = count == kLanes ? Tr::load(b + v * Tr::W) : Tr::load_part(b + v * Tr::W, count - v * Tr::W, T(0));
      x = x - y;
    }
    ln.acc[v] = fma(x, x, ln.acc[v]);
  }
}

inline std::int64_t row_grain(std::int64_t L) { return L >= 4096 ? 1 : 4096 / (L > 0 ? L : 1); }

template <class T>
void sum_rows_fast(const T* x, std::int64_t R, std::int64_t L, T* out) {
  parallel_for(R, row_grain(L), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * L;
      out[r] = canon(row_rule_fast<T>(L, [&](Lanes16<T>& ln, std::int64_t i, int c) { add_lanes(ln, row + i, c); }));
    }
  });
}

// The row rule down the middle axis, a vector of K's columns at a time: logical lane j of the
// rule is a vector holding lane j of each column (16 vectors), so each column's sums, fold and
// block tree are the row rule's, element for element. A group of up to kGroup such column
// vectors goes through the rows together, each row's group read as one run, the lanes kept in L1
// (a column vector at a time walked the rows K apart: a cache line a row, one page in two at
// K = 512, which the prefetcher did not follow: a bias gradient's [2048, 512] at 8 GB/s).
template <class T>
void sum_mid_fast(const T* x, std::int64_t A, std::int64_t L, std::int64_t K, T* out) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  constexpr std::int64_t kGroup = 8;
  const std::int64_t chunks = (K + Tr::W - 1) / Tr::W, groups = (chunks + kGroup - 1) / kGroup;
  const std::int64_t work = L > 0 ? L * Tr::W * kGroup : 1;
  parallel_for(A * groups, work >= (1 << 14) ? 1 : (1 << 14) / work, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const std::int64_t a = c / groups, k0 = (c % groups) * kGroup * Tr::W;
      const std::int64_t nch = (K - k0 + Tr::W - 1) / Tr::W < kGroup ? (K - k0 + Tr::W - 1) / Tr::W : kGroup;
      const int last = static_cast<int>(K - (k0 + (nch - 1) * Tr::W));  // columns in the group's last vector
      const T* base = x + a * L * K + k0;
      PairwiseStack<V> st[kGroup];
      V lanes[kGroup][kLanes];
      for (std::int64_t b0 = 0; b0 < L; b0 += kRowBlock) {
        for (std::int64_t g = 0; g < nch; ++g)
          for (V& l : lanes[g]) l = V(T(0));
        const std::int64_t b1 = b0 + kRowBlock < L ? b0 + kRowBlock : L;
        for (std::int64_t i = b0; i < b1; ++i) {
          const T* p = base + i * K;
          const int j = static_cast<int>((i - b0) % kLanes);
          std::int64_t g = 0;
          for (; g + 1 < nch; ++g) lanes[g][j] = lanes[g][j] + Tr::load(p + g * Tr::W);
          lanes[g][j] = lanes[g][j] + (last >= Tr::W ? Tr::load(p + g * Tr::W) : Tr::load_part(p + g * Tr::W, last, T(0)));
        }
        for (std::int64_t g = 0; g < nch; ++g) {
          for (int h = kLanes / 2; h >= 1; h /= 2)
            for (int j = 0; j < h; ++j) lanes[g][j] = lanes[g][j] + lanes[g][j + h];
          st[g].push(lanes[g][0]);
        }
      }
      for (std::int64_t g = 0; g < nch; ++g) {
        const V tot = L > 0 ? st[g].total() : V(T(0));
        T* o = out + a * K + k0 + g * Tr::W;
        if (g + 1 < nch || last >= Tr::W) Tr::store(o, tot);
        else Tr::store_part(o, tot, last);
      }
    }
  });
}

template <class T>
void sumsq_rows_fast(const T* a, const T* b, std::int64_t R, std::int64_t L, T* out) {
  parallel_for(R, row_grain(L), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* ra = a + r * L;
      const T* rb = b ? b + r * L : nullptr;
      out[r] = canon(row_rule_fast<T>(L, [&](Lanes16<T>& ln, std::int64_t i, int c) { sqdiff_lanes(ln, ra + i, rb ? rb + i : nullptr, c); }));
    }
  });
}

// The batch rule, vectorised across columns: U vectors of columns at a time.
template <class T>
void sum_cols_fast(const T* x, std::int64_t R, std::int64_t C, T* out) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  constexpr int U = 4;
  constexpr std::int64_t CW = U * Tr::W;
  const std::int64_t chunks = (C + CW - 1) / CW;
  const std::int64_t work = R * CW > 0 ? R * CW : 1;
  parallel_for(chunks, work >= (1 << 16) ? 1 : (1 << 16) / work, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t ch = c0; ch < c1; ++ch) {
      const std::int64_t col = ch * CW;
      const int width = static_cast<int>(C - col < CW ? C - col : CW);
      PairwiseStack<V> st[U];
      for (std::int64_t r0 = 0; r0 < R; r0 += kBatchBlock) {
        V acc[U];
        for (auto& a : acc) a = V(T(0));
        const std::int64_t r1 = r0 + kBatchBlock < R ? r0 + kBatchBlock : R;
        if (width == CW) {
          for (std::int64_t r = r0; r < r1; ++r)
            for (int u = 0; u < U; ++u) acc[u] = acc[u] + Tr::load(x + r * C + col + u * Tr::W);
        } else {
          for (std::int64_t r = r0; r < r1; ++r)
            for (int u = 0; u < U; ++u) acc[u] = acc[u] + Tr::load_part(x + r * C + col + u * Tr::W, width - u * Tr::W, T(0));
        }
        for (int u = 0; u < U; ++u) st[u].push(acc[u]);
      }
      for (int u = 0; u < U; ++u) {
        V tot = st[u].total();
        if (width == CW) Tr::store(out + col + u * Tr::W, tot);
        else Tr::store_part(out + col + u * Tr::W, tot, width - u * Tr::W);
      }
    }
  });
}

// ---- softmax family ---------------------------------------------------------------------
// max over x + 0 (exact, order-free), NaN if any NaN
template <class T>
T row_max_fast(const T* x, std::int64_t L) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  V m = V(-std::numeric_limits<T>::infinity());
  bool isn = false;
  std::int64_t i = 0;
  for (; i + Tr::W <= L; i += Tr::W) {
    V v = Tr::load(x + i) + V(T(0));
    if (Tr::any_nan(v)) isn = true;
    m = Tr::max_gt(v, m);
  }
  T mm = Tr::fold_max(m);  // exact in any order: no -0 (x + 0), a NaN is flagged apart
  for (; i < L; ++i) {
    T v = x[i] + T(0);
    if (v != v) isn = true;
    if (v > mm) mm = v;
  }
  return isn ? std::numeric_limits<T>::quiet_NaN() : mm;
}

template <class T>
inline std::vector<T>& scratch() {
  thread_local std::vector<T> buf;
  return buf;
}

// e[i] = exp(x[i] - m) with the difference in f64, rounded once to T
template <class T>
inline void exp_shifted_fast(const T* x, T m, T* e, std::int64_t L) {
  const D md = D(static_cast<double>(m));
  map_d_x2(x, e, L, [md](D v) { return ExpT<T>{}(v - md); });
}

// The softmax family's common start: m = the row maximum, out = exp(x - m), returns the row
// rule's sum of out.
template <class T>
T exp_row(const T* xr, std::int64_t L, T* out, T& m) {
  m = row_max_fast(xr, L);
  exp_shifted_fast(xr, m, out, L);
  return row_rule_fast<T>(L, [&](Lanes16<T>& ln, std::int64_t i, int c) { add_lanes(ln, out + i, c); });
}

template <class T>
void softmax_rows_fast(const T* x, std::int64_t R, std::int64_t L, T* y) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  parallel_for(R, row_grain(L) / 4 + 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * L;
      T* yr = y + r * L;
      T m;
      const T s = exp_row(xr, L, yr, m);
      const V sv = V(s);
      std::int64_t i = 0;
      for (; i + Tr::W <= L; i += Tr::W) Tr::store(yr + i, Tr::load(yr + i) / sv);
      for (; i < L; ++i) yr[i] = canon(yr[i] / s);
    }
  });
}

template <class T>
void log_softmax_rows_fast(const T* x, std::int64_t R, std::int64_t L, T* y) {
  parallel_for(R, row_grain(L) / 4 + 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * L;
      T* yr = y + r * L;
      T m;
      const T s = exp_row(xr, L, yr, m);  // y holds the exponentials until overwritten
      const D lsv = log_f64(D(static_cast<double>(s)));
      const D md = D(static_cast<double>(m));
      map_d(xr, yr, L, [&](D v) { return (v - md) - lsv; });
    }
  });
}

template <class T>
void softmax_grad_rows_fast(const T* y, const T* gy, std::int64_t R, std::int64_t L, T* gx) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  parallel_for(R, row_grain(L) / 2 + 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * L;
      const T* gr = gy + r * L;
      T* ox = gx + r * L;
      const T dot = row_rule_fast<T>(L, [&](Lanes16<T>& ln, std::int64_t i, int c) { fma_lanes(ln, gr + i, yr + i, c); });
      const V dv = V(dot);
      std::int64_t i = 0;
      for (; i + Tr::W <= L; i += Tr::W) Tr::store(ox + i, Tr::load(yr + i) * (Tr::load(gr + i) - dv));
      for (; i < L; ++i) ox[i] = canon(yr[i] * (gr[i] - dot));
    }
  });
}

template <class T>
void log_softmax_grad_rows_fast(const T* y, const T* gy, std::int64_t R, std::int64_t L, T* gx) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  parallel_for(R, row_grain(L) / 4 + 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* yr = y + r * L;
      const T* gr = gy + r * L;
      T* ox = gx + r * L;
      const T sg = row_rule_fast<T>(L, [&](Lanes16<T>& ln, std::int64_t i, int c) { add_lanes(ln, gr + i, c); });
      map_d_x2(yr, ox, L, ExpT<T>{});  // exp(y) rounded to T
      const V sv = V(sg);
      std::int64_t i = 0;
      for (; i + Tr::W <= L; i += Tr::W) Tr::store(ox + i, Tr::load(gr + i) - Tr::load(ox + i) * sv);
      for (; i < L; ++i) ox[i] = canon(gr[i] - ox[i] * sg);
    }
  });
}

template <class T>
void xent_rows_fast(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T* loss) {
  parallel_for(R, row_grain(L) / 4 + 1, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<T>& e = scratch<T>();
    if (static_cast<std::int64_t>(e.size()) < L) e.resize(static_cast<std::size_t>(L));
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * L;
      const T m = row_max_fast(xr, L);
      exp_shifted_fast(xr, m, e.data(), L);
      const T s = row_rule_fast<T>(L, [&](Lanes16<T>& ln, std::int64_t i, int c) { add_lanes(ln, e.data() + i, c); });
      const double ls = lane(log_f64(D(static_cast<double>(s))), 0);
      loss[r] = canon(static_cast<T>(ls - (static_cast<double>(xr[t[r]]) - static_cast<double>(m))));
    }
  });
}

template <class T>
void xent_grad_rows_fast(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T scale, T* gx) {
  using Tr = VT<T>;
  using V = typename Tr::V;
  parallel_for(R, row_grain(L) / 4 + 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * L;
      T* gr = gx + r * L;
      T m;
      const T s = exp_row(xr, L, gr, m);
      const T et = gr[t[r]];
      const V sv = V(s), sc = V(scale);
      std::int64_t i = 0;
      for (; i + Tr::W <= L; i += Tr::W) Tr::store(gr + i, (Tr::load(gr + i) / sv) * sc);  // p - 0 = p
      for (; i < L; ++i) gr[i] = canon((gr[i] / s) * scale);
      gr[t[r]] = canon((et / s - T(1)) * scale);
    }
  });
}

template <class T>
Table<T> fast_table(Table<T> tb) {
  tb.unary = &unary_fast<T>;
  tb.binary = &binary_fast<T>;
  tb.act_grad = &act_grad_fast<T>;
  tb.unary_p = &unary_p_fast<T>;
  tb.act_grad_p = &act_grad_p_fast<T>;
  tb.gelu_keep = &gelu_keep_fast<T>;
  tb.gelu_grad_kept = &gelu_grad_kept_fast<T>;
  tb.lstm_gates = &lstm_gates_fast<T>;
  tb.lstm_cell_grad = &lstm_cell_grad_fast<T>;
  tb.gru_gates = &gru_gates_fast<T>;
  tb.gru_grad = &gru_grad_fast<T>;
  tb.lstm_hidden_grad = &lstm_hidden_grad_fast<T>;
  tb.sum_rows = &sum_rows_fast<T>;
  tb.sumsq_rows = &sumsq_rows_fast<T>;
  tb.sum_cols = &sum_cols_fast<T>;
  tb.sum_mid = &sum_mid_fast<T>;
  tb.softmax_rows = &softmax_rows_fast<T>;
  tb.log_softmax_rows = &log_softmax_rows_fast<T>;
  tb.softmax_grad_rows = &softmax_grad_rows_fast<T>;
  tb.log_softmax_grad_rows = &log_softmax_grad_rows_fast<T>;
  tb.xent_rows = &xent_rows_fast<T>;
  tb.xent_grad_rows = &xent_grad_rows_fast<T>;
  return tb;
}
