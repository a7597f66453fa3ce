// GCC 12 warns inside its own AVX-512 intrinsics (PR 105593); nothing in this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define XXH_NS xxh_avx512
#include "io/xxh_impl.hpp"
