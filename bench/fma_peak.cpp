// The machine's FMA peak per core (f32): independent accumulator chains (24 in the 32 zmm
// registers, 12 in the 16 ymm registers), enough to cover the FMA latency on two pipes, for AVX-512 and AVX2. The percentage-of-peak figures in
// docs/benchmarks.md divide by the AVX-512 figure measured here in the same run.
#include <benchmark/benchmark.h>
#include <immintrin.h>

namespace {

#define BITGRAD_PEAK_BODY(V, FMA, SET, LANES, CH)                                                                   \
  V a[CH];                                                                                                      \
  for (auto& x : a) x = SET(0.5f);                                                                              \
  const V b = SET(0.9999f), c = SET(0.0001f);                                                                   \
  for (auto _ : st) {                                                                                           \
    for (int r = 0; r < 64; ++r) {                                                                              \
      _Pragma("GCC unroll 24") for (int i = 0; i < (CH); ++i) a[i] = FMA(a[i], b, c);                             \
    }                                                                                                           \
    for (auto& x : a) benchmark::DoNotOptimize(x);                                                              \
  }                                                                                                             \
  st.counters["GFLOPS"] =                                                                                       \
      benchmark::Counter(64.0 * (CH) * (LANES)*2, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);

__attribute__((target("avx512f,fma"))) void peak_avx512(benchmark::State& st) {
  BITGRAD_PEAK_BODY(__m512, _mm512_fmadd_ps, _mm512_set1_ps, 16, 24)
}
__attribute__((target("avx2,fma"))) void peak_avx2(benchmark::State& st) { BITGRAD_PEAK_BODY(__m256, _mm256_fmadd_ps, _mm256_set1_ps, 8, 12) }

}  // namespace

int main(int argc, char** argv) {
  if (__builtin_cpu_supports("avx512f")) benchmark::RegisterBenchmark("fma_peak/avx512", peak_avx512)->MinTime(0.3);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) benchmark::RegisterBenchmark("fma_peak/avx2", peak_avx2)->MinTime(0.3);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
