#include "io/xxh_dispatch.hpp"

#include "bitgrad/runtime.hpp"

namespace bitgrad::io {
const HashImpl& hash_impl() {
  static const HashImpl& h = cpu_supports(Isa::avx512) ? xxh_avx512::impl : (cpu_supports(Isa::avx2) ? xxh_avx2::impl : xxh_base::impl);
  return h;
}
}  // namespace bitgrad::io
