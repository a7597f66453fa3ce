// bitgrad's elementary functions in f64, written once over the lane types of simd.hpp
// (D, I, M). Only +, -, *, /, sqrt and explicit fma are used, all correctly rounded by
// IEEE 754, so every code path and every platform computes the same bits. f32 functions
// evaluate these and round once (error <= 0.5 ulp + 2^-29 ulp), but sigmoid and tanh, which have
// f32 formulas of their own (sigmoid_f32, tanh_f32 below). Measured accuracy is in
// docs/numerics.md (tools/mathfn_accuracy, against MPFR).
//
// Included inside an ISA namespace after simd.hpp and tables.inc; see simd.hpp.
// Double-double (dd) values are unevaluated sums hi + lo.

struct DD {
  D hi, lo;
};

inline DD two_sum(D a, D b) {
  D s = a + b;
  D bb = s - a;
  D e = (a - (s - bb)) + (b - bb);
  return {s, e};
}
// Requires |a| >= |b| or a == 0.
inline DD fast_two_sum(D a, D b) {
  D s = a + b;
  return {s, b - (s - a)};
}
inline DD two_prod(D a, D b) {
  D p = a * b;
  return {p, fma(a, b, -p)};
}
// (nh + nl) / (dh + dl), rounded to double.
inline D div_dd(D nh, D nl, D dh, D dl) {
  D q = nh / dh;
  D r = fma(-q, dh, nh);  // exact remainder of the leading quotient
  r = (r + nl) - q * dl;
  return q + r / dh;
}
inline D copysign_(D mag, D sgn) {
  return as_double(ori(andi(as_int(mag), to_i(0x7fffffffffffffffLL)), andi(as_int(sgn), to_i(static_cast<std::int64_t>(0x8000000000000000ULL)))));
}
inline M isnan_(D x) { return x != x; }
// 2^k for k in [-1022, 1023].
inline D pow2i(I k) { return as_double(sll<52>(addi(k, to_i(1023)))); }
// y * 2^k for k in [-1078, 1026] with one final rounding when the result is subnormal.
inline D scale(D y, I k) {
  I k1 = sra<1>(k);
  I k2 = subi(k, k1);
  return (y * pow2i(k1)) * pow2i(k2);
}

// e^(zh + zl) = 2^k * (H + L) with |L| <= ulp(H)/2 and relative error < 2^-61.
// Valid for |zh| <= 746 (the caller clamps); |zl| <= 2^-40 |zh| or so.
struct ExpCore {
  D H, L;
  I k;
};
inline ExpCore exp_core(D zh, D zl) {
  const D shift = 0x1.8p52;
  D t = fma(zh, D(kExpInvLn2N), shift);
  D kd = t - shift;
  I ki = subi(as_int(t), as_int(shift));
  D rh0 = fma(-kd, D(kExpLn2NHi), zh);  // exact (Sterbenz)
  D rl0 = fma(-kd, D(kExpLn2NLo), zl);
  DD rr = two_sum(rh0, rl0);  // normalise: later terms use rh alone
  D rh = rr.hi, rl = rr.lo;
  I j = andi(ki, to_i(127));
  I k = sra<kExpTableBits>(ki);
  // e^r - 1 = rh + rl + rh^2/2 + ... ; |r| <= ln2/256, degree 6.
  D p = D(1.0 / 720);
  p = fma(p, rh, D(1.0 / 120));
  p = fma(p, rh, D(1.0 / 24));
  p = fma(p, rh, D(1.0 / 6));
  p = fma(p, rh, D(0.5));
  D tail = (rh * rh) * p;
  D ul = fma(rl, rh, rl) + tail;  // rl (1 + rh) + tail
  D Th = gather(kExpTabHi, j);
  D Tl = gather(kExpTabLo, j);
  DD ph = two_prod(Th, rh);
  DD s = two_sum(Th, ph.hi);  // keeps e^x - 1 exact to dd precision near x = 0
  D lo = s.lo + (ph.lo + fma(Th, ul, fma(Tl, rh, Tl)));
  DD r = fast_two_sum(s.hi, lo);
  return {r.hi, r.lo, k};
}

inline D clamp_(D x, double lo, double hi) {
  D y = select(x < D(lo), D(lo), x);
  return select(y > D(hi), D(hi), y);
}

inline D exp_f64(D x) {
  D xc = clamp_(x, -746.0, 710.0);
  ExpCore e = exp_core(xc, D(0.0));
  D y = scale(e.H + e.L, e.k);
  return select(isnan_(x), x + x, y);
}

// 1/2 + v/6 + v^2/24 + ... + v^5/5040 by Horner's rule (fma from the 1/5040 end): the tail of
// e^v's series after 1 + v, for the small-argument branches
inline D exp_series_from_half(D v) {
  D p = D(1.0 / 5040);
  p = fma(p, v, D(1.0 / 720));
  p = fma(p, v, D(1.0 / 120));
  p = fma(p, v, D(1.0 / 24));
  p = fma(p, v, D(1.0 / 6));
  return fma(p, v, D(0.5));
}

// Both parts of an exp core times 2^k, in two steps of 2^(k/2) (each part's products exact
// unless the result is subnormal): {(H s1) s2, (L s1) s2}.
inline DD scaled_parts(const ExpCore& e) {
  I k1 = sra<1>(e.k);
  I k2 = subi(e.k, k1);
  D s1 = pow2i(k1), s2 = pow2i(k2);
  return {(e.H * s1) * s2, (e.L * s1) * s2};
}

// e^x - 1 as a dd (hi rounded to nearest of the pair), for x <= 709 (finite e^x).
inline DD expm1_dd(D x) {
  D xc = clamp_(x, -746.0, 709.0);
  ExpCore e = exp_core(xc, D(0.0));
  // scale both parts (exact unless the result is far below 1, where -1 dominates)
  const DD sc = scaled_parts(e);
  D Hs = sc.hi;
  D Ls = sc.lo;
  DD a = two_sum(Hs, D(-1.0));
  D lo = a.lo + Ls;
  return fast_two_sum(a.hi, lo);
}

inline D expm1_f64(D x) {
  DD r = expm1_dd(x);
  D y = r.hi + r.lo;
  // beyond 709 the -1 is far below half an ulp of e^x: expm1 = exp there
  y = select(x > D(709.0), exp_f64(x), y);
  // |x| < 2^-9: the series directly, so x^2/2 is not lost to the rounding of 1 + x
  D p = exp_series_from_half(x);
  y = select(abs(x) < D(0x1p-9), fma(x * x, p, x), y);
  y = select(x == D(0.0), x, y);  // keeps -0
  return select(isnan_(x), x + x, y);
}

// log(x) as a dd for finite x > 0 (subnormals included). Relative error < 2^-68.
inline DD log_dd(D x) {
  M sub = x < D(0x1p-1022);
  D xs = select(sub, x * D(0x1p52), x);
  I ix = as_int(xs);
  I tmp = subi(ix, to_i(kLogOff));
  I j = andi(srl<45>(tmp), to_i(127));
  I ei = sra<52>(tmp);
  D m = as_double(subi(ix, sll<52>(ei)));
  ei = addi(ei, selecti(sub, to_i(-52), to_i(0)));
  D e = small_i_to_d(ei);
  D invc = gather(kLogInvC, j);
  // r = m * invc - 1, exactly, as rh + rl
  DD p = two_prod(m, invc);
  DD r = two_sum(p.hi - D(1.0), p.lo);
  // r^2 / 2 as a dd
  DD sq = two_prod(r.hi, r.hi);
  D sql = fma(D(2.0) * r.hi, r.lo, sq.lo);
  // r^3 (1/3 - r/4 + ... + r^8/11)
  D q = D(1.0 / 11);
  q = fma(q, r.hi, D(-1.0 / 10));
  q = fma(q, r.hi, D(1.0 / 9));
  q = fma(q, r.hi, D(-1.0 / 8));
  q = fma(q, r.hi, D(1.0 / 7));
  q = fma(q, r.hi, D(-1.0 / 6));
  q = fma(q, r.hi, D(1.0 / 5));
  q = fma(q, r.hi, D(-1.0 / 4));
  q = fma(q, r.hi, D(1.0 / 3));
  D tail = (sq.hi * r.hi) * q;
  // hi chain: e ln2_hi + log c + rh - rh^2/2, each step error-free
  DD a1 = two_sum(e * D(kLn2Hi), gather(kLogCHi, j));
  DD a2 = two_sum(a1.hi, r.hi);
  DD a3 = two_sum(a2.hi, D(-0.5) * sq.hi);
  D lo = a1.lo + a2.lo + a3.lo;
  lo = lo + (e * D(kLn2Lo) + gather(kLogCLo, j));
  lo = lo + (r.lo - D(0.5) * sql);
  lo = lo + tail;
  return fast_two_sum(a3.hi, lo);
}

inline D log_special(D x, D y) {
  y = select(x == D(0.0), D(-INFINITY), y);
  y = select(x < D(0.0), D(NAN), y);
  y = select(x == D(INFINITY), x, y);
  return select(isnan_(x), x + x, y);
}

inline D log_f64(D x) {
  D xs = select(x > D(0.0), x, D(1.0));
  xs = select(xs == D(INFINITY), D(1.0), xs);
  DD r = log_dd(xs);
  return log_special(x, r.hi + r.lo);
}

inline D log1p_f64(D x) {
  // 1 + x = uh + ul exactly; log(uh + ul) = log(uh) + ul/uh (ul/uh < 2^-52)
  DD u = two_sum(D(1.0), x);
  D uh = select(u.hi > D(0.0), u.hi, D(1.0));
  uh = select(uh == D(INFINITY), D(1.0), uh);
  DD r = log_dd(uh);
  D y = r.hi + (r.lo + u.lo / uh);
  // tiny x: 1 + x rounds to 1 and the correction carries x itself
  D y2 = log_special(u.hi, y);
  y2 = select(x == D(INFINITY), x, y2);
  y2 = select(x < D(-1.0), D(NAN), y2);
  y2 = select(x == D(-1.0), D(-INFINITY), y2);
  y2 = select(x == D(0.0), x, y2);  // keeps -0
  return select(isnan_(x), x + x, y2);
}

inline D tanh_f64(D x) {
  D ax = abs(x);
  D a = select(ax > D(20.0), D(1.0), ax);  // keep the lanes finite
  DD t = expm1_dd(D(2.0) * a);
  DD den = two_sum(t.hi, D(2.0));
  D q = div_dd(t.hi, t.lo, den.hi, den.lo + t.lo);
  q = select(ax > D(20.0), D(1.0), q);
  D y = copysign_(q, x);
  return select(isnan_(x), x + x, y);
}

inline D sigmoid_f64(D x) {
  // s = e^-|x| in (0, 1]; sigmoid = 1/(1+s) for x >= 0, s/(1+s) for x < 0
  D ax = abs(x);
  D nxc = clamp_(-ax, -746.0, 0.0);
  ExpCore e = exp_core(nxc, D(0.0));
  const DD sc = scaled_parts(e);
  D sh = sc.hi;
  D sl = sc.lo;
  DD d = two_sum(D(1.0), sh);
  D dl = d.lo + sl;
  D num_h = select(x < D(0.0), sh, D(1.0));
  D num_l = select(x < D(0.0), sl, D(0.0));
  D y = div_dd(num_h, num_l, d.hi, dl);
  return select(isnan_(x), x + x, y);
}

// ---- f32 results of exp, fast, with the bits above ----
// An f32 function is its f64 function rounded once. Where that rounding is decided by a wide
// margin, a cheaper f64 approximation decides it the same way: *_f32r below evaluate one
// (relative error < 2^-48), keep it on the lanes whose f32 rounding no value within 2^-40 of it
// would change, and take the f64 function above on the others (about one lane in 2^15). The
// f64 function is within 2^-52 of the true value, so both lie in that window and round alike.
// The result is a D whose rounding to f32 is the f32 function's; it is not the f64 function.
// tools/fast_f32_check runs every f32 input through both (docs/numerics.md §8).

alignas(64) constexpr double kExp8Tab[8] = {kExpTabHi[0],  kExpTabHi[16], kExpTabHi[32], kExpTabHi[48],
                                            kExpTabHi[64], kExpTabHi[80], kExpTabHi[96], kExpTabHi[112]};

// e^x for |x| <= 100 (finite, normal): x = (8k + j) ln2/8 + r, |r| <= ln2/16, 2^(j/8) from
// kExp8Tab, e^r - 1 to degree 7 (truncation < 2^-51); relative error < 2^-49.
[[gnu::always_inline]] inline D exp_approx(D x) {
  const D shift = 0x1.8p52;
  D t = fma(x, D(kExpInvLn2N * 0.0625), shift);  // 8/ln2
  D kd = t - shift;
  I ki = subi(as_int(t), as_int(shift));
  D r = fma(-kd, D(kExpLn2NHi * 16.0), x);  // exact: the high part has 35 bits, |kd| < 2^11
  r = fma(-kd, D(kExpLn2NLo * 16.0), r);
  D p = exp_series_from_half(r);
  p = fma(p, r, D(1.0));
  p = p * r;
  D T = lookup8(kExp8Tab, andi(ki, to_i(7)));
  return fma(T, p, T) * pow2i(sra<3>(ki));
}

// True on the lanes where a (in [2^-126, 2^128): a normal f32 after rounding) and every value
// within a relative 2^-40 of it round to the same f32. The f32 rounding of a is decided by the
// 29 mantissa bits of a below the f32's 24; the midpoints between f32 values are the pattern
// 2^28 there (also below a power of two: its lower midpoint lies in a's binade only when a is
// under the power). 2^-40 a is at most 2^13 units of a's last place, so a is safe when those
// bits are more than 2^13 away from 2^28.
[[gnu::always_inline]] inline M f32_rounding_safe(D a) {
  I d = subi(andi(as_int(a), to_i((1LL << 29) - 1)), to_i(1LL << 28));
  return mor(gti(d, to_i(1LL << 13)), gti(to_i(-(1LL << 13)), d));
}

// the f64 function on the lanes not ok (rare: out of line, so the fast forms inline small)
[[gnu::noinline]] inline D exp_f64_where(M ok, D y, D x) { return select(ok, y, exp_f64(x)); }

[[gnu::always_inline]] inline D exp_f32r(D x) {
  M in = mand(x >= D(-87.0), x <= D(88.0));  // a normal f32 result; NaN fails
  // x <= -104 (-inf included: a softmax's masked scores): e^x < 2^-150, which rounds to +0
  M zero = x <= D(-104.0);
  D y = select(zero, D(0.0), exp_approx(select(in, x, D(0.0))));
  M ok = mor(mand(in, f32_rounding_safe(y)), zero);
  if (!all(ok)) y = exp_f64_where(ok, y, x);
  return y;
}

// ---- f32 sigmoid and tanh (numerics §8): f32 formulas, not the f64 functions rounded ----
// Evaluated in f32 lanes by fixed formulas of + - * / and fma, so every code path gives the same
// bits: twice the values of f64 lanes, and no rounding check. Each keeps its intermediate values
// as unevaluated f32 pairs (hi + lo) where a rounding would cost a bit of the result, and ends in
// one corrected division; within 1 ulp of the true value on every f32 input (all 2^32 measured,
// docs/numerics.md §8).

constexpr float kShiftF = 0x1.8p23f;  // t = fma(v, 1/ln2, kShiftF) holds round(v/ln2) in its low bits

// v = k ln2 + r, |r| <= ln2/2 (plus rounding), for v in [-151, 0]; t = kShiftF + k. k ln2_hi is
// exact (15 bits times 8) and so is v - k ln2_hi; r is that minus k ln2_lo, rounded once.
[[gnu::always_inline]] inline F reduce_ln2_f32(F v, F& t) {
  t = fma(v, F(0x1.715476p+0f), F(kShiftF));
  const F k = t - F(kShiftF);
  const F r = fma(k, F(-0x1.62e4p-1f), v);
  return fma(k, F(-0x1.7f7d1cp-20f), r);
}
// (e^r - 1 - r) / r^2 for |r| <= ln2/2: the degree-7 Taylor polynomial's tail (truncation < 2^-27
// of e^r)
[[gnu::always_inline]] inline F expm1_tail_f32(F r) {
  F q = F(0x1.a01a02p-13f);
  q = fma(q, r, F(0x1.6c16c2p-10f));
  q = fma(q, r, F(0x1.111112p-7f));
  q = fma(q, r, F(0x1.555556p-5f));
  q = fma(q, r, F(0x1.555556p-3f));
  return fma(q, r, F(0x1p-1f));
}
// hi + lo = a + b exactly, for |a| >= |b| or a = 0
[[gnu::always_inline]] inline F fast_two_sum_f32(F a, F b, F& lo) {
  const F s = a + b;
  lo = b - (s - a);
  return s;
}
// n / (dh + dl), n = nh + nl: the quotient of the pairs to about 2^-40, rounded once (the
// residual of the first quotient is exact: fma)
[[gnu::always_inline]] inline F div_pairs_f32(F nh, F nl, F dh, F dl) {
  const F inv = F(1.0f) / dh;
  const F q = nh * inv, nq = F(0.0f) - q;
  return fma(fma(nq, dl, fma(nq, dh, nh) + nl), inv, q);
}
// p = e^r - 1 = ph + pl: r plus the tail r^2 q(r) (|r^2 q| < |r|/4, so the pair is exact)
[[gnu::always_inline]] inline F expm1_pair_f32(F r, F& pl) { return fast_two_sum_f32(r, (r * r) * expm1_tail_f32(r), pl); }
// e^v = eh + el for v in [-104, 0]: 2^k (1 + ph + pl), the product's rounding kept in el; 2^k
// is applied as 2^(k+32) then 2^-32, so a subnormal e is rounded once from a normal value. A
// NaN v gives NaN (through ph).
[[gnu::always_inline]] inline F exp_pair_f32(F v, F& el) {
  F t, pl;
  const F ph = expm1_pair_f32(reduce_ln2_f32(v, t), pl);
  const F s = ldexpf_bits(F(1.0f), t, F(kShiftF - 32.0f));  // 2^(k+32): normal
  const F h = fma(s, ph, s);                                 // s (1 + ph), the product exact
  el = (fma(s, ph, s - h) + s * pl) * F(0x1p-32f);           // its rounding error (s - h exact), s pl
  return h * F(0x1p-32f);
}
// sigmoid(x) = 1/(1 + e) for x >= 0, e/(1 + e) below, e = e^-|x| (|x| above 104, +-inf included,
// taken as 104: e^-104 rounds to +0)
[[gnu::always_inline]] inline F sigmoid_f32(F x) {
  const F a0 = absf(x);
  const F a = selectf(gtf(a0, F(104.0f)), F(104.0f), a0);
  F el, dl;
  const F eh = exp_pair_f32(F(0.0f) - a, el);
  const F dh = fast_two_sum_f32(F(1.0f), eh, dl);
  const auto neg = ltf(x, F(0.0f));
  return div_pairs_f32(selectf(neg, eh, F(1.0f)), selectf(neg, el, F(0.0f)), dh, dl + el);  // NaN: NaN
}

// tanh(x) = sign(x) (1 - e)/(1 + e), e = e^-2a = s (1 + ph + pl), s = 2^k, a = |x| (above 20
// taken as 20). 1 - e cancels near 0: it is taken as (1 - s) - s ph - s pl, each part a pair
// (for k = 0, -ph - pl: no rounding), as is 1 + e, so the quotient sees no rounding but the
// polynomial's and r's.
[[gnu::always_inline]] inline F tanh_f32(F x) {
  const F a0 = absf(x);
  const F a = selectf(gtf(a0, F(20.0f)), F(20.0f), a0);
  F t, pl;
  const F ph = expm1_pair_f32(reduce_ln2_f32(F(-2.0f) * a, t), pl);
  const F s = ldexpf_bits(F(1.0f), t, F(kShiftF));  // 2^k, k >= -58: normal; s ph and s pl exact
  const F sp = s * ph, spl = s * pl;
  F ae, be, nl, dl;
  const F A = fast_two_sum_f32(F(1.0f), F(0.0f) - s, ae);  // 1 - s, exact for k >= -24
  const F B = fast_two_sum_f32(F(1.0f), s, be);
  const F nh = fast_two_sum_f32(A, F(0.0f) - sp, nl);      // |sp| < |A| unless A = 0
  const F dh = fast_two_sum_f32(B, sp, dl);
  return copysignf_(div_pairs_f32(nh, nl + (ae - spl), dh, dl + (be + spl)), x);  // NaN: NaN (through ph)
}

// erf in two branches; erf_f64 evaluates both on every lane and selects, erf_in_place (the
// kernels) evaluates the second only on the values that take it: the same bits either way.
// |x| < 0.84375: x + x q(x^2)
inline D erf_small_f64(D x) {
  D s = x * x;
  D q = D(kErfSmall[12]);
  for (int i = 11; i >= 0; --i) q = fma(q, s, D(kErfSmall[i]));
  return fma(x, q, x);
}
// |x| >= 0.84375 (and NaN): 1 - exp(-x^2) g(x) below 6, 1 from there, with x's sign
inline D erf_big_f64(D x) {
  D ax = abs(x);
  D a = clamp_(ax, kErfSmallBound, kErfBig);
  I idx = to_i(0);
  for (int i = 0; i < kErfIntervals - 1; ++i) idx = addi(idx, selecti(a >= D(kErfBounds[i]), to_i(1), to_i(0)));
  D t = a - lookup8(kErfMid, idx);
  D g = lookup8(kErfCoef[13], idx);
  for (int kk = 12; kk >= 0; --kk) g = fma(g, t, lookup8(kErfCoef[kk], idx));
  DD sq = two_prod(a, a);
  ExpCore e = exp_core(-sq.hi, -sq.lo);
  D eh = scale(e.H, e.k);
  D el = scale(e.L, e.k);
  DD c = two_prod(eh, g);
  D cl = fma(el, g, c.lo);
  DD one = two_sum(D(1.0), -c.hi);
  D ybig = one.hi + (one.lo - cl);
  ybig = select(ax >= D(kErfBig), D(1.0), ybig);
  return select(isnan_(x), x + x, copysign_(ybig, x));
}
inline M erf_takes_small(D x) { return abs(x) < D(kErfSmallBound); }

inline D erf_f64(D x) { return select(erf_takes_small(x), erf_small_f64(x), erf_big_f64(x)); }

// ---- sin / cos -------------------------------------------------------------------------
// Reduction: x = k pi/2 + (rh + rl), |rh| <= pi/4 (+ rounding). Below 2^20 a four-part
// Cody-Waite reduction in dd; above, Payne-Hanek (reduce_pio2_large, scalar, per lane).
struct Reduced {
  D rh, rl;
  I k;
};

inline Reduced reduce_pio2_medium(D x) {
  const D shift = 0x1.8p52;
  D t = fma(x, D(kInvPio2), shift);
  D kd = t - shift;
  I k = subi(as_int(t), as_int(shift));
  D y = fma(-kd, D(kPio2C1), x);              // exact
  DD a = two_sum(y, -(kd * D(kPio2C2)));      // kd*C2 exact
  DD p = two_prod(kd, D(kPio2C3));
  DD b = two_sum(a.hi, -p.hi);
  D lo = (a.lo + b.lo) - (p.lo + kd * D(kPio2C4));
  DD r = two_sum(b.hi, lo);
  return {r.hi, r.lo, k};
}

inline D sin_poly(D rh, D rl) {
  D z = rh * rh;
  D p = D(kSinPoly[6]);
  for (int i = 5; i >= 0; --i) p = fma(p, z, D(kSinPoly[i]));
  D v = z * rh;
  // sin(rh + rl) = rh + rh^3 S(z) + rl (1 - z/2)
  return rh + fma(v, p, rl * fma(D(-0.5), z, D(1.0)));
}

inline D cos_poly(D rh, D rl) {
  DD z = two_prod(rh, rh);
  D p = D(kCosPoly[6]);
  for (int i = 5; i >= 0; --i) p = fma(p, z.hi, D(kCosPoly[i]));
  D hz = D(0.5) * z.hi;
  D w = D(1.0) - hz;
  // cos(rh + rl) = 1 - z/2 + z^2 C(z) - rh rl; (1 - w) - hz recovers w's rounding
  D corr = ((D(1.0) - w) - hz) + (fma(z.hi * z.hi, p, -(D(0.5) * z.lo)) - rh * rl);
  return w + corr;
}

// quadrant selection: which = 0 for sin, 1 for cos
inline D sincos_finish(D sr, D cr, I k, int which) {
  I n = andi(addi(k, to_i(which)), to_i(3));
  D v = select(eqi(andi(n, to_i(1)), to_i(0)), sr, cr);
  return select(eqi(andi(n, to_i(2)), to_i(0)), v, -v);
}

// x = k pi/2 + (rh + rl) for finite x: Cody-Waite below 2^20, Payne-Hanek per lane above
inline Reduced reduce_pio2(D x, D ax) {
  M big = ax >= D(0x1p20);
  D xm = select(big, D(0.0), x);
  Reduced r = reduce_pio2_medium(xm);
  if (any(mand(big, ax != D(INFINITY)))) {
    for (int l = 0; l < W; ++l) {
      double xl = lane(x, l);
      double a = xl < 0 ? -xl : xl;
      if (a >= 0x1p20 && a != INFINITY && a == a) {
        double rh, rl;
        int kq = ::bitgrad::math::reduce_pio2_large(xl, &rh, &rl);
        r.rh = set_lane(r.rh, l, rh);
        r.rl = set_lane(r.rl, l, rl);
        alignas(64) std::int64_t kk[W];
        std::memcpy(kk, &r.k, sizeof(kk));
        kk[l] = kq;
        std::memcpy(&r.k, kk, sizeof(kk));
      }
    }
  }
  return r;
}

inline D sincos_f64(D x, int which) {
  D ax = abs(x);
  Reduced r = reduce_pio2(x, ax);
  D sr = sin_poly(r.rh, r.rl);
  D cr = cos_poly(r.rh, r.rl);
  D y = sincos_finish(sr, cr, r.k, which);
  // tiny: sin x = x (keeps -0), cos x = 1
  y = select(ax < D(0x1p-27), which == 0 ? x : D(1.0), y);
  y = select(ax == D(INFINITY), D(NAN), y);
  return select(isnan_(x), x + x, y);
}

// tan x = sin r / cos r (k even) or -cos r / sin r (k odd), the quotient of the two
// polynomials kept as double-doubles (sin_poly's and cos_poly's last additions, exact by
// fast_two_sum) by div_dd: one rounding of a value good to about 2^-60.
inline D tan_f64(D x) {
  D ax = abs(x);
  Reduced r = reduce_pio2(x, ax);
  D z = r.rh * r.rh;
  D p = D(kSinPoly[6]);
  for (int i = 5; i >= 0; --i) p = fma(p, z, D(kSinPoly[i]));
  DD sn = fast_two_sum(r.rh, fma(z * r.rh, p, r.rl * fma(D(-0.5), z, D(1.0))));
  DD z2 = two_prod(r.rh, r.rh);
  D q = D(kCosPoly[6]);
  for (int i = 5; i >= 0; --i) q = fma(q, z2.hi, D(kCosPoly[i]));
  D hz = D(0.5) * z2.hi;
  D w = D(1.0) - hz;
  DD cs = fast_two_sum(w, ((D(1.0) - w) - hz) + (fma(z2.hi * z2.hi, q, -(D(0.5) * z2.lo)) - r.rh * r.rl));
  M odd = eqi(andi(r.k, to_i(1)), to_i(1));
  D y = div_dd(select(odd, -cs.hi, sn.hi), select(odd, -cs.lo, sn.lo), select(odd, sn.hi, cs.hi), select(odd, sn.lo, cs.lo));
  y = select(ax < D(0x1p-27), x, y);  // tiny: tan x = x (keeps -0)
  y = select(ax == D(INFINITY), D(NAN), y);
  return select(isnan_(x), x + x, y);
}

// ---- rounding to integers (exact) ----------------------------------------------------------
// |x| < 2^52: (|x| + 2^52) - 2^52 is |x| rounded to an integer, halves to even (round to
// nearest is the only mode bitgrad runs in); at or above 2^52, inf and NaN, x is its own value.
// The results keep x's sign (floor(-0.5) = -1, ceil(-0.5) = -0, round(-0.5) = -0).
inline D round_even_f64(D x) {
  D ax = abs(x);
  D t = copysign_((ax + D(0x1p52)) - D(0x1p52), x);
  return select(ax < D(0x1p52), t, x);
}
inline D floor_f64(D x) {
  D r = round_even_f64(x);
  return copysign_(select(r > x, r - D(1.0), r), x);
}
inline D ceil_f64(D x) {
  D r = round_even_f64(x);
  return copysign_(select(r < x, r + D(1.0), r), x);
}

// sin(2 pi u) and cos(2 pi u): exact reduction in u, used by the normal distribution.
inline D sincos2pi_f64(D u, int which) {
  const D shift = 0x1.8p52;
  D t = fma(u, D(4.0), shift);
  D nd = t - shift;
  I n = subi(as_int(t), as_int(shift));
  D f = fma(nd, D(-0.25), u);  // exact
  DD r = two_prod(f, D(kTwoPiHi));
  D rl = fma(f, D(kTwoPiLo), r.lo);
  DD rr = fast_two_sum(r.hi, rl);
  D sr = sin_poly(rr.hi, rr.lo);
  D cr = cos_poly(rr.hi, rr.lo);
  return sincos_finish(sr, cr, n, which);
}

// 1/sqrt(x) with the rounding errors of sqrt and of the reciprocal corrected: with
// s = sqrt(x), e = x - s^2 and q = 1/s, r = 1 - q s (both exact by fma),
// 1/sqrt(x) = q + q (r - e q^2 / 2) + O(2^-104).
inline D rsqrt_f64(D x) {
  M tiny = x < D(0x1p-1000);  // keep x - s^2 exact: scale subnormals up by 2^108
  x = select(tiny, x * D(0x1p108), x);
  D s = sqrt(x);
  D e = fma(-s, s, x);
  D q = D(1.0) / s;
  D r = fma(-q, s, D(1.0));
  D y = fma(q, r - D(0.5) * e * q * q, q);
  // 0, inf, negative and NaN inputs: the plain quotient has the IEEE answer
  y = select(tiny, y * D(0x1p54), y);
  M plain = mnot(mand(x > D(0.0), x < D(INFINITY)));
  return select(plain, q, y);
}

// ---- pow --------------------------------------------------------------------------------
inline D pow_f64(D x, D y) {
  D ax = abs(x);
  D axs = select(mand(ax > D(0.0), ax != D(INFINITY)), ax, D(1.0));
  DD L = log_dd(axs);
  DD z = two_prod(y, L.hi);
  D zl = fma(y, L.lo, z.lo);
  // |y log x| beyond the range of exp (or overflowing): only its sign matters
  M out = mnot(abs(z.hi) <= D(746.0));
  DD zz = fast_two_sum(select(out, D(0.0), z.hi), select(out, D(0.0), zl));
  D zh = select(out, select(z.hi > D(0.0), D(710.0), D(-746.0)), zz.hi);
  D zlo = select(out, D(0.0), zz.lo);
  ExpCore e = exp_core(zh, zlo);
  D r = scale(e.H + e.L, e.k);

  // integer / odd classification of y
  D ay = abs(y);
  D shift = 0x1p52;
  D ty = (ay + shift) - shift;  // round(|y|) for |y| < 2^52
  M y_big = ay >= D(0x1p52);
  M y_int = mor(y_big, ty == ay);
  I ybits = as_int(select(ay < D(0x1p52), ay + shift, ay));
  M y_odd = mand(mand(y_int, ay < D(0x1p53)), eqi(andi(ybits, to_i(1)), to_i(1)));

  // x < 0: integer y gives +-|x|^y, other y NaN
  D neg = select(y_odd, -r, r);
  r = select(x < D(0.0), select(y_int, neg, D(NAN)), r);
  // x = +-0
  M yneg = y < D(0.0);
  D zero_res = select(yneg, D(INFINITY), D(0.0));
  zero_res = select(y_odd, copysign_(zero_res, x), zero_res);
  r = select(ax == D(0.0), zero_res, r);
  // x = +-inf
  D inf_res = select(yneg, D(0.0), D(INFINITY));
  inf_res = select(mand(y_odd, x < D(0.0)), -inf_res, inf_res);
  r = select(ax == D(INFINITY), inf_res, r);
  // y = +-inf
  M ay_inf = ay == D(INFINITY);
  M small_ax = ax < D(1.0);
  M ypos = y > D(0.0);
  // |x| < 1: y=+inf -> 0, y=-inf -> inf ; |x| > 1: y=+inf -> inf, y=-inf -> 0
  M to_inf = mor(mand(small_ax, mnot(ypos)), mand(mnot(small_ax), ypos));
  D yi = select(to_inf, D(INFINITY), D(0.0));
  yi = select(ax == D(1.0), D(1.0), yi);
  r = select(ay_inf, yi, r);
  // NaN operands
  r = select(mor(isnan_(x), isnan_(y)), x + y, r);
  // pow(x, +-0) = 1 and pow(1, y) = 1, even for NaN
  r = select(mor(ay == D(0.0), x == D(1.0)), D(1.0), r);
  return r;
}
