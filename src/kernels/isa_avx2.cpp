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

void gemm_f32(const GemmArgs<float>& g) { gemm_multi<float, RegTile<float, 6, 2, 384, 72, 2048>, RegTile<float, 12, 1, 384, 72, 2048>>(g); }
void gemm_f64(const GemmArgs<double>& g) { GemmFrame<RegTile<double, 4, 3, 256, 72, 2048>>::run(g); }
void gemm_samples_f32(const GemmSamplesArgs<float>& a) { GemmSamples<RegTile<float, 6, 2, 384, 72, 2048>>::run(a, &gemm_f32, &sum_cols_fast<float>); }
void gemm_samples_f64(const GemmSamplesArgs<double>& a) { GemmSamples<RegTile<double, 4, 3, 256, 72, 2048>>::run(a, &gemm_f64, &sum_cols_fast<double>); }

const Table<float>& table_f32() {
  static const Table<float> t = isa_table<float>(ref::table_f32(), &gemm_f32, &gemm_samples_f32);
  return t;
}

const Table<double>& table_f64() {
  static const Table<double> t = isa_table<double>(ref::table_f64(), &gemm_f64, &gemm_samples_f64);
  return t;
}

}  // namespace bitgrad::kern::avx2
BITGRAD_ISA_END
