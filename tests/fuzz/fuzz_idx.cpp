// libFuzzer entry point of the idx reader (tests/fuzz/targets.hpp; `make fuzz`).
#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bitgrad::fuzz::idx(data, size);
  return 0;
}
