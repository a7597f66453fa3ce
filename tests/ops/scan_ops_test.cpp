// cumsum (src/ops/scan.cpp): gradients (f64 finite differences) over axes, exclusive and
// reverse; its determinism over threads and its documented order are in reduce_axes_ops_test.cpp.
#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(ScanOps, Gradients) {
  std::vector<OpCase> cases = {
      {"cumsum(axis=0)", {{7}}, [](V x) { return cumsum(x[0], 0); }},
      {"cumsum(axis=1)", {{3, 5, 2}}, [](V x) { return cumsum(x[0], 1); }},
      {"cumsum(axis=-1,exclusive)", {{3, 5}}, [](V x) { return cumsum(x[0], -1, true); }},
      {"cumsum(axis=0,reverse)", {{4, 3}}, [](V x) { return cumsum(x[0], 0, false, true); }},
      {"cumsum(axis=2,exclusive,reverse)", {{2, 3, 4}}, [](V x) { return cumsum(x[0], 2, true, true); }},
  };
  run_all_modes(cases);
}

}  // namespace
}  // namespace bitgrad::test
