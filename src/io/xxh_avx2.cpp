#define XXH_NS xxh_avx2
#define XXH_TARGET BITGRAD_TARGET_AVX2
#define XXH_VECTOR 2  // XXH_AVX2: chosen here, since the target region defines no __AVX2__ under Clang
#include "io/xxh_impl.hpp"
