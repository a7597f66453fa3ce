// The instruction sets of the code paths, as the compilers' target strings: one place for the
// ISA files' regions (math/isa_prelude.hpp), the runtime's CPU check and the run manifest.
// No translation unit is compiled with -m flags: an ISA file includes every header first, with the
// baseline ISA, then opens BITGRAD_ISA_BEGIN(target) around its own namespace. So a template or
// inline function that a header defines (std::vector's, kernels.hpp's) is compiled for the
// baseline wherever it is instantiated, and the linker can keep any copy of it; only the
// functions of the ISA namespace (bitgrad::kern::avx2, ...) carry the wider instructions, and
// only the dispatch reaches them. scripts/isa_leak_check.sh checks the linked binaries for it.
#pragma once

#define BITGRAD_TARGET_AVX2 "avx2,fma"
#define BITGRAD_TARGET_AVX512 "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma"

#define BITGRAD_PRAGMA_(x) _Pragma(#x)
#if defined(__clang__)
#define BITGRAD_ISA_BEGIN(isa_) BITGRAD_PRAGMA_(clang attribute push(__attribute__((target(isa_))), apply_to = function))
#define BITGRAD_ISA_END BITGRAD_PRAGMA_(clang attribute pop)
#elif defined(__GNUC__)
#define BITGRAD_ISA_BEGIN(isa_) BITGRAD_PRAGMA_(GCC push_options) BITGRAD_PRAGMA_(GCC target(isa_))
#define BITGRAD_ISA_END BITGRAD_PRAGMA_(GCC pop_options)
#else
#error "bitgrad's code paths need GCC or Clang (target pragmas)"
#endif
