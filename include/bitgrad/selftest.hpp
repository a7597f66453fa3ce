// The selftest: a fixed 3-layer MLP on Philox data, one forward and backward pass, and the
// fingerprint of its gradients. The same on every thread count, code path and build.
#pragma once

#include <string>
#include <vector>

#include "bitgrad/fingerprint.hpp"

namespace bitgrad {

struct SelftestResult {
  std::string model;   // description of the network and data
  double loss = 0;
  std::vector<std::pair<std::string, Digest128>> gradients;  // per parameter, in order
  Digest128 fingerprint;  // of all gradients, in parameter order
};

SelftestResult run_selftest();

}  // namespace bitgrad
