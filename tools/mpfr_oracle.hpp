// Accuracy of bitgrad's elementary functions against MPFR (correctly rounded, 160-bit
// working precision). Shared by tools/mathfn_accuracy (10^7 inputs per function, the
// figures in docs/numerics.md) and tests/math/mathfn_accuracy_test.cpp (a CI-sized sample).
#pragma once

#include <mpfr.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bitgrad/math.hpp"

namespace bitgrad::tools {

enum class Fn { exp, expm1, log, log1p, tanh, sigmoid, erf, sin, cos, pow, sqrt, rsqrt, tan };

struct FnInfo {
  Fn fn;
  const char* name;
  bool binary;
};

inline const std::vector<FnInfo>& all_functions() {
  static const std::vector<FnInfo> v = {
      {Fn::exp, "exp", false},         {Fn::expm1, "expm1", false}, {Fn::log, "log", false},
      {Fn::log1p, "log1p", false},     {Fn::tanh, "tanh", false},   {Fn::sigmoid, "sigmoid", false},
      {Fn::erf, "erf", false},         {Fn::sin, "sin", false},     {Fn::cos, "cos", false},
      {Fn::pow, "pow", true},          {Fn::sqrt, "sqrt", false},   {Fn::rsqrt, "rsqrt", false},
      {Fn::tan, "tan", false}};
  return v;
}

// splitmix64: the tool's own input generator (not a bitgrad stream; any fixed sequence will do)
struct SplitMix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  double range(double a, double b) { return a + (b - a) * uniform(); }
};

class Oracle {
 public:
  Oracle() {
    mpfr_inits2(160, x_, y_, r_, t_, static_cast<mpfr_ptr>(nullptr));
  }
  ~Oracle() { mpfr_clears(x_, y_, r_, t_, static_cast<mpfr_ptr>(nullptr)); }
  Oracle(const Oracle&) = delete;
  Oracle& operator=(const Oracle&) = delete;

  // Exact value of fn at (a, b) rounded to 160 bits, into r_.
  void eval(Fn fn, double a, double b) {
    mpfr_set_d(x_, a, MPFR_RNDN);
    mpfr_set_d(y_, b, MPFR_RNDN);
    switch (fn) {
      case Fn::exp: mpfr_exp(r_, x_, MPFR_RNDN); break;
      case Fn::expm1: mpfr_expm1(r_, x_, MPFR_RNDN); break;
      case Fn::log: mpfr_log(r_, x_, MPFR_RNDN); break;
      case Fn::log1p: mpfr_log1p(r_, x_, MPFR_RNDN); break;
      case Fn::tanh: mpfr_tanh(r_, x_, MPFR_RNDN); break;
      case Fn::sigmoid:
        mpfr_neg(t_, x_, MPFR_RNDN);
        mpfr_exp(t_, t_, MPFR_RNDN);
        mpfr_add_ui(t_, t_, 1, MPFR_RNDN);
        mpfr_ui_div(r_, 1, t_, MPFR_RNDN);
        break;
      case Fn::erf: mpfr_erf(r_, x_, MPFR_RNDN); break;
      case Fn::sin: mpfr_sin(r_, x_, MPFR_RNDN); break;
      case Fn::cos: mpfr_cos(r_, x_, MPFR_RNDN); break;
      case Fn::tan: mpfr_tan(r_, x_, MPFR_RNDN); break;
      case Fn::pow: mpfr_pow(r_, x_, y_, MPFR_RNDN); break;
      case Fn::sqrt: mpfr_sqrt(r_, x_, MPFR_RNDN); break;
      case Fn::rsqrt:
        // IEEE 754 rSqrt(-0) = -inf (MPFR returns +inf); bitgrad follows IEEE
        if (a == 0 && std::signbit(a)) mpfr_set_inf(r_, -1);
        else mpfr_rec_sqrt(r_, x_, MPFR_RNDN);
        break;
    }
  }

  // Error of `got` in units of the last place of the correctly rounded result of type T.
  // Returns +inf when the classes differ (NaN vs number, wrong infinity, wrong zero sign).
  template <class T>
  double ulp_error(Fn fn, double a, double b, T got) {
    eval(fn, a, b);
    if (mpfr_nan_p(r_)) return std::isnan(got) ? 0.0 : INFINITY;
    if (std::isnan(got)) return INFINITY;
    constexpr int mant = std::numeric_limits<T>::digits;        // 53 or 24
    constexpr int emin = std::numeric_limits<T>::min_exponent;  // -1021 or -125
    T rounded = round_to<T>();
    if (std::isinf(rounded) || std::isinf(got)) {
      if (rounded == got) return 0.0;
      // an overflow within half an ulp of the largest finite value is a boundary case
      if (std::isinf(got) && !std::isinf(rounded)) return ulps_from(got == INFINITY ? std::numeric_limits<T>::max() : -std::numeric_limits<T>::max(), mant, emin) + 1.0;
      return INFINITY;
    }
    if (rounded == 0 && got == 0) return std::signbit(rounded) == std::signbit(got) ? 0.0 : INFINITY;
    return ulps_from(got, mant, emin);
  }

 private:
  template <class T>
  T round_to() {
    if constexpr (std::is_same_v<T, double>) {
      return mpfr_get_d(r_, MPFR_RNDN);
    } else {
      return mpfr_get_flt(r_, MPFR_RNDN);
    }
  }
  // |got - r_| / ulp(r_) where ulp is that of the format (subnormal spacing at the bottom)
  double ulps_from(double got, int mant, int emin) {
    mpfr_set_d(t_, got, MPFR_RNDN);
    mpfr_sub(t_, t_, r_, MPFR_RNDN);
    mpfr_abs(t_, t_, MPFR_RNDN);
    long e = mpfr_zero_p(r_) ? emin : mpfr_get_exp(r_);  // r = m 2^e, m in [1/2, 1)
    if (e < emin) e = emin;
    mpfr_mul_2si(t_, t_, -(e - mant), MPFR_RNDN);
    return mpfr_get_d(t_, MPFR_RNDN);
  }
  mpfr_t x_, y_, r_, t_;
};

// Inputs for fn: edge cases, then a mix of function-relevant ranges and raw bit patterns.
template <class T>
std::vector<std::pair<T, T>> make_inputs(Fn fn, std::size_t n, std::uint64_t seed) {
  std::vector<std::pair<T, T>> v;
  const T inf = std::numeric_limits<T>::infinity();
  const T edge[] = {T(0), T(-0.0), std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min(),
                    std::numeric_limits<T>::min(), -std::numeric_limits<T>::min(),
                    std::numeric_limits<T>::min() / T(3), std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(),
                    inf, -inf, std::numeric_limits<T>::quiet_NaN(), T(1), T(-1), T(0.5), T(2), T(-0.5),
                    T(1e-30), T(-1e-30), T(0.84375), T(6), T(-6), T(20), T(-20), T(709.78), T(-745.1), T(88.7), T(-103.9),
                    T(1e22), T(-1e22), T(1048576), T(3.14159265358979323846), T(1.5707963267948966)};
  for (T a : edge) {
    if (fn == Fn::pow) {
      for (T b : edge) v.emplace_back(a, b);
    } else {
      v.emplace_back(a, T(0));
    }
  }
  SplitMix g{seed};
  auto raw = [&]() -> T {
    if constexpr (std::is_same_v<T, double>) {
      return std::bit_cast<double>(g.next());
    } else {
      return std::bit_cast<float>(static_cast<std::uint32_t>(g.next()));
    }
  };
  auto logu = [&](double lo_exp, double hi_exp) {  // |x| log-uniform in [2^lo, 2^hi], random sign
    double e = g.range(lo_exp, hi_exp);
    double x = std::ldexp(1.0 + g.uniform(), static_cast<int>(std::floor(e)));
    return static_cast<T>((g.next() & 1) ? -x : x);
  };
  while (v.size() < n) {
    std::uint64_t kind = g.next() % 4;
    T a = T(0), b = T(0);
    if (kind == 0) {
      a = raw();
      b = raw();
    } else {
      switch (fn) {
        case Fn::exp: case Fn::expm1: case Fn::sigmoid:
          a = kind == 1 ? static_cast<T>(g.range(-750, 712)) : (kind == 2 ? static_cast<T>(g.range(-40, 40)) : logu(-60, 4));
          break;
        case Fn::log: case Fn::sqrt: case Fn::rsqrt:
          a = kind == 1 ? static_cast<T>(g.range(0.5, 2.0)) : std::abs(logu(-1074, 1024));
          break;
        case Fn::log1p:
          a = kind == 1 ? static_cast<T>(g.range(-1.0, 2.0)) : (kind == 2 ? logu(-60, 0) : std::abs(logu(-1074, 1024)));
          break;
        case Fn::tanh: case Fn::erf:
          a = kind == 1 ? static_cast<T>(g.range(-7, 7)) : logu(-60, 6);
          break;
        case Fn::sin: case Fn::cos: case Fn::tan:
          a = kind == 1 ? static_cast<T>(g.range(-10, 10)) : (kind == 2 ? static_cast<T>(g.range(-1e6, 1e6)) : logu(-40, 1024));
          break;
        case Fn::pow:
          if (kind == 1) {
            a = static_cast<T>(g.range(0, 10));
            b = static_cast<T>(g.range(-60, 60));
          } else if (kind == 2) {
            a = static_cast<T>(1.0 + std::ldexp(g.range(-1, 1), -static_cast<int>(g.next() % 40)));
            b = logu(0, 40);
          } else {
            a = logu(-1074, 1024);
            b = static_cast<T>(std::floor(g.range(-40, 40)));
          }
          break;
      }
    }
    v.emplace_back(a, b);
  }
  v.resize(n);
  return v;
}

template <class T>
T call(Fn fn, T a, T b) {
  namespace m = bitgrad::math;
  switch (fn) {
    case Fn::exp: return m::exp(a);
    case Fn::expm1: return m::expm1(a);
    case Fn::log: return m::log(a);
    case Fn::log1p: return m::log1p(a);
    case Fn::tanh: return m::tanh(a);
    case Fn::sigmoid: return m::sigmoid(a);
    case Fn::erf: return m::erf(a);
    case Fn::sin: return m::sin(a);
    case Fn::cos: return m::cos(a);
    case Fn::tan: return m::tan(a);
    case Fn::pow: return m::pow(a, b);
    case Fn::sqrt: return m::sqrt(a);
    case Fn::rsqrt: return m::rsqrt(a);
  }
  return a;
}

struct Accuracy {
  double max_ulp = 0;
  double worst_a = 0, worst_b = 0;
  std::size_t count = 0;
};

template <class T>
Accuracy measure(Fn fn, const std::vector<std::pair<T, T>>& inputs, std::size_t begin, std::size_t end) {
  Oracle o;
  Accuracy acc;
  for (std::size_t i = begin; i < end; ++i) {
    auto [a, b] = inputs[i];
    double e = o.ulp_error<T>(fn, a, b, call<T>(fn, a, b));
    ++acc.count;
    if (!(e <= acc.max_ulp)) {
      acc.max_ulp = e;
      acc.worst_a = a;
      acc.worst_b = b;
    }
  }
  return acc;
}

}  // namespace bitgrad::tools
