// The determinism mode of the kernel harness: a case runs on the scalar reference once and
// on every fast path at threads 1, 2, 3, 4, 7, 8; all results must be bitwise equal.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernels.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {

template <class T, class Run>
void expect_fast_equals_reference(const std::string& name, Run run) {
  RuntimeGuard guard;
  set_num_threads(1);
  const std::vector<T> want = run(kern::table<T>(Isa::scalar));
  for (Isa isa : fast_isas()) {
    for (int t : thread_counts()) {
      set_num_threads(t);
      const std::vector<T> got = run(kern::table<T>(isa));
      EXPECT_TRUE(bitwise_equal(want, got)) << name << " isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

inline const char* tname(float) { return "f32"; }
inline const char* tname(double) { return "f64"; }

}  // namespace bitgrad::test
