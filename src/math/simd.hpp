// Thin SIMD wrappers over f64 lanes, so that one algorithm source (math/*_impl.hpp,
// kernels/*_impl.hpp) compiles to the scalar reference, AVX2 and AVX-512 with the same
// sequence of IEEE operations per lane.
//
// This header has no namespace of its own: it is included inside a namespace of its code
// path (bitgrad::math::isa_scalar in mathfn.cpp, bitgrad::kern::avx2 and bitgrad::kern::avx512
// in the kernels' ISA files) by a translation unit compiled for that ISA, so that no inline
// function compiled with AVX flags can be picked by the linker for another code path. Select the level with
// BITGRAD_SIMD_LEVEL = 0 (scalar), 1 (AVX2+FMA) or 2 (AVX-512F/DQ/BW/VL).
//
// Requires before inclusion: <cmath>, <cstdint>, <cstring>, <bit>, and <immintrin.h> for
// levels 1 and 2.

#ifndef BITGRAD_SIMD_LEVEL
#error "define BITGRAD_SIMD_LEVEL before including simd.hpp"
#endif

#if BITGRAD_SIMD_LEVEL == 0

using D = double;
using I = std::int64_t;
using M = bool;
constexpr int W = 1;

inline D fma(D a, D b, D c) { return std::fma(a, b, c); }
inline D sqrt(D a) { return std::sqrt(a); }
inline D abs(D a) { return std::bit_cast<double>(std::bit_cast<std::uint64_t>(a) & 0x7fffffffffffffffULL); }
inline D select(M m, D a, D b) { return m ? a : b; }
inline I selecti(M m, I a, I b) { return m ? a : b; }
inline I as_int(D a) { return std::bit_cast<I>(a); }
inline D as_double(I a) { return std::bit_cast<D>(a); }
inline I to_i(std::int64_t v) { return v; }
template <int N> inline I srl(I a) { return static_cast<I>(static_cast<std::uint64_t>(a) >> N); }
template <int N> inline I sra(I a) { return a >> N; }  // C++20: arithmetic
template <int N> inline I sll(I a) { return static_cast<I>(static_cast<std::uint64_t>(a) << N); }
inline I addi(I a, I b) { return static_cast<I>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b)); }
inline I subi(I a, I b) { return static_cast<I>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b)); }
inline I andi(I a, I b) { return a & b; }
inline I ori(I a, I b) { return a | b; }
inline M eqi(I a, I b) { return a == b; }
inline M gti(I a, I b) { return a > b; }
inline D gather(const double* t, I idx) { return t[idx]; }
// gather from a table of 8 entries (64-byte aligned): a register permute where the ISA has one
inline D lookup8(const double* t, I idx) { return t[idx]; }
inline bool any(M m) { return m; }
inline bool all(M m) { return m; }
inline M mand(M a, M b) { return a && b; }
inline M mor(M a, M b) { return a || b; }
inline M mnot(M a) { return !a; }
inline D load(const double* p) { return *p; }
inline void store(double* p, D v) { *p = v; }
inline D load_part(const double* p, int n, double fill) { return n > 0 ? *p : fill; }
inline void store_part(double* p, D v, int n) { if (n > 0) *p = v; }
inline D load_range(const double* p, int a, int b) { return a <= 0 && 0 < b ? *p : 0.0; }
inline D load_f32(const float* p) { return static_cast<double>(*p); }
inline D round_f32(D v) { return static_cast<double>(static_cast<float>(v)); }
inline void store_f32(float* p, D v) { *p = static_cast<float>(v); }
inline D load_f32_part(const float* p, int n, double fill) { return n > 0 ? static_cast<double>(*p) : fill; }
inline void store_f32_part(float* p, D v, int n) { if (n > 0) *p = static_cast<float>(v); }
inline double lane(D v, int) { return v; }
// The halving tree over the lanes (lane j + lane j+h for h = W/2 .. 1, lower lane on the left),
// lane 0's result; and the lanes' largest (for values with no NaN and no -0: then any order)
inline double fold_sum(D v) { return v; }
inline double fold_max(D v) { return v; }
inline D set_lane(D, int, double x) { return x; }

#elif BITGRAD_SIMD_LEVEL == 1

struct D {
  __m256d v;
  D() = default;
  D(__m256d x) : v(x) {}
  D(double x) : v(_mm256_set1_pd(x)) {}
};
struct I {
  __m256i v;
  I() = default;
  I(__m256i x) : v(x) {}
};
struct M {
  __m256d v;
};
constexpr int W = 4;

inline D operator+(D a, D b) { return _mm256_add_pd(a.v, b.v); }
inline D operator-(D a, D b) { return _mm256_sub_pd(a.v, b.v); }
inline D operator*(D a, D b) { return _mm256_mul_pd(a.v, b.v); }
inline D operator/(D a, D b) { return _mm256_div_pd(a.v, b.v); }
inline D operator-(D a) { return _mm256_xor_pd(a.v, _mm256_set1_pd(-0.0)); }
inline D fma(D a, D b, D c) { return _mm256_fmadd_pd(a.v, b.v, c.v); }
inline D sqrt(D a) { return _mm256_sqrt_pd(a.v); }
inline D abs(D a) { return _mm256_andnot_pd(_mm256_set1_pd(-0.0), a.v); }
inline M operator<(D a, D b) { return {_mm256_cmp_pd(a.v, b.v, _CMP_LT_OQ)}; }
inline M operator<=(D a, D b) { return {_mm256_cmp_pd(a.v, b.v, _CMP_LE_OQ)}; }
inline M operator>(D a, D b) { return {_mm256_cmp_pd(a.v, b.v, _CMP_GT_OQ)}; }
inline M operator>=(D a, D b) { return {_mm256_cmp_pd(a.v, b.v, _CMP_GE_OQ)}; }
inline M operator==(D a, D b) { return {_mm256_cmp_pd(a.v, b.v, _CMP_EQ_OQ)}; }
inline M operator!=(D a, D b) { return {_mm256_cmp_pd(a.v, b.v, _CMP_NEQ_UQ)}; }
inline M mand(M a, M b) { return {_mm256_and_pd(a.v, b.v)}; }
inline M mor(M a, M b) { return {_mm256_or_pd(a.v, b.v)}; }
inline M mnot(M a) { return {_mm256_xor_pd(a.v, _mm256_castsi256_pd(_mm256_set1_epi64x(-1)))}; }
inline D select(M m, D a, D b) { return _mm256_blendv_pd(b.v, a.v, m.v); }
inline I selecti(M m, I a, I b) {
  return _mm256_castpd_si256(_mm256_blendv_pd(_mm256_castsi256_pd(b.v), _mm256_castsi256_pd(a.v), m.v));
}
inline I as_int(D a) { return _mm256_castpd_si256(a.v); }
inline D as_double(I a) { return _mm256_castsi256_pd(a.v); }
inline I to_i(std::int64_t v) { return _mm256_set1_epi64x(v); }
template <int N> inline I srl(I a) { return _mm256_srli_epi64(a.v, N); }
template <int N> inline I sll(I a) { return _mm256_slli_epi64(a.v, N); }
// AVX2 has no 64-bit arithmetic shift: bias to unsigned, shift, unbias.
template <int N> inline I sra(I a) {
  const __m256i bias = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ULL));
  __m256i s = _mm256_srli_epi64(_mm256_xor_si256(a.v, bias), N);
  return _mm256_sub_epi64(s, _mm256_srli_epi64(bias, N));
}
inline I addi(I a, I b) { return _mm256_add_epi64(a.v, b.v); }
inline I subi(I a, I b) { return _mm256_sub_epi64(a.v, b.v); }
inline I andi(I a, I b) { return _mm256_and_si256(a.v, b.v); }
inline I ori(I a, I b) { return _mm256_or_si256(a.v, b.v); }
inline M eqi(I a, I b) { return {_mm256_castsi256_pd(_mm256_cmpeq_epi64(a.v, b.v))}; }
inline M gti(I a, I b) { return {_mm256_castsi256_pd(_mm256_cmpgt_epi64(a.v, b.v))}; }
inline D gather(const double* t, I idx) { return _mm256_i64gather_pd(t, idx.v, 8); }
// gather from a table of 8 entries (64-byte aligned): two in-register permutes and a blend;
// lane k of each 64-bit index becomes the 32-bit pair (2k, 2k+1)
inline D lookup8(const double* t, I idx) {
  __m256i k = _mm256_slli_epi64(_mm256_and_si256(idx.v, _mm256_set1_epi64x(3)), 1);
  __m256i pair = _mm256_or_si256(k, _mm256_slli_epi64(_mm256_add_epi64(k, _mm256_set1_epi64x(1)), 32));
  __m256d lo = _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_load_pd(t)), pair));
  __m256d hi = _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_load_pd(t + 4)), pair));
  __m256d upper = _mm256_castsi256_pd(_mm256_cmpgt_epi64(idx.v, _mm256_set1_epi64x(3)));
  return _mm256_blendv_pd(lo, hi, upper);
}
inline bool any(M m) { return _mm256_movemask_pd(m.v) != 0; }
inline bool all(M m) { return _mm256_movemask_pd(m.v) == 0xf; }
inline __m256i part_mask(int n) {
  const __m256i iota = _mm256_set_epi64x(3, 2, 1, 0);
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), iota);
}
inline D load(const double* p) { return _mm256_loadu_pd(p); }
inline void store(double* p, D v) { _mm256_storeu_pd(p, v.v); }
inline D load_part(const double* p, int n, double fill) {
  __m256i m = part_mask(n);
  return _mm256_blendv_pd(_mm256_set1_pd(fill), _mm256_maskload_pd(p, m), _mm256_castsi256_pd(m));
}
inline void store_part(double* p, D v, int n) { _mm256_maskstore_pd(p, part_mask(n), v.v); }
inline D load_range(const double* p, int a, int b) {
  return _mm256_maskload_pd(p, _mm256_andnot_si256(part_mask(a), part_mask(b)));
}
inline D load_f32(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
inline D round_f32(D v) { return _mm256_cvtps_pd(_mm256_cvtpd_ps(v.v)); }
inline void store_f32(float* p, D v) { _mm_storeu_ps(p, _mm256_cvtpd_ps(v.v)); }
inline D load_f32_part(const float* p, int n, double fill) {
  float tmp[4] = {0, 0, 0, 0};
  for (int i = 0; i < n && i < 4; ++i) tmp[i] = p[i];
  D v = _mm256_cvtps_pd(_mm_loadu_ps(tmp));
  return _mm256_blendv_pd(_mm256_set1_pd(fill), v.v, _mm256_castsi256_pd(part_mask(n)));
}
inline void store_f32_part(float* p, D v, int n) {
  float tmp[4];
  _mm_storeu_ps(tmp, _mm256_cvtpd_ps(v.v));
  for (int i = 0; i < n && i < 4; ++i) p[i] = tmp[i];
}
inline double lane(D v, int i) {
  alignas(32) double t[4];
  _mm256_store_pd(t, v.v);
  return t[i];
}
inline double fold_sum(D v) {
  const __m128d b = _mm_add_pd(_mm256_castpd256_pd128(v.v), _mm256_extractf128_pd(v.v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
inline double fold_max(D v) {
  const __m128d b = _mm_max_pd(_mm256_castpd256_pd128(v.v), _mm256_extractf128_pd(v.v, 1));
  return _mm_cvtsd_f64(_mm_max_sd(b, _mm_unpackhi_pd(b, b)));
}
inline D set_lane(D v, int i, double x) {
  alignas(32) double t[4];
  _mm256_store_pd(t, v.v);
  t[i] = x;
  return _mm256_load_pd(t);
}

#elif BITGRAD_SIMD_LEVEL == 2

struct D {
  __m512d v;
  D() = default;
  D(__m512d x) : v(x) {}
  D(double x) : v(_mm512_set1_pd(x)) {}
};
struct I {
  __m512i v;
  I() = default;
  I(__m512i x) : v(x) {}
};
struct M {
  __mmask8 v;
};
constexpr int W = 8;
// masked conversions: GCC 12 warns about the unmasked ones (PR 105593)
inline __m512d cvt_ps_pd(__m256 a) { return _mm512_maskz_cvtps_pd(0xff, a); }
inline __m256 cvt_pd_ps(__m512d a) { return _mm512_maskz_cvtpd_ps(0xff, a); }

inline D operator+(D a, D b) { return _mm512_add_pd(a.v, b.v); }
inline D operator-(D a, D b) { return _mm512_sub_pd(a.v, b.v); }
inline D operator*(D a, D b) { return _mm512_mul_pd(a.v, b.v); }
inline D operator/(D a, D b) { return _mm512_div_pd(a.v, b.v); }
inline D operator-(D a) {
  return _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(a.v), _mm512_set1_epi64(static_cast<long long>(0x8000000000000000ULL))));
}
inline D fma(D a, D b, D c) { return _mm512_fmadd_pd(a.v, b.v, c.v); }
inline D sqrt(D a) { return _mm512_maskz_sqrt_pd(0xff, a.v); }
inline D abs(D a) {
  return _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(a.v), _mm512_set1_epi64(0x7fffffffffffffffLL)));
}
inline M operator<(D a, D b) { return {_mm512_cmp_pd_mask(a.v, b.v, _CMP_LT_OQ)}; }
inline M operator<=(D a, D b) { return {_mm512_cmp_pd_mask(a.v, b.v, _CMP_LE_OQ)}; }
inline M operator>(D a, D b) { return {_mm512_cmp_pd_mask(a.v, b.v, _CMP_GT_OQ)}; }
inline M operator>=(D a, D b) { return {_mm512_cmp_pd_mask(a.v, b.v, _CMP_GE_OQ)}; }
inline M operator==(D a, D b) { return {_mm512_cmp_pd_mask(a.v, b.v, _CMP_EQ_OQ)}; }
inline M operator!=(D a, D b) { return {_mm512_cmp_pd_mask(a.v, b.v, _CMP_NEQ_UQ)}; }
inline M mand(M a, M b) { return {static_cast<__mmask8>(a.v & b.v)}; }
inline M mor(M a, M b) { return {static_cast<__mmask8>(a.v | b.v)}; }
inline M mnot(M a) { return {static_cast<__mmask8>(~a.v)}; }
inline D select(M m, D a, D b) { return _mm512_mask_blend_pd(m.v, b.v, a.v); }
inline I selecti(M m, I a, I b) { return _mm512_mask_blend_epi64(m.v, b.v, a.v); }
inline I as_int(D a) { return _mm512_castpd_si512(a.v); }
inline D as_double(I a) { return _mm512_castsi512_pd(a.v); }
inline I to_i(std::int64_t v) { return _mm512_set1_epi64(v); }
// masked forms: GCC 12 warns about the unmasked ones (PR 105593)
template <int N> inline I srl(I a) { return _mm512_maskz_srli_epi64(0xff, a.v, N); }
template <int N> inline I sll(I a) { return _mm512_maskz_slli_epi64(0xff, a.v, N); }
template <int N> inline I sra(I a) { return _mm512_maskz_srai_epi64(0xff, a.v, N); }
inline I addi(I a, I b) { return _mm512_add_epi64(a.v, b.v); }
inline I subi(I a, I b) { return _mm512_sub_epi64(a.v, b.v); }
inline I andi(I a, I b) { return _mm512_and_si512(a.v, b.v); }
inline I ori(I a, I b) { return _mm512_or_si512(a.v, b.v); }
inline M eqi(I a, I b) { return {_mm512_cmpeq_epi64_mask(a.v, b.v)}; }
inline M gti(I a, I b) { return {_mm512_cmpgt_epi64_mask(a.v, b.v)}; }
inline D gather(const double* t, I idx) { return _mm512_mask_i64gather_pd(_mm512_setzero_pd(), 0xff, idx.v, t, 8); }
// gather from a table of 8 entries (64-byte aligned): one in-register permute
inline D lookup8(const double* t, I idx) { return _mm512_permutexvar_pd(idx.v, _mm512_load_pd(t)); }
inline bool any(M m) { return m.v != 0; }
inline bool all(M m) { return m.v == 0xff; }
inline __mmask8 part_mask(int n) { return static_cast<__mmask8>(n >= 8 ? 0xff : ((1u << (n < 0 ? 0 : n)) - 1u)); }
inline D load(const double* p) { return _mm512_loadu_pd(p); }
inline void store(double* p, D v) { _mm512_storeu_pd(p, v.v); }
inline D load_part(const double* p, int n, double fill) {
  return _mm512_mask_loadu_pd(_mm512_set1_pd(fill), part_mask(n), p);
}
inline void store_part(double* p, D v, int n) { _mm512_mask_storeu_pd(p, part_mask(n), v.v); }
inline D load_range(const double* p, int a, int b) {
  return _mm512_maskz_loadu_pd(static_cast<__mmask8>(part_mask(b) & ~part_mask(a)), p);
}
inline D load_f32(const float* p) { return cvt_ps_pd(_mm256_loadu_ps(p)); }
inline D round_f32(D v) { return cvt_ps_pd(cvt_pd_ps(v.v)); }
inline void store_f32(float* p, D v) { _mm256_storeu_ps(p, cvt_pd_ps(v.v)); }
inline D load_f32_part(const float* p, int n, double fill) {
  __m256 f = _mm256_maskz_loadu_ps(part_mask(n), p);
  return _mm512_mask_blend_pd(part_mask(n), _mm512_set1_pd(fill), cvt_ps_pd(f));
}
inline void store_f32_part(float* p, D v, int n) { _mm256_mask_storeu_ps(p, part_mask(n), cvt_pd_ps(v.v)); }
inline double lane(D v, int i) {
  alignas(64) double t[8];
  _mm512_store_pd(t, v.v);
  return t[i];
}
inline double fold_sum(D v) {
  const __m256d a = _mm256_add_pd(_mm512_castpd512_pd256(v.v), _mm512_extractf64x4_pd(v.v, 1));
  const __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}
inline double fold_max(D v) {
  const __m256d a = _mm256_max_pd(_mm512_castpd512_pd256(v.v), _mm512_extractf64x4_pd(v.v, 1));
  const __m128d b = _mm_max_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_max_sd(b, _mm_unpackhi_pd(b, b)));
}
inline D set_lane(D v, int i, double x) {
  alignas(64) double t[8];
  _mm512_store_pd(t, v.v);
  t[i] = x;
  return _mm512_load_pd(t);
}

#else
#error "unknown BITGRAD_SIMD_LEVEL"
#endif

// Integer → double for |v| < 2^51, exact on every level (no 64-bit convert in AVX2).
inline D small_i_to_d(I v) {
  const double magic = 0x1.8p52;
  return as_double(addi(v, as_int(D(magic)))) - D(magic);
}

// ---- f32 lanes (kernels) -------------------------------------------------------------
#if BITGRAD_SIMD_LEVEL == 0

using F = float;
constexpr int WF = 1;
inline F fma(F a, F b, F c) { return std::fma(a, b, c); }
inline F loadf(const float* p) { return *p; }
inline void storef(float* p, F v) { *p = v; }
inline F loadf_part(const float* p, int n, float fill) { return n > 0 ? *p : fill; }
inline void storef_part(float* p, F v, int n) { if (n > 0) *p = v; }
// lanes [a, b) of p[lane], +0 elsewhere (the others are not read)
inline F loadf_range(const float* p, int a, int b) { return a <= 0 && 0 < b ? *p : 0.0f; }
// lane j < n: p[2j], raw bits (only p[0 .. 2n-2] is read); the other lanes +0
inline F loadf_even(const float* p, int n) { return n > 0 ? *p : 0.0f; }
inline F selectf(bool m, F a, F b) { return m ? a : b; }
inline bool gtf(F a, F b) { return a > b; }
inline bool nanf_(F a) { return a != a; }
inline float lanef(F v, int) { return v; }
inline float foldf_sum(F v) { return v; }  // as fold_sum, f32 lanes
inline float foldf_max(F v) { return v; }
inline bool ltf(F a, F b) { return a < b; }
inline F absf(F a) { return std::bit_cast<float>(std::bit_cast<std::uint32_t>(a) & 0x7fffffffu); }
inline F copysignf_(F mag, F sgn) {
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(mag) & 0x7fffffffu) | (std::bit_cast<std::uint32_t>(sgn) & 0x80000000u));
}
// y 2^k, k = bits(t) - bits(s) (t = s + k: an integer held in the low bits of a float), by adding
// k to y's exponent field (the result must be a normal float)
inline F ldexpf_bits(F y, F t, F s) {
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(y) +
                              ((std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(s)) << 23));
}

#elif BITGRAD_SIMD_LEVEL == 1

struct F {
  __m256 v;
  F() = default;
  F(__m256 x) : v(x) {}
  F(float x) : v(_mm256_set1_ps(x)) {}
};
constexpr int WF = 8;
inline F operator+(F a, F b) { return _mm256_add_ps(a.v, b.v); }
inline F operator-(F a, F b) { return _mm256_sub_ps(a.v, b.v); }
inline F operator*(F a, F b) { return _mm256_mul_ps(a.v, b.v); }
inline F operator/(F a, F b) { return _mm256_div_ps(a.v, b.v); }
inline F fma(F a, F b, F c) { return _mm256_fmadd_ps(a.v, b.v, c.v); }
inline F loadf(const float* p) { return _mm256_loadu_ps(p); }
inline void storef(float* p, F v) { _mm256_storeu_ps(p, v.v); }
inline __m256i part_mask32(int n) {
  const __m256i iota = _mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), iota);
}
inline F loadf_part(const float* p, int n, float fill) {
  __m256i m = part_mask32(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
inline void storef_part(float* p, F v, int n) { _mm256_maskstore_ps(p, part_mask32(n), v.v); }
inline F loadf_range(const float* p, int a, int b) {
  return _mm256_maskload_ps(p, _mm256_andnot_si256(part_mask32(a), part_mask32(b)));
}
inline F loadf_even(const float* p, int n) {
  const int span = n < 8 ? 2 * n - 1 : 15;  // elements read
  const __m256 lo = _mm256_maskload_ps(p, part_mask32(span)), hi = _mm256_maskload_ps(p + 8, part_mask32(span - 8));
  // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] -> [lo0 lo2 lo4 lo6 | hi0 hi2 hi4 hi6]
  const __m256 e = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0)));
}
struct MF {
  __m256 v;
};
inline MF gtf(F a, F b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)}; }
inline MF nanf_(F a) { return {_mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q)}; }
inline MF mforf(MF a, MF b) { return {_mm256_or_ps(a.v, b.v)}; }
inline F selectf(MF m, F a, F b) { return _mm256_blendv_ps(b.v, a.v, m.v); }
inline bool anyf(MF m) { return _mm256_movemask_ps(m.v) != 0; }
inline MF ltf(F a, F b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline F absf(F a) { return _mm256_and_ps(a.v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
inline F copysignf_(F mag, F sgn) {
  const __m256 s = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm256_or_ps(_mm256_andnot_ps(s, mag.v), _mm256_and_ps(s, sgn.v));
}
inline F ldexpf_bits(F y, F t, F s) {
  const __m256i k = _mm256_sub_epi32(_mm256_castps_si256(t.v), _mm256_castps_si256(s.v));
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(y.v), _mm256_slli_epi32(k, 23)));
}
inline float lanef(F v, int i) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v.v);
  return t[i];
}
inline float foldf_sum(F v) {
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v.v), _mm256_extractf128_ps(v.v, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}
inline float foldf_max(F v) {
  const __m128 b = _mm_max_ps(_mm256_castps256_ps128(v.v), _mm256_extractf128_ps(v.v, 1));
  const __m128 c = _mm_max_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_max_ss(c, _mm_shuffle_ps(c, c, 1)));
}
// dst[c*ldd + r] = src[r*lds + c] for an 8 x 8 block
inline void transpose_f32_block(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

#elif BITGRAD_SIMD_LEVEL == 2

struct F {
  __m512 v;
  F() = default;
  F(__m512 x) : v(x) {}
  F(float x) : v(_mm512_set1_ps(x)) {}
};
constexpr int WF = 16;
inline F operator+(F a, F b) { return _mm512_add_ps(a.v, b.v); }
inline F operator-(F a, F b) { return _mm512_sub_ps(a.v, b.v); }
inline F operator*(F a, F b) { return _mm512_mul_ps(a.v, b.v); }
inline F operator/(F a, F b) { return _mm512_div_ps(a.v, b.v); }
inline F fma(F a, F b, F c) { return _mm512_fmadd_ps(a.v, b.v, c.v); }
inline F loadf(const float* p) { return _mm512_loadu_ps(p); }
inline void storef(float* p, F v) { _mm512_storeu_ps(p, v.v); }
inline __mmask16 part_mask16(int n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffff : ((1u << (n < 0 ? 0 : n)) - 1u));
}
inline F loadf_part(const float* p, int n, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), part_mask16(n), p);
}
inline void storef_part(float* p, F v, int n) { _mm512_mask_storeu_ps(p, part_mask16(n), v.v); }
inline F loadf_range(const float* p, int a, int b) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>(part_mask16(b) & ~part_mask16(a)), p);
}
inline F loadf_even(const float* p, int n) {
  const int span = n < 16 ? 2 * n - 1 : 31;  // elements read
  const __m512 lo = _mm512_maskz_loadu_ps(part_mask16(span), p), hi = _mm512_maskz_loadu_ps(part_mask16(span - 16), p + 16);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  return _mm512_permutex2var_ps(lo, even, hi);
}
struct MF {
  __mmask16 v;
};
inline MF gtf(F a, F b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ)}; }
inline MF nanf_(F a) { return {_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q)}; }
inline MF mforf(MF a, MF b) { return {static_cast<__mmask16>(a.v | b.v)}; }
inline F selectf(MF m, F a, F b) { return _mm512_mask_blend_ps(m.v, b.v, a.v); }
inline bool anyf(MF m) { return m.v != 0; }
inline MF ltf(F a, F b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)}; }
inline F absf(F a) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(0x7fffffff))); }
inline F copysignf_(F mag, F sgn) {
  const __m512i s = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_andnot_si512(s, _mm512_castps_si512(mag.v)), _mm512_and_si512(s, _mm512_castps_si512(sgn.v))));
}
inline F ldexpf_bits(F y, F t, F s) {
  const __m512i k = _mm512_sub_epi32(_mm512_castps_si512(t.v), _mm512_castps_si512(s.v));
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(y.v), _mm512_slli_epi32(k, 23)));
}
inline float lanef(F v, int i) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v.v);
  return t[i];
}
inline float foldf_sum(F v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v.v), _mm512_extractf32x8_ps(v.v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}
inline float foldf_max(F v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v.v), _mm512_extractf32x8_ps(v.v, 1));
  const __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_max_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_max_ss(c, _mm_shuffle_ps(c, c, 1)));
}
// dst[c*ldd + r] = src[r*lds + c] for a 16 x 16 block
inline void transpose_f32_block(const float* src, std::int64_t lds, float* dst, std::int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    __m512d c = _mm512_castps_pd(t[4 * i + 2]), e = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
  }
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 2; ++h) {
      const int j = i + 8 * h;
      t[j] = _mm512_shuffle_f32x4(r[j], r[j + 4], 0x88);
      t[j + 4] = _mm512_shuffle_f32x4(r[j], r[j + 4], 0xdd);
    }
  }
  for (int i = 0; i < 8; ++i) {
    _mm512_storeu_ps(dst + i * ldd, _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88));
    _mm512_storeu_ps(dst + (i + 8) * ldd, _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd));
  }
}

#endif
