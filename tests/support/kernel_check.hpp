// The determinism mode of the kernel harness: a case runs on the scalar reference once and
// on every backend's fast paths at threads 1, 2, 3, 4, 7, 8, each in an execution context of
// its own; all results must be bitwise equal. A code path the CPU lacks skips the test visibly.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {

template <class T, class Run>
void expect_fast_equals_reference(const std::string& name, Run run) {
  std::vector<T> want;
  {
    ExecContext ref(1, Isa::scalar);
    ExecScope s(ref);
    want = run(kern::table<T>(Isa::scalar));
  }
  const std::vector<Isa> absent = for_each_context(false, [&](Device d, Isa isa, int t) {
    const std::vector<T> got = run(kern::table<T>(isa));
    EXPECT_TRUE(bitwise_equal(want, got)) << name << " device=" << device_name(d) << " isa=" << isa_name(isa) << " threads=" << t;
  });
  BITGRAD_SAY_COMPARED(absent, name);
}

inline const char* tname(float) { return "f32"; }
inline const char* tname(double) { return "f64"; }

}  // namespace bitgrad::test
