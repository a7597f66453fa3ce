// libFuzzer entry point of the ONNX reader and importer (tests/fuzz/targets.hpp; `make fuzz`).
#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bitgrad::fuzz::onnx(data, size);
  return 0;
}
