// XXH3-128 compiled for one instruction set (included by xxh_{base,avx2,avx512}.cpp with
// XXH_NS defined). The hash is the same on every path; only its speed differs.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "io/xxh_dispatch.hpp"

namespace bitgrad::io::XXH_NS {
static void reset(void* s) { XXH3_128bits_reset(static_cast<XXH3_state_t*>(s)); }
static void update(void* s, const void* p, std::size_t n) { XXH3_128bits_update(static_cast<XXH3_state_t*>(s), p, n); }
static void digest(const void* s, std::uint64_t* hi, std::uint64_t* lo) {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<const XXH3_state_t*>(s));
  *hi = h.high64;
  *lo = h.low64;
}
const HashImpl impl = {sizeof(XXH3_state_t), &reset, &update, &digest};
}  // namespace bitgrad::io::XXH_NS
