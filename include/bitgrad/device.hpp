// Where a tensor's storage lives and its kernels run. CPU only today; a GPU backend plugs in
// behind the execution context (bitgrad/runtime.hpp; the plan: docs/gpu.md).
#pragma once

namespace bitgrad {

enum class Device { cpu };
const char* device_name(Device d);

}  // namespace bitgrad
