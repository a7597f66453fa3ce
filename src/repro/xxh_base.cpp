#define XXH_NS xxh_base
#include "repro/xxh_impl.hpp"
