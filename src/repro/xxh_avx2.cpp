#define XXH_NS xxh_avx2
#include "repro/xxh_impl.hpp"
