// Finite-difference gradient check in f64, the one harness every differentiable op's test
// goes through. With a random projection r of the output (Philox normal), the analytic
// vector-Jacobian product (backward with seed r) is compared, element by element, with
// central differences of sum(r * f(x)).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bitgrad/tensor.hpp"

namespace bitgrad {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-5;
  std::uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatch: input, element, analytic, numeric
  double max_abs_error = 0;
  std::int64_t checked = 0;  // number of input elements checked
};

// f64 inputs that require grad are checked; other inputs (e.g. i64 targets) pass through.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

}  // namespace bitgrad
