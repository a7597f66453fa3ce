// Scalar reference kernels: each spells out its canonical order literally (docs/numerics.md)
// and is the `scalar` code path. The fast paths (fast_impl.hpp, gemm_impl.hpp) must give the
// same bits; tests/kernels compares them with ==.
#include <cmath>
#include <cstdint>
#include <limits>

#include "bitgrad/math.hpp"
#include "kernels/kernels.hpp"
#include "kernels/lowp.hpp"
#include "kernels/reference.hpp"
#include "kernels/row_rule.hpp"
#include "kernels/thread_pool.hpp"

// A line of bitgrad/op_list.hpp without its case in a switch below does not build
#pragma GCC diagnostic error "-Wswitch"

namespace bitgrad::kern::ref {

namespace {

constexpr double kSqrtHalf = 0x1.6a09e667f3bcdp-1;       // sqrt(1/2) rounded
constexpr double kInvSqrt2Pi = 0x1.9884533d43651p-2;     // 1/sqrt(2 pi) rounded

// f32 transcendental values are the f64 value rounded once
template <class T>
inline T from_d(double v) {
  return static_cast<T>(v);
}

inline double gelu_d(double x) {
  double e = math::erf(x * kSqrtHalf);
  return (0.5 * x) * (1.0 + e);
}

inline double gelu_grad_d(double x) {
  double cdf = 0.5 * (1.0 + math::erf(x * kSqrtHalf));
  double pdf = math::exp(-0.5 * (x * x)) * kInvSqrt2Pi;
  return cdf + x * pdf;
}

// x beyond 20 (PyTorch's threshold), else max(x, +0) + log1p(e^-|x|); gradient sigmoid(x), 1 beyond
inline double softplus_d(double x) {
  if (x > 20.0) return x;
  const double m = x > 0.0 ? x : 0.0;
  return m + math::log1p(math::exp(-std::fabs(x)));
}
inline double softplus_grad_d(double x, double g) { return x > 20.0 ? g : g * math::sigmoid(x); }

// the activations of numerics.md §32, in f64
constexpr double kTwoOverSqrtPi = 0x1.20dd750429b6dp+0;  // 2/sqrt(pi) rounded
inline double silu_d(double x) { return x * math::sigmoid(x); }
inline double silu_grad_d(double x, double g) {
  const double s = math::sigmoid(x);
  return g * (s * (1.0 + x * (1.0 - s)));
}
inline double mish_d(double x) { return x * math::tanh(softplus_d(x)); }
inline double mish_grad_d(double x, double g) {
  const double t = math::tanh(softplus_d(x));
  return g * (t + (x * math::sigmoid(x)) * (1.0 - t * t));
}
// in T: 1, -1, or x itself (+-0, NaN)
template <class T>
T sign_one(T x) {
  return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}
// in T, PyTorch's order: (x * min(max(x + 3, 0), 6)) / 6, NaN passed on
template <class T>
T hardswish_one(T x) {
  T c = x + T(3);
  if (!(c > T(0)) && c == c) c = T(0);
  if (c > T(6)) c = T(6);
  return (x * c) / T(6);
}
template <class T>
T hardswish_grad_one(T x, T g) {
  return x < T(-3) ? T(0) : (x <= T(3) ? g * (x / T(3) + T(0.5)) : g);
}

template <class T>
T maximum(T a, T b) {
  if (a != a || b != b) return canonical_nan<T>();
  if (a > b) return a;
  if (b > a) return b;
  return std::signbit(a) ? b : a;  // equal: +0 beats -0
}
template <class T>
T minimum(T a, T b) {
  if (a != a || b != b) return canonical_nan<T>();
  if (a < b) return a;
  if (b < a) return b;
  return std::signbit(a) ? a : b;  // equal: -0 beats +0
}

template <class T>
T unary_one(Unary op, T x) {
  const double d = static_cast<double>(x);
  switch (op) {
    case Unary::neg: return -x;
    case Unary::abs: return std::fabs(x);
    case Unary::exp: return from_d<T>(math::exp(d));
    case Unary::expm1: return from_d<T>(math::expm1(d));
    case Unary::log: return from_d<T>(math::log(d));
    case Unary::log1p: return from_d<T>(math::log1p(d));
    case Unary::sqrt: return std::sqrt(x);
    case Unary::rsqrt: return from_d<T>(math::rsqrt(d));
    case Unary::tanh: return math::tanh(x);  // f32: §8's f32 formula; f64: the f64 function
    case Unary::sigmoid: return math::sigmoid(x);
    case Unary::erf: return from_d<T>(math::erf(d));
    case Unary::sin: return from_d<T>(math::sin(d));
    case Unary::cos: return from_d<T>(math::cos(d));
    case Unary::relu: return (x > T(0) || x != x) ? x : T(0);
    case Unary::gelu: return from_d<T>(gelu_d(d));
    case Unary::square: return x * x;
    case Unary::reciprocal: return T(1) / x;
    case Unary::softplus: return from_d<T>(softplus_d(d));
    case Unary::sign: return sign_one(x);
    case Unary::tan: return from_d<T>(math::tan(d));
    case Unary::floor: return from_d<T>(math::floor(d));
    case Unary::ceil: return from_d<T>(math::ceil(d));
    case Unary::round: return from_d<T>(math::round_even(d));
    case Unary::softsign: return x / (T(1) + std::fabs(x));
    case Unary::silu: return from_d<T>(silu_d(d));
    case Unary::mish: return from_d<T>(mish_d(d));
    case Unary::hardswish: return hardswish_one(x);
    case Unary::count: break;
  }
  return x;
}

template <class T>
T binary_one(Binary op, T a, T b) {
  switch (op) {
    case Binary::add: return a + b;
    case Binary::sub: return a - b;
    case Binary::mul: return a * b;
    case Binary::div: return a / b;
    case Binary::pow: return from_d<T>(math::pow(static_cast<double>(a), static_cast<double>(b)));
    case Binary::maximum: return maximum(a, b);
    case Binary::minimum: return minimum(a, b);
    case Binary::count: break;
  }
  return a;
}

template <class T>
void gemm(const GemmArgs<T>& g) {
  parallel_for(g.M, 1, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      for (std::int64_t j = 0; j < g.N; ++j) {
        auto a = [&](std::int64_t k) { return g.A[i * g.rsa + k * g.csa]; };
        auto b = [&](std::int64_t k) { return g.B[k * g.rsb + j * g.csb]; };
        // blocks of 32 k's, each a chain from +0; the pairwise tree over the blocks; + bias
        PairwiseStack<T> st;
        for (std::int64_t k0 = 0; k0 < g.K; k0 += kBatchBlock) {
          T blk = T(0);
          for (std::int64_t k = k0; k < k0 + kBatchBlock && k < g.K; ++k) blk = std::fma(a(k), b(k), blk);
          st.push(blk);
        }
        T c = st.total();
        if (g.bias) c = c + g.bias[j];
        g.C[i * g.ldc + j] = canon(c);
      }
    }
  });
}

template <class T>
void unary(Unary op, const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = canon(unary_one(op, x[i]));
}

template <class T>
void binary(Binary op, Bcast bc, const T* a, const T* b, T* y, std::int64_t outer, std::int64_t inner) {
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const std::int64_t k = o * inner + i;
      switch (bc) {
        case Bcast::same: y[k] = canon(binary_one(op, a[k], b[k])); break;
        case Bcast::row: y[k] = canon(binary_one(op, a[k], b[i])); break;
        case Bcast::col: y[k] = canon(binary_one(op, a[k], b[o])); break;
        case Bcast::rrow: y[k] = canon(binary_one(op, b[i], a[k])); break;
        case Bcast::rcol: y[k] = canon(binary_one(op, b[o], a[k])); break;
      }
    }
  }
}

// gelu_d and gelu_grad_d split at e = erf(x/sqrt 2)
template <class T>
void gelu_keep(const T* x, T* y, double* e, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]);
    e[i] = math::erf(d * kSqrtHalf);
    y[i] = canon(from_d<T>((0.5 * d) * (1.0 + e[i])));
  }
}
// the LSTM step as its ops compute it: each result rounded to T (canon: a NaN is stored canonical)
template <class T>
void lstm_gates(const T* xz, std::int64_t ldx, const T* b, const T* hh, const T* c, std::int64_t N, std::int64_t H, T* c_out, T* h_out,
                std::int64_t ldh, T* keep) {
  // the input part's xz + b (an add op's rounding) where b is given
  auto xb = [b](const T* x, std::int64_t q) { return b ? canon(*x + b[q]) : *x; };
  for (std::int64_t n = 0; n < N; ++n) {
    const T* x = xz + n * ldx;
    const T* r = hh + n * 4 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const T i = canon(unary_one(Unary::sigmoid, canon(xb(x + j, j) + r[j])));
      const T f = canon(unary_one(Unary::sigmoid, canon(xb(x + H + j, H + j) + r[H + j])));
      const T g = canon(unary_one(Unary::tanh, canon(xb(x + 2 * H + j, 2 * H + j) + r[2 * H + j])));
      const T o = canon(unary_one(Unary::sigmoid, canon(xb(x + 3 * H + j, 3 * H + j) + r[3 * H + j])));
      const T cn = canon(canon(f * c[n * H + j]) + canon(i * g));
      const T tc = canon(unary_one(Unary::tanh, cn));
      c_out[n * H + j] = cn;
      h_out[n * ldh + j] = canon(o * tc);
      if (keep) {
        T* k = keep + n * 5 * H + j;
        k[0] = i, k[H] = f, k[2 * H] = g, k[3 * H] = o, k[4 * H] = tc;
      }
    }
  }
}
template <class T>
void gru_gates(const T* xz, std::int64_t ldx, const T* hh, const T* h, std::int64_t ldh, std::int64_t N, std::int64_t H, T* h_out,
               std::int64_t ldo, T* keep) {
  for (std::int64_t n = 0; n < N; ++n) {
    const T* x = xz + n * ldx;
    const T* r3 = hh + n * 3 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const T r = canon(unary_one(Unary::sigmoid, canon(x[j] + r3[j])));
      const T z = canon(unary_one(Unary::sigmoid, canon(x[H + j] + r3[H + j])));
      const T nn = canon(unary_one(Unary::tanh, canon(x[2 * H + j] + canon(r * r3[2 * H + j]))));
      h_out[n * ldo + j] = canon(canon(canon(h[n * ldh + j] - nn) * z) + nn);
      if (keep) {
        T* k = keep + n * 3 * H + j;
        k[0] = r, k[H] = z, k[2 * H] = nn;
      }
    }
  }
}
template <class T>
void gru_grad(const T* keep, const T* hh, const T* h, const T* g, std::int64_t N, std::int64_t H, T* gx, T* ghh, T* dh) {
  for (std::int64_t n = 0; n < N; ++n) {
    const T* k = keep + n * 3 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const T r = k[j], z = k[H + j], nn = k[2 * H + j], hn = hh[n * 3 * H + 2 * H + j], gv = g[n * H + j];
      const T a = canon(h[n * H + j] - nn);
      const T ga = canon(gv * z), gz = canon(gv * a);
      const T gn = canon(gv + canon(-ga));  // the final add's g, then the sub's -ga, summed in that order
      const T gpn = canon(gn * (T(1) - nn * nn));
      const T gr = canon(gpn * hn), ghn = canon(gpn * r);
      const T gpr = canon((gr * r) * (T(1) - r)), gpz = canon((gz * z) * (T(1) - z));
      T* x = gx + n * 3 * H + j;
      T* y = ghh + n * 3 * H + j;
      x[0] = y[0] = canon(gpr + T(0));
      x[H] = y[H] = canon(gpz + T(0));
      x[2 * H] = canon(gpn + T(0));
      y[2 * H] = canon(ghn + T(0));
      if (dh) dh[n * H + j] = ga;
    }
  }
}
template <class T>
void lstm_cell_grad(const T* keep, const T* c, const T* gc, std::int64_t N, std::int64_t H, T* gz, std::int64_t ldz, T* gc_prev) {
  for (std::int64_t r = 0; r < N; ++r) {
    const T* kr = keep + r * 5 * H;
    T* zr = gz + r * ldz;
    for (std::int64_t j = 0; j < H; ++j) {
      const T g = gc[r * H + j], i = kr[j], f = kr[H + j], gg = kr[2 * H + j];
      const T g_f = g * c[r * H + j], g_i = g * gg, g_g = g * i;
      zr[j] = canon((g_i * i) * (T(1) - i) + T(0));
      zr[H + j] = canon((g_f * f) * (T(1) - f) + T(0));
      zr[2 * H + j] = canon(g_g * (T(1) - gg * gg) + T(0));
      if (gc_prev) gc_prev[r * H + j] = canon(g * f);
    }
  }
}
template <class T>
void lstm_hidden_grad(const T* keep, const T* gh, std::int64_t N, std::int64_t H, T* gz_o, std::int64_t ldz, T* gc) {
  for (std::int64_t r = 0; r < N; ++r) {
    const T* kr = keep + r * 5 * H;
    for (std::int64_t j = 0; j < H; ++j) {
      const T g = gh[r * H + j], o = kr[3 * H + j], tc = kr[4 * H + j];
      const T g_o = g * tc, g_tc = g * o;
      gz_o[r * ldz + j] = canon((g_o * o) * (T(1) - o) + T(0));
      gc[r * H + j] = canon(g_tc * (T(1) - tc * tc));
    }
  }
}
template <class T>
void gelu_grad_kept(const T* x, const double* e, const T* g, T* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]);
    const double pdf = math::exp(-0.5 * (d * d)) * kInvSqrt2Pi;
    out[i] = canon(from_d<T>(static_cast<double>(g[i]) * (0.5 * (1.0 + e[i]) + d * pdf)));
  }
}

template <class T>
void act_grad(ActGrad op, const T* v, const T* g, T* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    switch (op) {
      case ActGrad::relu: out[i] = v[i] > T(0) ? g[i] : T(0); break;
      case ActGrad::tanh: out[i] = g[i] * (T(1) - v[i] * v[i]); break;
      case ActGrad::sigmoid: out[i] = (g[i] * v[i]) * (T(1) - v[i]); break;
      case ActGrad::gelu:
        out[i] = from_d<T>(static_cast<double>(g[i]) * gelu_grad_d(static_cast<double>(v[i])));
        break;
      case ActGrad::softplus:
        out[i] = from_d<T>(softplus_grad_d(static_cast<double>(v[i]), static_cast<double>(g[i])));
        break;
      case ActGrad::abs: out[i] = v[i] > T(0) ? g[i] : (v[i] < T(0) ? -g[i] : T(0)); break;
      case ActGrad::erf:
        out[i] = from_d<T>(static_cast<double>(g[i]) * (kTwoOverSqrtPi * math::exp(-(static_cast<double>(v[i]) * static_cast<double>(v[i])))));
        break;
      case ActGrad::sin: out[i] = from_d<T>(static_cast<double>(g[i]) * math::cos(static_cast<double>(v[i]))); break;
      case ActGrad::cos: out[i] = from_d<T>(static_cast<double>(g[i]) * -math::sin(static_cast<double>(v[i]))); break;
      case ActGrad::reciprocal: out[i] = -(g[i] * (v[i] * v[i])); break;
      case ActGrad::tan: out[i] = g[i] * (T(1) + v[i] * v[i]); break;
      case ActGrad::softsign: {
        const T d = T(1) + std::fabs(v[i]);
        out[i] = g[i] / (d * d);
      } break;
      case ActGrad::silu: out[i] = from_d<T>(silu_grad_d(static_cast<double>(v[i]), static_cast<double>(g[i]))); break;
      case ActGrad::mish: out[i] = from_d<T>(mish_grad_d(static_cast<double>(v[i]), static_cast<double>(g[i]))); break;
      case ActGrad::hardswish: out[i] = hardswish_grad_one(v[i], g[i]); break;
      case ActGrad::count: break;
    }
    out[i] = canon(out[i]);
  }
}

// ---- activations with parameters (numerics.md §32) -------------------------------------------
inline double hardsigmoid_d(double x, double a, double b) {
  const double t = a * x + b;
  if (t != t) return t;
  return t > 0.0 ? (t < 1.0 ? t : 1.0) : 0.0;
}
template <class T>
T unary_p_one(UnaryP op, T x, double a, double b) {
  const double d = static_cast<double>(x);
  switch (op) {
    case UnaryP::leaky_relu: return x > T(0) ? x : x * static_cast<T>(a);
    case UnaryP::elu: return x > T(0) ? x : from_d<T>(a * math::expm1(d));
    case UnaryP::selu: return from_d<T>(x > T(0) ? b * d : b * (a * math::expm1(d)));
    case UnaryP::celu: return x > T(0) ? x : from_d<T>(a * math::expm1(d / a));
    case UnaryP::hardsigmoid: return from_d<T>(hardsigmoid_d(d, a, b));
    case UnaryP::thresholded_relu: return (d > a || x != x) ? x : T(0);
    case UnaryP::count: break;
  }
  return x;
}
template <class T>
T act_grad_p_one(UnaryP op, T x, T g, double a, double b) {
  const double d = static_cast<double>(x), gd = static_cast<double>(g);
  switch (op) {
    case UnaryP::leaky_relu: return x > T(0) ? g : g * static_cast<T>(a);
    case UnaryP::elu: return x > T(0) ? g : from_d<T>(gd * (a * math::exp(d)));
    case UnaryP::selu: return from_d<T>(x > T(0) ? gd * b : gd * (b * (a * math::exp(d))));
    case UnaryP::celu: return x > T(0) ? g : from_d<T>(gd * math::exp(d / a));
    case UnaryP::hardsigmoid: {
      const double t = a * d + b;
      return (t > 0.0 && t < 1.0) ? from_d<T>(gd * a) : T(0);
    }
    case UnaryP::thresholded_relu: return d > a ? g : T(0);
    case UnaryP::count: break;
  }
  return g;
}
template <class T>
void unary_p(UnaryP op, const T* x, T* y, std::int64_t n, double a, double b) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = canon(unary_p_one(op, x[i], a, b));
}
template <class T>
void act_grad_p(UnaryP op, const T* x, const T* g, T* out, std::int64_t n, double a, double b) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = canon(act_grad_p_one(op, x[i], g[i], a, b));
}

template <class T>
void sum_rows(const T* x, std::int64_t R, std::int64_t L, T* out) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* row = x + r * L;
    out[r] = canon(row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + row[i]; }));
  }
}

template <class T>
void sum_mid(const T* x, std::int64_t A, std::int64_t L, std::int64_t K, T* out) {
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t k = 0; k < K; ++k) {
      const T* col = x + a * L * K + k;
      out[a * K + k] = canon(row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + col[i * K]; }));
    }
}

template <class T>
void sumsq_rows(const T* a, const T* b, std::int64_t R, std::int64_t L, T* out) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* ra = a + r * L;
    const T* rb = b ? b + r * L : nullptr;
    out[r] = canon(row_rule<T>(L, [&](T& lane, std::int64_t i) {
      T d = rb ? ra[i] - rb[i] : ra[i];
      lane = std::fma(d, d, lane);
    }));
  }
}

template <class T>
void sum_cols(const T* x, std::int64_t R, std::int64_t C, T* out) {
  for (std::int64_t c = 0; c < C; ++c) out[c] = canon(batch_rule<T>(R, [&](std::int64_t r) { return x[r * C + c]; }));
}

// Row maximum over x + 0 (so -0 counts as +0); NaN if any element is NaN.
template <class T>
T row_max(const T* x, std::int64_t L) {
  T m = -std::numeric_limits<T>::infinity();
  bool nan = false;
  for (std::int64_t i = 0; i < L; ++i) {
    T v = x[i] + T(0);
    if (v != v) nan = true;
    if (v > m) m = v;
  }
  return nan ? std::numeric_limits<T>::quiet_NaN() : m;
}

// exp(x - m) with the difference taken in f64, rounded once to T
template <class T>
T exp_shifted(T x, T m) {
  return from_d<T>(math::exp(static_cast<double>(x) - static_cast<double>(m)));
}

template <class T>
void softmax_rows(const T* x, std::int64_t R, std::int64_t L, T* y) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * L;
    T* yr = y + r * L;
    const T m = row_max(xr, L);
    for (std::int64_t i = 0; i < L; ++i) yr[i] = exp_shifted(xr[i], m);
    const T s = row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + yr[i]; });
    for (std::int64_t i = 0; i < L; ++i) yr[i] = canon(yr[i] / s);
  }
}

template <class T>
void log_softmax_rows(const T* x, std::int64_t R, std::int64_t L, T* y) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * L;
    T* yr = y + r * L;
    const T m = row_max(xr, L);
    const T s = row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + exp_shifted(xr[i], m); });
    const double ls = math::log(static_cast<double>(s));
    for (std::int64_t i = 0; i < L; ++i)
      yr[i] = canon(from_d<T>((static_cast<double>(xr[i]) - static_cast<double>(m)) - ls));
  }
}

template <class T>
void softmax_grad_rows(const T* y, const T* gy, std::int64_t R, std::int64_t L, T* gx) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* yr = y + r * L;
    const T* gr = gy + r * L;
    const T dot = row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = std::fma(gr[i], yr[i], lane); });
    for (std::int64_t i = 0; i < L; ++i) gx[r * L + i] = canon(yr[i] * (gr[i] - dot));
  }
}

template <class T>
void log_softmax_grad_rows(const T* y, const T* gy, std::int64_t R, std::int64_t L, T* gx) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* yr = y + r * L;
    const T* gr = gy + r * L;
    const T sg = row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + gr[i]; });
    for (std::int64_t i = 0; i < L; ++i) gx[r * L + i] = canon(gr[i] - from_d<T>(math::exp(static_cast<double>(yr[i]))) * sg);
  }
}

template <class T>
void xent_rows(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T* loss) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * L;
    const T m = row_max(xr, L);
    const T s = row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + exp_shifted(xr[i], m); });
    const double ls = math::log(static_cast<double>(s));
    loss[r] = canon(from_d<T>(ls - (static_cast<double>(xr[t[r]]) - static_cast<double>(m))));
  }
}

template <class T>
void xent_grad_rows(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T scale, T* gx) {
  for (std::int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * L;
    T* gr = gx + r * L;
    const T m = row_max(xr, L);
    for (std::int64_t i = 0; i < L; ++i) gr[i] = exp_shifted(xr[i], m);
    const T s = row_rule<T>(L, [&](T& lane, std::int64_t i) { lane = lane + gr[i]; });
    for (std::int64_t i = 0; i < L; ++i) gr[i] = canon((gr[i] / s - (i == t[r] ? T(1) : T(0))) * scale);
  }
}

template <class T>
Table<T> make_table() {
  Table<T> tb{};
  tb.gemm = &gemm<T>;
  tb.gemm_samples = [](const GemmSamplesArgs<T>& a) { gemm_samples_stored(a, &gemm<T>, &sum_cols<T>); };
  tb.unary = &unary<T>;
  tb.binary = &binary<T>;
  tb.act_grad = &act_grad<T>;
  tb.unary_p = &unary_p<T>;
  tb.act_grad_p = &act_grad_p<T>;
  tb.gelu_keep = &gelu_keep<T>;
  tb.gelu_grad_kept = &gelu_grad_kept<T>;
  tb.lstm_gates = &lstm_gates<T>;
  tb.lstm_cell_grad = &lstm_cell_grad<T>;
  tb.gru_gates = &gru_gates<T>;
  tb.gru_grad = &gru_grad<T>;
  tb.lstm_hidden_grad = &lstm_hidden_grad<T>;
  tb.sum_rows = &sum_rows<T>;
  tb.sumsq_rows = &sumsq_rows<T>;
  tb.sum_cols = &sum_cols<T>;
  tb.sum_mid = &sum_mid<T>;
  tb.softmax_rows = &softmax_rows<T>;
  tb.log_softmax_rows = &log_softmax_rows<T>;
  tb.softmax_grad_rows = &softmax_grad_rows<T>;
  tb.log_softmax_grad_rows = &log_softmax_grad_rows<T>;
  tb.xent_rows = &xent_rows<T>;
  tb.xent_grad_rows = &xent_grad_rows<T>;
  add_nn_kernels(tb);
  tb.round_nearest = &round_nearest_ref<T>;
  return tb;
}

}  // namespace

const Table<float>& table_f32() {
  static const Table<float> t = make_table<float>();
  return t;
}
const Table<double>& table_f64() {
  static const Table<double> t = make_table<double>();
  return t;
}

}  // namespace bitgrad::kern::ref
