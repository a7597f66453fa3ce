#define XXH_NS xxh_avx2
#include "io/xxh_impl.hpp"
