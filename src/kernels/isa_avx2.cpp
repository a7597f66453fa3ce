// The avx2 code path: the fast kernels instantiated with avx2 lanes, and the GEMM
// microkernels of this ISA with their block sizes (RegTile<T, MR, NR in vectors, KC, MC, NC>),
// handed to the GEMM frame. Every header is included first, for the baseline ISA; only the
// namespace bitgrad::kern::avx2 is compiled for avx2 (BITGRAD_ISA_BEGIN, math/isa_targets.hpp), so
// no inline function or template instance compiled for it can serve another code path.
#define BITGRAD_SIMD_LEVEL 1
#include "math/isa_prelude.hpp"

#include "kernels/kernels.hpp"
#include "kernels/reference.hpp"
#include "kernels/thread_pool.hpp"

BITGRAD_ISA_BEGIN(BITGRAD_TARGET_AVX2)
namespace bitgrad::kern::avx2 {
#define ISA_NS avx2
#include "math/simd.hpp"
#include "math/tables.inc"
#include "math/mathfn_impl.hpp"
#include "kernels/pairwise_stack.hpp"
#include "kernels/fast_impl.hpp"
#include "kernels/fast_nn.hpp"
#include "kernels/gemm_ukernel.hpp"
#include "kernels/gemm_impl.hpp"
#undef ISA_NS

using TileF32 = RegTile<float, 6, 2, 384, 72, 2048>;
using TileF32Narrow = RegTile<float, 12, 1, 384, 72, 2048>;
using TileF64 = RegTile<double, 4, 3, 256, 72, 2048>;
void gemm_f32(const GemmArgs<float>& g) { gemm_multi<float, TileF32, TileF32Narrow>(g); }
void gemm_f64(const GemmArgs<double>& g) { GemmFrame<TileF64>::run(g); }
void gemm_batch_f32(const GemmBatchArgs<float>& a) { gemm_batch_multi<float, TileF32, TileF32Narrow>(a, &gemm_f32); }
void gemm_batch_f64(const GemmBatchArgs<double>& a) { gemm_batch_multi<double, TileF64>(a, &gemm_f64); }
GemmPacking packing_f32(std::int64_t M, std::int64_t N, std::int64_t K) { return gemm_multi_packing<float, TileF32, TileF32Narrow>(M, N, K); }
GemmPacking packing_f64(std::int64_t M, std::int64_t N, std::int64_t K) { return GemmFrame<TileF64>::packing(M, N, K); }
// a sample's product and its block's running sum side by side in the 16 registers (K <= 32)
using SamplesF32 = RegTile<float, 3, 2, 384, 72, 2048>;
using SamplesF64 = RegTile<double, 3, 2, 256, 72, 2048>;
void gemm_samples_f32(const GemmSamplesArgs<float>& a) { GemmSamples<TileF32, SamplesF32>::run(a, &gemm_f32, &sum_cols_fast<float>); }
void gemm_samples_f64(const GemmSamplesArgs<double>& a) { GemmSamples<TileF64, SamplesF64>::run(a, &gemm_f64, &sum_cols_fast<double>); }

const Table<float>& table_f32() {
  static const Table<float> t = isa_table<float>(ref::table_f32(), &gemm_f32, &packing_f32, &gemm_samples_f32, &gemm_batch_f32);
  return t;
}

const Table<double>& table_f64() {
  static const Table<double> t = isa_table<double>(ref::table_f64(), &gemm_f64, &packing_f64, &gemm_samples_f64, &gemm_batch_f64);
  return t;
}

}  // namespace bitgrad::kern::avx2
BITGRAD_ISA_END
