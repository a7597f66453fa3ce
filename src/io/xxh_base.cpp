#define XXH_NS xxh_base
#include "io/xxh_impl.hpp"
