// Shared helpers for the tests: deterministic data, bitwise comparison, and the loops over
// code paths and thread counts that every determinism test runs.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"

// The statement throws a std::exception whose message contains `text`.
#define EXPECT_THROW_MSG(statement, text)                                                              \
  do {                                                                                               \
    try {                                                                                            \
      statement;                                                                                     \
      ADD_FAILURE() << #statement << " did not throw";                                               \
    } catch (const std::exception& e_) {                                                             \
      EXPECT_NE(std::string(e_.what()).find(text), std::string::npos) << "message: " << e_.what(); \
    }                                                                                                \
  } while (0)

namespace bitgrad::test {

inline const std::vector<int>& thread_counts() {
  static const std::vector<int> v = {1, 2, 3, 4, 7, 8};
  return v;
}

// Every code path this CPU has, the scalar reference first.
inline std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (cpu_supports(i)) v.push_back(i);
  return v;
}
inline std::vector<Isa> fast_isas() {
  std::vector<Isa> v;
  for (Isa i : {Isa::avx2, Isa::avx512})
    if (cpu_supports(i)) v.push_back(i);
  return v;
}
// Every device bitgrad has a backend for (the harnesses loop over them; CPU only today).
inline std::vector<Device> devices() { return {Device::cpu}; }
// Every fast code path of `d`, whether or not this machine has it: the harnesses compare those
// it has and name those it lacks (BITGRAD_SAY_COMPARED).
inline std::vector<Isa> all_fast_isas(Device d) {
  (void)d;
  return {Isa::avx2, Isa::avx512};
}
// Calls f(device, isa, threads) for every device, its code paths (the scalar reference too when
// `scalar`) and every thread count, each inside an execution context of its own; returns the
// code paths this CPU lacks (not called), for BITGRAD_SAY_COMPARED.
template <class F>
std::vector<Isa> for_each_context(bool scalar, F&& f) {
  std::vector<Isa> absent;
  for (Device d : devices()) {
    std::vector<Isa> paths;
    if (scalar) paths.push_back(Isa::scalar);
    for (Isa isa : all_fast_isas(d)) paths.push_back(isa);
    for (Isa isa : paths) {
      if (!cpu_supports(isa)) {
        absent.push_back(isa);
        continue;
      }
      for (int t : thread_counts()) {
        ExecContext ctx(t, isa);
        ExecScope scope(ctx);
        f(d, isa, t);
      }
    }
  }
  return absent;
}
// Says which code paths a harness compared when `absent` names some this CPU lacks (or that
// BITGRAD_HIDE_ISA hides): the test passes on what it compared, and says so in its output and
// as the test property code_paths_compared (ctest's log, gtest's XML). Every CPU in CI runs the
// scalar reference and AVX2 at least; AVX-512 where the CPU has it.
#define BITGRAD_SAY_COMPARED(absent, what)                                                            \
  do {                                                                                                 \
    if (!(absent).empty()) {                                                                           \
      std::string lacks_, has_;                                                                        \
      for (Isa i_ : (absent)) lacks_ += std::string(lacks_.empty() ? "" : ", ") + isa_name(i_);        \
      for (Isa i_ : {Isa::scalar, Isa::avx2, Isa::avx512})                                             \
        if (cpu_supports(i_)) has_ += std::string(has_.empty() ? "" : ", ") + isa_name(i_);            \
      ::testing::Test::RecordProperty("code_paths_compared", has_);                                    \
      std::printf("[ compared ] %s: the code paths this CPU has (%s); it lacks %s\n", std::string(what).c_str(), has_.c_str(), lacks_.c_str()); \
    }                                                                                                  \
  } while (0)

// Restores the code path and thread count when a test ends.
struct RuntimeGuard {
  Isa isa = active_isa();
  int threads = num_threads();
  ~RuntimeGuard() {
    set_isa(isa);
    set_num_threads(threads);
  }
};

// Values in [lo, hi) from a Philox stream; with `specials`, sprinkles zeros, -0, tiny and
// huge magnitudes so that sign-of-zero and subnormal handling is exercised.
template <class T>
std::vector<T> random_vec(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0, bool specials = false) {
  rng::Stream s(seed, "test");
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    double u = s.uniform_f64(i);
    v[i] = static_cast<T>(lo + (hi - lo) * u);
    if (specials) {
      std::uint64_t k = s.u64(i + n) % 61;
      if (k == 0) v[i] = T(0);
      if (k == 1) v[i] = T(-0.0);
      if (k == 2) v[i] = static_cast<T>(v[i] * T(1e-38));
      if (k == 3) v[i] = static_cast<T>(v[i] * T(1e30));
    }
  }
  return v;
}

// Index of the first element whose bits differ, or -1.
template <class T>
std::int64_t first_bit_difference(const T* a, const T* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (std::memcmp(a + i, b + i, sizeof(T)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

template <class T>
::testing::AssertionResult bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  std::int64_t i = first_bit_difference(a.data(), b.data(), a.size());
  if (i < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "first difference at element " << i << ": " << std::hexfloat
                                       << static_cast<double>(a[static_cast<std::size_t>(i)]) << " vs "
                                       << static_cast<double>(b[static_cast<std::size_t>(i)]) << std::defaultfloat;
}

}  // namespace bitgrad::test
