// libFuzzer entry point of the structure-aware ONNX target: a model the bytes choose, loaded and
// trained one step (tests/fuzz/targets.hpp; `make fuzz`).
#include "fuzz/targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bitgrad::fuzz::onnx_model(data, size);
  return 0;
}
