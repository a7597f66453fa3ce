// Elementwise kernels: fast paths equal the reference bit for bit (odd sizes, specials,
// threads 1..8).
#include <cmath>
#include <cstring>
#include <sstream>

#include "support/kernel_check.hpp"

namespace bitgrad::test {
namespace {

using kern::ActGrad;
using kern::Bcast;
using kern::Binary;
using kern::Unary;

const std::int64_t kSizes[] = {0, 1, 7, 33, 127, 129, 511, 785, 70001};

template <class T>
void unary_cases() {
  // every line of op_list.hpp (up to count: an appended op is compared too)
  for (int u = 0; u < kern::op_count<Unary>; ++u) {
    const Unary op = static_cast<Unary>(u);
    for (std::int64_t n : kSizes) {
      // a wide range so that every branch of the elementary functions is taken
      auto x = random_vec<T>(static_cast<std::size_t>(n), 100 + static_cast<std::uint64_t>(u), -30, 30, true);
      if (n > 10) {
        x[3] = T(1e6);
        x[4] = T(-3e7);
        x[5] = std::numeric_limits<T>::infinity();
        x[6] = std::numeric_limits<T>::quiet_NaN();
        x[7] = T(1e30);
      }
      std::ostringstream name;
      name << "unary(" << kern::op_name(op) << "," << tname(T{}) << ",n=" << n << ")";
      expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
        std::vector<T> y(static_cast<std::size_t>(n));
        tb.unary(op, x.data(), y.data(), n);
        return y;
      });
    }
  }
}

TEST(Elementwise, UnaryF32) { unary_cases<float>(); }
TEST(Elementwise, UnaryF64) { unary_cases<double>(); }

// The f32 exp of the fast paths decides its rounding from a cheaper approximation where its
// margin allows (math/mathfn_impl.hpp, exp_f32r), else from the f64 function; f32 sigmoid and
// tanh are formulas in f32 lanes (numerics §8) with the scalar one-lane instance as reference.
// Every 1021st f32 bit pattern (4.2M inputs: every range, NaNs and infinities), the f32 values
// near 1, where exp's margin is narrow for a whole binade, and the formulas' cuts (sigmoid's
// 104, where e^-|x| turns subnormal, tanh's 20). tools/fast_f32_check runs all 2^32 (make
// accuracy).
TEST(Elementwise, FastF32FunctionsHaveTheScalarBits) {
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 1021) {
    const auto bits = static_cast<std::uint32_t>(b);
    float v;
    std::memcpy(&v, &bits, 4);
    x.push_back(v);
  }
  for (float v = 0.99f; v < 1.01f; v = std::nextafter(v, 2.0f)) x.push_back(v);
  // around exp's +0 cut (x <= -104 is +0 on the fast path), and the infinities
  for (float v = -104.01f; v < -103.95f; v = std::nextafter(v, 0.0f)) x.push_back(v);
  for (float v : {-INFINITY, INFINITY, -1e30f, -150.0f, -104.0f}) x.push_back(v);
  // 64 f32 values each side of each cut, both signs
  for (float cut : {104.0f, 87.3f, 20.0f, 9.01f, 0.0f})
    for (float c : {cut, -cut}) {
      float up = c, down = c;
      for (int i = 0; i < 64; ++i) {
        x.push_back(up);
        x.push_back(down);
        up = std::nextafter(up, INFINITY);
        down = std::nextafter(down, -INFINITY);
      }
    }
  const auto n = static_cast<std::int64_t>(x.size());
  for (Unary op : {Unary::exp, Unary::sigmoid, Unary::tanh}) {
    expect_fast_equals_reference<float>(std::string("unary(") + kern::op_name(op) + ", sampled f32 bit patterns)", [&](const kern::Table<float>& tb) {
      std::vector<float> y(x.size());
      tb.unary(op, x.data(), y.data(), n);
      return y;
    });
  }
}

template <class T>
void binary_cases() {
  const char* bcn[] = {"same", "row", "col", "rrow", "rcol"};
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{0, 3}, {1, 1}, {3, 7}, {33, 17}, {5, 129}, {129, 600}};
  for (int o = 0; o < kern::op_count<Binary>; ++o) {
    for (int b = 0; b <= static_cast<int>(Bcast::rcol); ++b) {
      for (auto [outer, inner] : shapes) {
        const Binary op = static_cast<Binary>(o);
        const Bcast bc = static_cast<Bcast>(b);
        const std::size_t n = static_cast<std::size_t>(outer * inner);
        const std::size_t nb = bc == Bcast::same ? n : static_cast<std::size_t>(bc == Bcast::row || bc == Bcast::rrow ? inner : outer);
        auto a = random_vec<T>(n, 200 + static_cast<std::uint64_t>(o), -4, 4, true);
        auto bb = random_vec<T>(nb, 300 + static_cast<std::uint64_t>(b), -4, 4, true);
        std::ostringstream name;
        name << "binary(" << kern::op_name(static_cast<Binary>(o)) << "," << bcn[b] << "," << tname(T{}) << ",outer=" << outer << ",inner=" << inner << ")";
        expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
          std::vector<T> y(n);
          tb.binary(op, bc, a.data(), bb.data(), y.data(), outer, inner);
          return y;
        });
      }
    }
  }
}

TEST(Elementwise, BinaryF32) { binary_cases<float>(); }
TEST(Elementwise, BinaryF64) { binary_cases<double>(); }

template <class T>
void act_grad_cases() {
  for (int a = 0; a < kern::op_count<ActGrad>; ++a) {
    for (std::int64_t n : kSizes) {
      auto v = random_vec<T>(static_cast<std::size_t>(n), 400 + static_cast<std::uint64_t>(a), -8, 8, true);
      auto g = random_vec<T>(static_cast<std::size_t>(n), 500, -2, 2, true);
      if (n > 10) {  // beyond the thresholds of the elementary functions, and specials
        v[3] = T(25);
        v[4] = T(-25);
        v[5] = std::numeric_limits<T>::infinity();
        v[6] = -std::numeric_limits<T>::infinity();
        v[7] = std::numeric_limits<T>::quiet_NaN();
      }
      std::ostringstream name;
      name << "act_grad(" << kern::op_name(static_cast<ActGrad>(a)) << "," << tname(T{}) << ",n=" << n << ")";
      expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
        std::vector<T> y(static_cast<std::size_t>(n));
        tb.act_grad(static_cast<ActGrad>(a), v.data(), g.data(), y.data(), n);
        return y;
      });
    }
  }
}

TEST(Elementwise, ActivationGradF32) { act_grad_cases<float>(); }
TEST(Elementwise, ActivationGradF64) { act_grad_cases<double>(); }

// Activations with parameters (every BITGRAD_PARAM_OPS line, up to count): forward and backward,
// at the defaults and at other parameters (negative, tiny, large)
template <class T>
void param_cases() {
  const std::pair<double, double> params[] = {{0.0, 0.0}, {0.3, -0.25}, {-1.5, 2.0}, {1e-3, 7.0}};
  for (int u = 0; u < kern::op_count<kern::UnaryP>; ++u) {
    const kern::UnaryP op = static_cast<kern::UnaryP>(u);
    for (int k = 0; k < 4; ++k) {
      const double a = k == 0 ? kern::info(op).a : params[k].first, b = k == 0 ? kern::info(op).b : params[k].second;
      for (std::int64_t n : kSizes) {
        auto x = random_vec<T>(static_cast<std::size_t>(n), 700 + static_cast<std::uint64_t>(u), -30, 30, true);
        auto g = random_vec<T>(static_cast<std::size_t>(n), 701, -2, 2, true);
        if (n > 10) {
          x[3] = T(1e6);
          x[4] = T(-3e7);
          x[5] = std::numeric_limits<T>::infinity();
          x[6] = std::numeric_limits<T>::quiet_NaN();
          x[7] = -std::numeric_limits<T>::infinity();
          x[8] = T(-0.0);
        }
        std::ostringstream name;
        name << "unary_p(" << kern::op_name(op) << "," << a << "," << b << "," << tname(T{}) << ",n=" << n << ")";
        expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
          std::vector<T> y(static_cast<std::size_t>(n)), gx(static_cast<std::size_t>(n));
          tb.unary_p(op, x.data(), y.data(), n, a, b);
          tb.act_grad_p(op, x.data(), g.data(), gx.data(), n, a, b);
          y.insert(y.end(), gx.begin(), gx.end());
          return y;
        });
      }
    }
  }
}

TEST(Elementwise, ParamActivationF32) { param_cases<float>(); }
TEST(Elementwise, ParamActivationF64) { param_cases<double>(); }

// The GELU pair that keeps erf in f64: y and the backward have the bits of unary(gelu) and
// act_grad(gelu) on every table, and the kept e has the same bits on every path (it goes into
// the run's gradients).
template <class T>
void gelu_keep_cases() {
  for (std::int64_t n : kSizes) {
    auto x = random_vec<T>(static_cast<std::size_t>(n), 600, -8, 8, true);
    auto g = random_vec<T>(static_cast<std::size_t>(n), 601, -2, 2, true);
    if (n > 10) {
      x[3] = std::numeric_limits<T>::infinity();
      x[4] = -std::numeric_limits<T>::infinity();
      x[5] = std::numeric_limits<T>::quiet_NaN();
      x[6] = T(-0.0);
      x[7] = T(0.6);  // |x|/sqrt 2 below 0.84375: erf's small branch
    }
    const std::size_t un = static_cast<std::size_t>(n);
    std::ostringstream name;
    name << "gelu_keep(" << tname(T{}) << ",n=" << n << ")";
    expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> y(un), yu(un), gx(un), ga(un);
      std::vector<double> e(un);
      tb.gelu_keep(x.data(), y.data(), e.data(), n);
      tb.unary(Unary::gelu, x.data(), yu.data(), n);
      EXPECT_TRUE(bitwise_equal(y, yu)) << name.str() << ": gelu_keep differs from unary(gelu)";
      tb.gelu_grad_kept(x.data(), e.data(), g.data(), gx.data(), n);
      tb.act_grad(ActGrad::gelu, x.data(), g.data(), ga.data(), n);
      EXPECT_TRUE(bitwise_equal(gx, ga)) << name.str() << ": gelu_grad_kept differs from act_grad(gelu)";
      // y, then the backward, then e's bits as T words
      std::vector<T> out = y;
      out.insert(out.end(), gx.begin(), gx.end());
      std::vector<T> eb(un * sizeof(double) / sizeof(T));
      if (!e.empty()) std::memcpy(eb.data(), e.data(), un * sizeof(double));
      out.insert(out.end(), eb.begin(), eb.end());
      return out;
    });
  }
}

// erf's costlier branch is evaluated only on the values that take it, gathered per block of
// 256 (fast_impl.hpp, erf_in_place): arguments small but for a few big ones at every position
// of a block (its first and last, either side of 256), the bound 0.84375 and its neighbours,
// signed zeros, subnormals, infinities and NaN; erf, GELU, the kept GELU and GELU's gradient on
// every table
template <class T>
void erf_gather_cases() {
  const T bound = T(0.84375);
  const T specials[] = {bound, -bound, std::nextafter(bound, T(0)), std::nextafter(bound, T(2)), T(-0.0), T(0.0),
                        std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN(), T(5.9), T(6.0), T(-27.0), T(1.1932427), T(-1.1932428)};  // the last two: GELU's x / sqrt 2 at the bound
  for (std::int64_t n : {std::int64_t{255}, std::int64_t{256}, std::int64_t{257}, std::int64_t{771}, std::int64_t{4099}}) {
    for (int spacing : {1, 7, 97, 255, 256}) {
      auto x = random_vec<T>(static_cast<std::size_t>(n), 700 + static_cast<std::uint64_t>(spacing), -0.8, 0.8, true);
      std::size_t k = 0;
      for (std::int64_t i = 0; i < n; i += spacing) x[static_cast<std::size_t>(i)] = specials[k++ % std::size(specials)];
      x[static_cast<std::size_t>(n - 1)] = T(-3.5);  // a block's last value
      for (const Unary op : {Unary::erf, Unary::gelu}) {
        std::ostringstream name;
        name << "erf_gather(" << kern::op_name(op) << "," << tname(T{}) << ",n=" << n << ",every " << spacing << ")";
        expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
          std::vector<T> y(static_cast<std::size_t>(n));
          tb.unary(op, x.data(), y.data(), n);
          if (op == Unary::gelu) {
            std::vector<T> yk(static_cast<std::size_t>(n));
            std::vector<double> e(static_cast<std::size_t>(n));
            tb.gelu_keep(x.data(), yk.data(), e.data(), n);
            EXPECT_TRUE(bitwise_equal(y, yk)) << name.str() << ": gelu_keep differs from unary(gelu)";
            std::vector<T> g(static_cast<std::size_t>(n), T(0.75)), gx(static_cast<std::size_t>(n));
            tb.act_grad(ActGrad::gelu, x.data(), g.data(), gx.data(), n);  // erf gathered too
            y.insert(y.end(), gx.begin(), gx.end());
          }
          return y;
        });
      }
    }
  }
}

TEST(Elementwise, ErfGathersItsCostlyBranchWithTheReferencesBitsF32) { erf_gather_cases<float>(); }
TEST(Elementwise, ErfGathersItsCostlyBranchWithTheReferencesBitsF64) { erf_gather_cases<double>(); }

TEST(Elementwise, GeluKeepF32) { gelu_keep_cases<float>(); }
TEST(Elementwise, GeluKeepF64) { gelu_keep_cases<double>(); }

}  // namespace
}  // namespace bitgrad::test
