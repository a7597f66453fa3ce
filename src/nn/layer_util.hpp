// Helpers the layer files share: descriptions and the initialisation stream of a parameter.
#pragma once

#include <sstream>
#include <string>

#include "bitgrad/rng.hpp"

namespace bitgrad::nn::detail {

template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// Parameter `index` (registration order across the model) draws from (seed, "init").sub(index).
inline rng::Stream init_stream(std::uint64_t seed, std::uint64_t& index) { return rng::Stream(seed, "init").sub(index++); }

}  // namespace bitgrad::nn::detail
