// libFuzzer entry point of the HTTP head parser of bitgrad serve (tests/fuzz/targets.hpp; `make fuzz`).
#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bitgrad::fuzz::http_head(data, size);
  return 0;
}
