// XXH3-128 compiled for one instruction set (included by xxh_{base,avx2,avx512}.cpp with
// XXH_NS, and XXH_TARGET / XXH_VECTOR for a wider ISA, defined). The hash is the same on every
// path; only its speed differs. The headers xxhash.h needs come first, for the baseline ISA;
// xxhash.h itself (XXH_INLINE_ALL: static functions only) and the namespace are compiled for
// XXH_TARGET (math/isa_targets.hpp says why).
#include <assert.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "io/xxh_dispatch.hpp"
#include "math/isa_targets.hpp"

#ifdef XXH_TARGET
BITGRAD_ISA_BEGIN(XXH_TARGET)
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

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
#ifdef XXH_TARGET
BITGRAD_ISA_END
#endif
