// The avx512 code path: the fast kernels instantiated with avx512 lanes, and the GEMM
// microkernels of this ISA with their block sizes (RegTile<T, MR, NR in vectors, KC, MC, NC>),
// handed to the GEMM frame. Compiled with avx512 flags only in this file (see
// src/CMakeLists.txt); everything it includes lives in the namespace bitgrad::kern::avx512 so
// no inline function leaks to another code path.
#define BITGRAD_SIMD_LEVEL 2
// GCC 12's AVX-512 intrinsics use an uninitialised placeholder internally and warn about it
// where they are inlined (GCC PR 105593); the warning says nothing about this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "math/isa_prelude.hpp"

#include "kernels/kernels.hpp"
#include "kernels/reference.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad::kern::avx512 {
#define ISA_NS avx512
#include "math/simd.hpp"
#include "math/tables.inc"
#include "math/mathfn_impl.hpp"
#include "kernels/fast_impl.hpp"
#include "kernels/fast_nn.hpp"
#include "kernels/gemm_ukernel.hpp"
#include "kernels/gemm_impl.hpp"
#undef ISA_NS

const Table<float>& table_f32() {
  static const Table<float> t = [] {
    Table<float> tb = fast_nn_table<float>(fast_table<float>(ref::table_f32()));
    tb.gemm = &gemm_multi<float, RegTile<float, 6, 4, 384, 96, 2048>, RegTile<float, 6, 2, 384, 96, 2048>,
                         RegTile<float, 12, 1, 384, 96, 2048>>;
    return tb;
  }();
  return t;
}

const Table<double>& table_f64() {
  static const Table<double> t = [] {
    Table<double> tb = fast_nn_table<double>(fast_table<double>(ref::table_f64()));
    tb.gemm = &GemmFrame<RegTile<double, 8, 3, 192, 96, 2048>>::run;
    return tb;
  }();
  return t;
}

}  // namespace bitgrad::kern::avx512
