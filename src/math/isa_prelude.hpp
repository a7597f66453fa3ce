// Standard headers needed before simd.hpp / *_impl.hpp are included inside an ISA
// namespace (they must not be included inside one).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include "math/mathfn.hpp"
