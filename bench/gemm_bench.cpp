// GEMM throughput of bitgrad's canonical kernels, of OpenBLAS and of BLIS, on the square sizes,
// the shapes of a 784-512-512-10 MLP in the transposes a Linear layer uses, and the GEMMs of
// the LeNet-like CNN's convolutions.
// One library and one thread count per process (their thread pools must not compete):
//   BENCH_LIB=bitgrad|openblas|blis BENCH_THREADS=1|2 build/bin/gemm_bench --benchmark_format=json
// OpenBLAS (libopenblas.so.0) and BLIS (Debian's OpenMP build, libblis.so.4) are loaded with
// dlopen, so one binary measures both through their CBLAS interface.
// bench/run.sh alternates the processes and writes the table of docs/benchmarks.md.
#include <benchmark/benchmark.h>
#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"

namespace {

// CBLAS's row-major / transpose codes (cblas.h), so that no BLAS header is needed.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
SgemmFn g_sgemm = nullptr;

struct Shape {
  const char* name;
  long m, n, k;
  bool ta, tb;  // operand stored transposed
};

const Shape kShapes[] = {
    {"256^3", 256, 256, 256, false, false},
    {"512^3", 512, 512, 512, false, false},
    {"1024^3", 1024, 1024, 1024, false, false},
    {"2048^3", 2048, 2048, 2048, false, false},
    {"fwd_128x512x784_NT", 128, 512, 784, false, true},
    {"wgrad_784x512x128_TN", 784, 512, 128, true, false},
    {"fwd_128x10x512_NT", 128, 10, 512, false, true},
    {"dgrad_128x784x512_NN", 128, 784, 512, false, false},
    // fashion_cnn: the GEMMs its convolutions run — forward and input gradient over a block of
    // samples side by side (6 samples of conv1, 8 of conv2: src/ops/conv.cpp), the weight
    // gradient per sample on im2row's rows
    {"conv1_fwd_6x4704x25_NN", 6, 4704, 25, false, false},
    {"conv1_wgrad_6x25x784_NN", 6, 25, 784, false, false},
    {"conv2_fwd_16x800x150_NN", 16, 800, 150, false, false},
    {"conv2_wgrad_16x150x100_NN", 16, 150, 100, false, false},
    {"conv2_dgrad_150x800x16_TN", 150, 800, 16, true, false},
    // the same per sample, as bitgrad 0.1 ran them (wgrad on the cols, transposed)
    {"conv1_fwd_6x784x25_NN", 6, 784, 25, false, false},
    {"conv1_wgrad_6x25x784_NT", 6, 25, 784, false, true},
    {"conv2_fwd_16x100x150_NN", 16, 100, 150, false, false},
    {"conv2_wgrad_16x150x100_NT", 16, 150, 100, false, true},
    {"conv2_dgrad_150x100x16_TN", 150, 100, 16, true, false},
    // small outputs over long k (split-K at 2 threads): a decode step's MLP of the large GPT
    // (one token, 384 -> 1536 -> 384), and a long dot product per output
    {"decode_1x1536x384_NT", 1, 1536, 384, false, true},
    {"decode_1x384x1536_NT", 1, 384, 1536, false, true},
    {"splitk_16x64x16384_NN", 16, 64, 16384, false, false},
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
  g.C = C.data(), g.ldc = s.n;
  const auto& tb = bitgrad::kern::active<float>();
  for (auto _ : st) {
    if (ours) {
      tb.gemm(g);
    } else {
      g_sgemm(kRowMajor, s.ta ? kTrans : kNoTrans, s.tb ? kTrans : kNoTrans, static_cast<int>(s.m),
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
  if (which != "bitgrad" && which != "openblas" && which != "blis") {
    std::fprintf(stderr, "gemm_bench: BENCH_LIB must be bitgrad, openblas or blis\n");
    return 2;
  }
  bitgrad::set_num_threads(threads);
  if (which != "bitgrad") {
    const char* path = which == "openblas" ? "libopenblas.so.0" : "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4";
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "gemm_bench: cannot load %s (%s); scripts/install-deps.sh installs it\n", path, dlerror());
      return 2;
    }
    g_sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
    if (!g_sgemm) {
      std::fprintf(stderr, "gemm_bench: %s has no cblas_sgemm\n", path);
      return 2;
    }
    if (which == "openblas") {
      if (auto f = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) f(threads);
    } else if (auto f = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"))) {
      f(threads);
    }
  }
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
