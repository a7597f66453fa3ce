// GEMM throughput of bitgrad's canonical kernels and of OpenBLAS, on the square sizes and the
// shapes of a 784-512-512-10 MLP in the transposes a Linear layer uses.
// One library and one thread count per process (their thread pools must not compete):
//   BENCH_LIB=bitgrad|openblas BENCH_THREADS=1|2 build/bin/gemm_bench --benchmark_format=json
// bench/run.sh alternates the processes and writes the table of docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

using bitgrad::kern::KOrder;

struct Shape {
  const char* name;
  long m, n, k;
  bool ta, tb;  // operand stored transposed
  KOrder order;
};

const Shape kShapes[] = {
    {"256^3", 256, 256, 256, false, false, KOrder::chain},
    {"512^3", 512, 512, 512, false, false, KOrder::chain},
    {"1024^3", 1024, 1024, 1024, false, false, KOrder::chain},
    {"2048^3", 2048, 2048, 2048, false, false, KOrder::chain},
    {"fwd_128x512x784_NT", 128, 512, 784, false, true, KOrder::chain},
    {"wgrad_784x512x128_TN", 784, 512, 128, true, false, KOrder::batch_tree},
    {"fwd_128x10x512_NT", 128, 10, 512, false, true, KOrder::chain},
    {"dgrad_128x784x512_NN", 128, 784, 512, false, false, KOrder::chain},
};

std::vector<float> data(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  bitgrad::rng::Stream(seed, "bench").fill_uniform(v.data(), static_cast<std::int64_t>(n), 0, -1.0f, 1.0f);
  return v;
}

void run(benchmark::State& st, const Shape& s, bool ours) {
  auto A = data(static_cast<std::size_t>(s.m * s.k), 1), B = data(static_cast<std::size_t>(s.k * s.n), 2);
  std::vector<float> C(static_cast<std::size_t>(s.m * s.n));
  bitgrad::kern::GemmArgs<float> g;
  g.M = s.m, g.N = s.n, g.K = s.k;
  g.A = A.data(), g.rsa = s.ta ? 1 : s.k, g.csa = s.ta ? s.m : 1;
  g.B = B.data(), g.rsb = s.tb ? 1 : s.n, g.csb = s.tb ? s.k : 1;
  g.C = C.data(), g.ldc = s.n, g.order = s.order;
  const auto& tb = bitgrad::kern::active<float>();
  for (auto _ : st) {
    if (ours) {
      tb.gemm(g);
    } else {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
                  static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, A.data(), static_cast<int>(s.ta ? s.m : s.k), B.data(),
                  static_cast<int>(s.tb ? s.k : s.n), 0.0f, C.data(), static_cast<int>(s.n));
    }
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(s.m * s.n * s.k), benchmark::Counter::kIsIterationInvariantRate,
                                             benchmark::Counter::kIs1000);
}

}  // namespace

int main(int argc, char** argv) {
  const char* lib = std::getenv("BENCH_LIB");
  const char* thr = std::getenv("BENCH_THREADS");
  const std::string which = lib ? lib : "bitgrad";
  const int threads = thr ? std::atoi(thr) : 1;
  if (which != "bitgrad" && which != "openblas") {
    std::fprintf(stderr, "gemm_bench: BENCH_LIB must be bitgrad or openblas\n");
    return 2;
  }
  bitgrad::set_num_threads(threads);
  openblas_set_num_threads(threads);
  for (const Shape& s : kShapes) {
    const std::string name = which + "/" + s.name + "/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(name.c_str(), [s, which](benchmark::State& st) { run(st, s, which == "bitgrad"); })
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.3);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
