// GCC 12 warns inside its own AVX-512 intrinsics (PR 105593); nothing in this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define XXH_NS xxh_avx512
#define XXH_TARGET BITGRAD_TARGET_AVX512
#define XXH_VECTOR 3  // XXH_AVX512: chosen here, since the target region defines no __AVX512F__ under Clang
#include "io/xxh_impl.hpp"
