// Standard headers needed before simd.hpp / *_impl.hpp are included inside an ISA
// namespace (they must not be included inside one, nor inside its BITGRAD_ISA_BEGIN region:
// math/isa_targets.hpp says why).
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
#include "math/isa_targets.hpp"
#include "math/mathfn.hpp"
