// The avx512 code path: the fast kernels instantiated with avx512 lanes, and the GEMM
// microkernels of this ISA with their block sizes (RegTile<T, MR, NR in vectors, KC, MC, NC>),
// handed to the GEMM frame. Every header is included first, for the baseline ISA; only the
// namespace bitgrad::kern::avx512 is compiled for avx512 (BITGRAD_ISA_BEGIN, math/isa_targets.hpp), so
// no inline function or template instance compiled for it can serve another code path.
#define BITGRAD_SIMD_LEVEL 2
// GCC 12's AVX-512 intrinsics use an uninitialised placeholder internally and warn about it
// where they are inlined (GCC PR 105593); the warning says nothing about this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "math/isa_prelude.hpp"

#include <immintrin.h>

#include "kernels/kernels.hpp"
#include "kernels/reference.hpp"
#include "kernels/thread_pool.hpp"

BITGRAD_ISA_BEGIN(BITGRAD_TARGET_AVX512)
namespace bitgrad::kern::avx512 {
#define ISA_NS avx512
#include "math/simd.hpp"
#include "math/tables.inc"
#include "math/mathfn_impl.hpp"
#include "kernels/pairwise_stack.hpp"
#include "kernels/fast_impl.hpp"
#include "kernels/fast_nn.hpp"
#include "kernels/gemm_ukernel.hpp"
#include "kernels/gemm_impl.hpp"
#undef ISA_NS

namespace {
// f32 rounded to bf16 / fp16 and widened back, 16 lanes at a time; the tail by the reference.
// fp16: vcvtps2ph with round-to-nearest-even (f16 subnormals kept, overflow to infinity, NaN
// quietened with its top 10 payload bits) and back — the reference's bits on all 2^32 patterns
// (tests/kernels/lowp_test.cpp, BITGRAD_EXHAUSTIVE=1). bf16: the reference's bit trick on the lanes.
void round_nearest_f32(Precision p, const float* x, float* y, std::int64_t n) {
  std::int64_t k = 0;
  if (p == kFp16) {
    for (; k + 16 <= n; k += 16) {
      const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm512_storeu_ps(y + k, _mm512_cvtph_ps(h));
    }
  } else if (p == kBf16) {
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000), hi = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m512i half = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x00400000);
    for (; k + 16 <= n; k += 16) {
      const __m512i b = _mm512_castps_si512(_mm512_loadu_ps(x + k));
      const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, abs), inf);
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), one);
      const __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(b, half), lsb), hi);
      const __m512i q = _mm512_or_si512(_mm512_and_si512(b, hi), quiet);
      _mm512_storeu_ps(y + k, _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, nan, q)));
    }
  }
  round_nearest_ref<float>(p, x + k, y + k, n - k);
}
}  // namespace

using TileF32 = RegTile<float, 6, 4, 384, 96, 2048>;
using TileF32Half = RegTile<float, 6, 2, 384, 96, 2048>;
using TileF32Narrow = RegTile<float, 12, 1, 384, 96, 2048>;
// 8 rows: a convolution's 8 or 16 output channels fill it (6 x 4 left a third of a tile empty)
using TileF32Eight = RegTile<float, 8, 3, 384, 96, 2048>;
// and 8 x 32: an attention's per-head [32, 32] x [32, 32] (6 x 32 left a third of a tile's rows
// empty in its last tile): 12% faster there (a throwaway timer, Zen 4)
using TileF32EightHalf = RegTile<float, 8, 2, 384, 96, 2048>;
using TileF64 = RegTile<double, 8, 3, 192, 96, 2048>;
void gemm_f32(const GemmArgs<float>& g) { gemm_multi<float, TileF32, TileF32Half, TileF32Narrow, TileF32Eight, TileF32EightHalf>(g); }
void gemm_f64(const GemmArgs<double>& g) { GemmFrame<TileF64>::run(g); }
void gemm_batch_f32(const GemmBatchArgs<float>& a) { gemm_batch_multi<float, TileF32, TileF32Half, TileF32Narrow, TileF32Eight, TileF32EightHalf>(a, &gemm_f32); }
void gemm_batch_f64(const GemmBatchArgs<double>& a) { gemm_batch_multi<double, TileF64>(a, &gemm_f64); }
GemmPacking packing_f32(std::int64_t M, std::int64_t N, std::int64_t K) {
  return gemm_multi_packing<float, TileF32, TileF32Half, TileF32Narrow, TileF32Eight, TileF32EightHalf>(M, N, K);
}
GemmPacking packing_f64(std::int64_t M, std::int64_t N, std::int64_t K) { return GemmFrame<TileF64>::packing(M, N, K); }
// a sample's product and its block's running sum side by side in the registers (K <= 32)
using SamplesF64 = RegTile<double, 6, 2, 192, 96, 2048>;
void gemm_samples_f32(const GemmSamplesArgs<float>& a) { GemmSamples<TileF32, TileF32Half>::run(a, &gemm_f32, &sum_cols_fast<float>); }
void gemm_samples_f64(const GemmSamplesArgs<double>& a) { GemmSamples<TileF64, SamplesF64>::run(a, &gemm_f64, &sum_cols_fast<double>); }

const Table<float>& table_f32() {
  static const Table<float> t = [] {
    Table<float> tb = isa_table<float>(ref::table_f32(), &gemm_f32, &packing_f32, &gemm_samples_f32, &gemm_batch_f32);
    tb.round_nearest = &round_nearest_f32;
    return tb;
  }();
  return t;
}

const Table<double>& table_f64() {
  static const Table<double> t = isa_table<double>(ref::table_f64(), &gemm_f64, &packing_f64, &gemm_samples_f64, &gemm_batch_f64);
  return t;
}

}  // namespace bitgrad::kern::avx512
BITGRAD_ISA_END
