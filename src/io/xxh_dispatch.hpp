// The XXH3 implementation for this CPU (internal).
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitgrad::io {
struct HashImpl {
  std::size_t state_size;
  void (*reset)(void*);
  void (*update)(void*, const void*, std::size_t);
  void (*digest)(const void*, std::uint64_t*, std::uint64_t*);
};
const HashImpl& hash_impl();
namespace xxh_base { extern const HashImpl impl; }
namespace xxh_avx2 { extern const HashImpl impl; }
namespace xxh_avx512 { extern const HashImpl impl; }
}  // namespace bitgrad::io
