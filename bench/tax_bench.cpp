// The determinism tax: the same training step on bitgrad's canonical kernels and on the fastest
// non-canonical ones at hand, in one process, interleaved. Two sessions of one configuration
// train side by side in alternating blocks of 10 steps (which goes first alternates), so that
// drift on a shared machine hits both alike; the free session runs with a substitute f32
// kernel table (kernels.hpp, set only around its blocks) whose GEMM is OpenBLAS's or BLIS's
// cblas_sgemm (dlopen, their own threads set to --threads) in whatever order they sum, and
// whose batch-rule column sums are one plain pass over the rows. Everything else (elementwise,
// softmax, the row rule, which already is the fast order) is shared. Prints the median ms per
// step of each and their ratio: the price of the guarantee.
//   build/bin/tax_bench --config FILE [--threads N] [--steps N] [--blas openblas|blis]
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "kernels/kernels.hpp"

namespace {
using namespace bitgrad;

// CBLAS's codes (cblas.h), so that no BLAS header is needed
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
SgemmFn g_sgemm = nullptr;
const kern::Table<float>* g_canonical = nullptr;

// C = A B (+ bias) through the BLAS; layouts it cannot name go to the canonical GEMM
void free_gemm(const kern::GemmArgs<float>& g) {
  if (g.M == 0 || g.N == 0) return;
  int ta, tb;
  std::int64_t lda, ldb;
  if (g.csa == 1) ta = kNoTrans, lda = g.rsa;
  else if (g.rsa == 1) ta = kTrans, lda = g.csa;
  else return g_canonical->gemm(g);
  if (g.csb == 1) tb = kNoTrans, ldb = g.rsb;
  else if (g.rsb == 1) tb = kTrans, ldb = g.csb;
  else return g_canonical->gemm(g);
  if (g.K == 0) return g_canonical->gemm(g);
  // a leading dimension must cover a row even when there is one
  if (lda < (ta == kNoTrans ? g.K : g.M)) lda = ta == kNoTrans ? g.K : g.M;
  if (ldb < (tb == kNoTrans ? g.N : g.K)) ldb = tb == kNoTrans ? g.N : g.K;
  g_sgemm(kRowMajor, ta, tb, static_cast<int>(g.M), static_cast<int>(g.N), static_cast<int>(g.K), 1.0f, g.A, static_cast<int>(lda),
          g.B, static_cast<int>(ldb), 0.0f, g.C, static_cast<int>(g.ldc));
  if (g.bias)
    for (std::int64_t i = 0; i < g.M; ++i)
      for (std::int64_t j = 0; j < g.N; ++j) g.C[i * g.ldc + j] += g.bias[j];
}

// out[c] = sum over rows, one pass in row order (vectorised over the columns)
void free_sum_cols(const float* x, std::int64_t R, std::int64_t C, float* out) {
  for (std::int64_t c = 0; c < C; ++c) out[c] = 0.0f;
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) out[c] += x[r * C + c];
}

bool load_blas(const std::string& which, int threads) {
  const char* path = which == "openblas" ? "libopenblas.so.0" : "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4";
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "tax_bench: cannot load %s (%s); scripts/install-deps.sh installs it\n", path, dlerror());
    return false;
  }
  g_sgemm = reinterpret_cast<SgemmFn>(dlsym(h, "cblas_sgemm"));
  if (!g_sgemm) {
    std::fprintf(stderr, "tax_bench: %s has no cblas_sgemm\n", path);
    return false;
  }
  if (which == "openblas") {
    if (auto f = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) f(threads);
  } else if (auto f = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"))) {
    f(threads);
  }
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  std::string config, blas = "openblas";
  long steps = 300;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--config")) config = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--blas")) blas = argv[i + 1];
    else {
      std::fprintf(stderr, "tax_bench: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (config.empty() || (blas != "openblas" && blas != "blis")) {
    std::fprintf(stderr, "usage: tax_bench --config FILE [--threads N] [--steps N] [--blas openblas|blis]\n");
    return 2;
  }
  try {
    set_num_threads(threads);
    if (!load_blas(blas, threads)) return 2;
    g_canonical = &kern::table<float>(active_isa());
    kern::Table<float> free_table = *g_canonical;
    free_table.gemm = &free_gemm;
    free_table.sum_cols = &free_sum_cols;
    // the samples' weight gradients through the free GEMM and sum too
    free_table.gemm_samples = [](const kern::GemmSamplesArgs<float>& a) { kern::gemm_samples_stored(a, &free_gemm, &free_sum_cols); };

    const train::Config cfg = train::load_config(config);
    auto data = train::train_dataset(cfg);
    // no loader workers: the substitute table is switched on this thread between steps
    train::Session canonical(cfg, data, nullptr, 0), free_order(cfg, data, nullptr, 0);
    const long block = 10, warmup = 2;
    std::vector<double> ms_canon, ms_free;
    std::int64_t sc = 0, sf = 0;
    float loss_c = 0, loss_f = 0;  // the last losses: the free kernels really ran (they differ)
    for (long b = 0; b < warmup + steps / block; ++b) {
      for (int k = 0; k < 2; ++k) {
        const bool use_free = (b + k) % 2 == 1;  // alternate which goes first
        kern::set_substitute_f32(use_free ? &free_table : nullptr);
        const auto t0 = Clock::now();
        for (long i = 0; i < block; ++i) {
          if (use_free) loss_f = free_order.step(sf++).loss;
          else loss_c = canonical.step(sc++).loss;
        }
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / block;
        kern::set_substitute_f32(nullptr);
        if (b >= warmup) (use_free ? ms_free : ms_canon).push_back(ms);
      }
    }
    const double c = bench::median(ms_canon), f = bench::median(ms_free);
    std::printf("{\"config\": \"%s\", \"threads\": %d, \"isa\": \"%s\", \"blas\": \"%s\", \"steps\": %ld, \"canonical_ms\": %.4f, "
                "\"free_ms\": %.4f, \"tax\": %.4f, \"last_loss_canonical\": %.9g, \"last_loss_free\": %.9g}\n",
                cfg.file.substr(cfg.file.find_last_of('/') + 1).c_str(), threads, isa_name(active_isa()), blas.c_str(), steps, c, f, c / f,
                static_cast<double>(loss_c), static_cast<double>(loss_f));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tax_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
