// libFuzzer entry point of the request parser of bitgrad serve (tests/fuzz/targets.hpp; `make fuzz`).
#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bitgrad::fuzz::serve_request(data, size);
  return 0;
}
