// Probe for docs/gpu.md: does bitgrad's canonical f32 order run on a GPU, bit for bit, and at
// what cost against cuBLAS? Kept out of the CMake build (bench/gpu/run.sh builds and runs it).
//
// 1. GEMM, order "chain" (docs/numerics.md §5): every C[i,j] is one fma chain
//    c = +0; c = fma(A[i,k], B[k,j], c) for k = 0..K-1, then c = c + bias[j]; NaN results stored
//    as the canonical quiet NaN. The CUDA kernel tiles i and j through shared memory and carries
//    each output's chain in a register across the k-tiles (no split-K, no padding of the k tail:
//    fma(0, 0, -0) would turn a -0 chain into +0). Two tile shapes are run: they must agree with
//    each other and with a plain CPU loop (std::fma, -ffp-contract=off) bit for bit.
// 2. The batch rule (§3): per column, blocks of 32 rows, each a chain acc = +0; acc = acc + x,
//    block results combined by the streaming pairwise tree (§2). The kernel combines the blocks
//    level by level (adjacent pairs, an odd last one carried up), which is the same tree; each
//    thread block holds an aligned run of 32 blocks (a complete subtree), and the partials of the
//    thread blocks are combined by the same tree in further passes. Compared bit for bit with a
//    transcription of kern::PairwiseStack (src/kernels/kernels.hpp).
// 3. The row rule (§4): one half-warp per 1024-element block, thread j of it logical lane j, the
//    lanes folded by a fixed shuffle pattern (offsets 8, 4, 2, 1); plain sums and the fma dot
//    variant, including rows whose lanes all hold -0 (a short last group must not be padded).
//    Compared bit for bit with a transcription of kern::row_rule (src/kernels/row_rule.hpp).
// 4. Timings: median of REPS runs (cudaEvent), against cuBLAS sgemm with CUBLAS_DEFAULT_MATH and
//    CUBLAS_PEDANTIC_MATH (no TF32), plus TF32 tensor cores for information only (not canonical),
//    and the column and row sums against cublasSgemv with a vector of ones.
//
// Inputs come from an integer hash (splitmix64 of seed and index), never from a library RNG.
// Exit status: 0 when every comparison that must be bitwise equal is, 1 otherwise, 2 on a CUDA
// or cuBLAS error.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#define CUDA_OK(x)                                                                              \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)
#define CUBLAS_OK(x)                                                                        \
  do {                                                                                      \
    cublasStatus_t s_ = (x);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
      std::fprintf(stderr, "%s:%d: %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, (int)s_); \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)

namespace {

int g_reps = 10;  // timed runs per measurement (REPS)

// ---- deterministic inputs -------------------------------------------------------------------
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// a float in [-1, 1) with 24 significant bits: exact, so the input bits are the same everywhere
float hash_unit(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t h = splitmix64(seed * 0x100000001b3ull ^ splitmix64(i));
  return static_cast<float>(static_cast<std::int64_t>(h >> 40) - (1ll << 23)) * 0x1p-23f;
}
// the same times 2^e with e in [-12, 12]: magnitudes that make the summation order matter
float hash_wide(std::uint64_t seed, std::uint64_t i) {
  const std::uint64_t h = splitmix64(seed ^ splitmix64(i + 0x5bd1e995ull));
  return std::ldexp(hash_unit(seed + 1, i), static_cast<int>(h % 25) - 12);
}
std::uint32_t bits(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
float canon_host(float v) { return v == v ? v : std::numeric_limits<float>::quiet_NaN(); }

// ---- the canonical GEMM on the GPU ----------------------------------------------------------
__device__ __forceinline__ float canon_dev(float v) { return v == v ? v : __int_as_float(0x7FC00000); }

// C[M,N] = A[M,K] B[K,N] (+ bias[N]), all row-major. Thread block: a BM x BN tile of C; thread:
// a TM x TN sub-tile whose chains it carries in registers over every k-tile in increasing k.
template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
    gemm_chain(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B,
               const float* __restrict__ bias, float* __restrict__ C) {
  constexpr int NT = (BM / TM) * (BN / TN);
  __shared__ float As[BK][BM];  // k-major, so a thread reads its TM rows of one k together
  __shared__ float Bs[BK][BN];
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int i0 = blockIdx.y * BM, j0 = blockIdx.x * BN;
  float c[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r)
#pragma unroll
    for (int s = 0; s < TN; ++s) c[r][s] = 0.0f;  // +0

  for (int k0 = 0; k0 < K; k0 += BK) {
    // rows/columns outside C load 0: their outputs are never stored; k past K is never used
#pragma unroll
    for (int idx = tid; idx < BM * BK; idx += NT) {
      const int r = idx / BK, kk = idx % BK, gi = i0 + r, gk = k0 + kk;
      As[kk][r] = (gi < M && gk < K) ? A[(long long)gi * K + gk] : 0.0f;
    }
#pragma unroll
    for (int idx = tid; idx < BK * BN; idx += NT) {
      const int kk = idx / BN, s = idx % BN, gk = k0 + kk, gj = j0 + s;
      Bs[kk][s] = (gk < K && gj < N) ? B[(long long)gk * N + gj] : 0.0f;
    }
    __syncthreads();
    float a[TM], b[TN];
    if (k0 + BK <= K) {
#pragma unroll
      for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
        for (int r = 0; r < TM; ++r) a[r] = As[kk][ty * TM + r];
#pragma unroll
        for (int s = 0; s < TN; ++s) b[s] = Bs[kk][tx * TN + s];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
          for (int s = 0; s < TN; ++s) c[r][s] = __fmaf_rn(a[r], b[s], c[r][s]);
      }
    } else {  // the k tail: only the k < K terms enter the chain
      for (int kk = 0; kk < K - k0; ++kk) {
#pragma unroll
        for (int r = 0; r < TM; ++r) a[r] = As[kk][ty * TM + r];
#pragma unroll
        for (int s = 0; s < TN; ++s) b[s] = Bs[kk][tx * TN + s];
#pragma unroll
        for (int r = 0; r < TM; ++r)
#pragma unroll
          for (int s = 0; s < TN; ++s) c[r][s] = __fmaf_rn(a[r], b[s], c[r][s]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int i = i0 + ty * TM + r;
    if (i >= M) continue;
#pragma unroll
    for (int s = 0; s < TN; ++s) {
      const int j = j0 + tx * TN + s;
      if (j >= N) continue;
      float v = c[r][s];
      if (bias) v = __fadd_rn(v, bias[j]);
      C[(long long)i * N + j] = canon_dev(v);
    }
  }
}

enum class Tile { big, small };  // 128x128 (8x8 a thread) or 64x64 (4x4 a thread)

void launch_gemm(Tile t, int M, int N, int K, const float* A, const float* B, const float* bias, float* C) {
  if (t == Tile::big) {
    dim3 grid((N + 127) / 128, (M + 127) / 128);
    gemm_chain<128, 128, 8, 8, 8><<<grid, 256>>>(M, N, K, A, B, bias, C);
  } else {
    dim3 grid((N + 63) / 64, (M + 63) / 64);
    gemm_chain<64, 64, 8, 4, 4><<<grid, 256>>>(M, N, K, A, B, bias, C);
  }
  CUDA_OK(cudaGetLastError());
}

// ---- the canonical GEMM on the CPU: the loop of reference.cpp, in i, k, j order -----------------
// (for each output the k order is the chain's; i-k-j only lets the compiler vectorise over j)
void cpu_gemm_rows(int M0, int M1, int N, int K, const float* A, const float* B, const float* bias, float* C) {
  std::vector<float> acc(N);
  for (int i = M0; i < M1; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int k = 0; k < K; ++k) {
      const float a = A[(long long)i * K + k];
      const float* b = B + (long long)k * N;
      for (int j = 0; j < N; ++j) acc[j] = std::fma(a, b[j], acc[j]);
    }
    for (int j = 0; j < N; ++j) C[(long long)i * N + j] = canon_host(bias ? acc[j] + bias[j] : acc[j]);
  }
}
// the same products summed with k descending: another order, to show the comparison can see one
void cpu_gemm_rows_reversed(int M0, int M1, int N, int K, const float* A, const float* B, const float* bias,
                            float* C) {
  std::vector<float> acc(N);
  for (int i = M0; i < M1; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int k = K - 1; k >= 0; --k) {
      const float a = A[(long long)i * K + k];
      const float* b = B + (long long)k * N;
      for (int j = 0; j < N; ++j) acc[j] = std::fma(a, b[j], acc[j]);
    }
    for (int j = 0; j < N; ++j) C[(long long)i * N + j] = canon_host(bias ? acc[j] + bias[j] : acc[j]);
  }
}

long long count_diff(const float* x, const float* y, long long n) {
  long long d = 0;
  for (long long i = 0; i < n; ++i) d += bits(x[i]) != bits(y[i]);
  return d;
}

template <class F>
double median_ms(F run) {
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  run();
  run();  // warm-up
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < g_reps; ++r) {
    CUDA_OK(cudaEventRecord(e0));
    run();
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float t = 0;
    CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  return n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

// row-major C = A B through column-major cuBLAS: C^T = B^T A^T
void cublas_gemm(cublasHandle_t h, int M, int N, int K, const float* A, const float* B, float* C) {
  const float one = 1.0f, zero = 0.0f;
  CUBLAS_OK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C, N));
}

struct GemmShape {
  int M, N, K;
  bool cpu_full;  // false: the CPU checks the first and last 8 rows only
  const char* note;
};

bool run_gemm(cublasHandle_t h) {
  const GemmShape shapes[] = {
      {1, 1, 1, true, ""},
      {7, 13, 5, true, ""},
      {33, 65, 129, true, ""},
      {127, 255, 511, true, ""},
      {1000, 1000, 1000, true, ""},
      {4096, 4096, 4096, false, ""},
      {8192, 3072, 768, false, "GPT-2 small fc, 8192 tokens"},
      {8192, 768, 3072, false, "GPT-2 small proj, 8192 tokens"},
      {128, 512, 784, true, "fashion_mlp first layer, batch 128"},
      {128, 10, 512, true, "fashion_mlp last layer: one output tile"},
  };
  bool ok = true;
  std::printf("\n== GEMM, order chain (numerics.md §5), f32, row-major, REPS=%d ==\n", g_reps);
  std::printf("diff columns count elements whose bits differ (must be 0 for cpu and tiles)\n");
  std::printf("%-22s %11s %8s %6s | %9s %9s %9s %9s %9s | %7s %7s | %s\n", "M x N x K", "cpu rows", "cpu diff",
              "tiles", "canon128", "canon64", "cublas", "pedantic", "tf32*", "best/cb", "best/pd", "cublas bits vs canon");
  std::printf("%-22s %11s %8s %6s | %9s %9s %9s %9s %9s | %7s %7s |\n", "", "checked", "", "diff", "GFLOP/s", "GFLOP/s",
              "GFLOP/s", "GFLOP/s", "GFLOP/s", "", "");
  for (const GemmShape& s : shapes) {
    const long long nA = (long long)s.M * s.K, nB = (long long)s.K * s.N, nC = (long long)s.M * s.N;
    std::vector<float> A(nA), B(nB), bias(s.N);
    for (long long i = 0; i < nA; ++i) A[i] = hash_unit(1, i);
    for (long long i = 0; i < nB; ++i) B[i] = hash_unit(2, i);
    for (int j = 0; j < s.N; ++j) bias[j] = hash_unit(3, j);
    float *dA, *dB, *dbias, *dC, *dC2;
    CUDA_OK(cudaMalloc(&dA, nA * 4));
    CUDA_OK(cudaMalloc(&dB, nB * 4));
    CUDA_OK(cudaMalloc(&dbias, s.N * 4));
    CUDA_OK(cudaMalloc(&dC, nC * 4));
    CUDA_OK(cudaMalloc(&dC2, nC * 4));
    CUDA_OK(cudaMemcpy(dA, A.data(), nA * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dB, B.data(), nB * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dbias, bias.data(), s.N * 4, cudaMemcpyHostToDevice));

    // correctness, with the bias: both tiles against each other and against the CPU
    std::vector<float> big(nC), small(nC), cpu(nC);
    launch_gemm(Tile::big, s.M, s.N, s.K, dA, dB, dbias, dC);
    launch_gemm(Tile::small, s.M, s.N, s.K, dA, dB, dbias, dC2);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(big.data(), dC, nC * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(small.data(), dC2, nC * 4, cudaMemcpyDeviceToHost));
    const long long tile_diff = count_diff(big.data(), small.data(), nC);
    long long cpu_diff = 0, rows_checked = 0;
    auto check_rows = [&](int r0, int r1) {
      cpu_gemm_rows(r0, r1, s.N, s.K, A.data(), B.data(), bias.data(), cpu.data());
      const long long off = (long long)r0 * s.N, n = (long long)(r1 - r0) * s.N;
      cpu_diff += count_diff(cpu.data() + off, big.data() + off, n);
      rows_checked += r1 - r0;
    };
    if (s.cpu_full || s.M <= 16) {
      check_rows(0, s.M);
    } else {
      check_rows(0, 8);
      check_rows(s.M - 8, s.M);
    }
    if (tile_diff != 0 || cpu_diff != 0) ok = false;

    // timings without the bias (cuBLAS has none; one addition an output either way)
    const double flop = 2.0 * s.M * s.N * s.K;
    auto gflops = [&](double ms) { return flop / (ms * 1e-3) / 1e9; };
    const double t_big = median_ms([&] { launch_gemm(Tile::big, s.M, s.N, s.K, dA, dB, nullptr, dC); });
    const double t_small = median_ms([&] { launch_gemm(Tile::small, s.M, s.N, s.K, dA, dB, nullptr, dC2); });
    std::vector<float> canon_nobias(nC), cb(nC);
    CUDA_OK(cudaMemcpy(canon_nobias.data(), dC, nC * 4, cudaMemcpyDeviceToHost));
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const double t_cb = median_ms([&] { cublas_gemm(h, s.M, s.N, s.K, dA, dB, dC2); });
    CUDA_OK(cudaMemcpy(cb.data(), dC2, nC * 4, cudaMemcpyDeviceToHost));
    const long long cb_diff = count_diff(cb.data(), canon_nobias.data(), nC);
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
    const double t_pd = median_ms([&] { cublas_gemm(h, s.M, s.N, s.K, dA, dB, dC2); });
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH));
    const double t_tf = median_ms([&] { cublas_gemm(h, s.M, s.N, s.K, dA, dB, dC2); });
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));

    const double best = std::min(t_big, t_small);
    char shape[64];
    std::snprintf(shape, sizeof shape, "%dx%dx%d", s.M, s.N, s.K);
    std::printf("%-22s %5lld/%-5d %8lld %6lld | %9.1f %9.1f %9.1f %9.1f %9.1f | %7.2f %7.2f | %lld of %lld%s%s\n", shape,
                rows_checked, s.M, cpu_diff, tile_diff, gflops(t_big), gflops(t_small), gflops(t_cb), gflops(t_pd),
                gflops(t_tf), t_cb / best, t_pd / best, cb_diff, nC, s.note[0] ? "  " : "", s.note);
    CUDA_OK(cudaFree(dA));
    CUDA_OK(cudaFree(dB));
    CUDA_OK(cudaFree(dbias));
    CUDA_OK(cudaFree(dC));
    CUDA_OK(cudaFree(dC2));
  }
  std::printf("best/cb, best/pd: time of cuBLAS (default math, pedantic math) / time of the faster canonical tile;\n"
              "  below 1 means cuBLAS is faster. tf32*: TF32 tensor cores, not canonical, for information.\n");

  // the check can see an order: the same products with k descending
  {
    const int M = 127, N = 255, K = 511;
    std::vector<float> A((long long)M * K), B((long long)K * N), x((long long)M * N), y((long long)M * N);
    for (std::size_t i = 0; i < A.size(); ++i) A[i] = hash_unit(1, i);
    for (std::size_t i = 0; i < B.size(); ++i) B[i] = hash_unit(2, i);
    cpu_gemm_rows(0, M, N, K, A.data(), B.data(), nullptr, x.data());
    cpu_gemm_rows_reversed(0, M, N, K, A.data(), B.data(), nullptr, y.data());
    std::printf("control: 127x255x511 with k descending differs from the chain in %lld of %lld elements\n",
                count_diff(x.data(), y.data(), (long long)M * N), (long long)M * N);
  }
  return ok;
}

// ---- the batch rule: column sums of X[R, C] ---------------------------------------------------
// kern::PairwiseStack of src/kernels/kernels.hpp, transcribed for float
struct PairwiseStack {
  float val[64];
  int level[64];
  int n = 0;
  void push(float v) {
    int l = 0;
    while (n > 0 && level[n - 1] == l) {
      v = val[n - 1] + v;
      --n;
      ++l;
    }
    val[n] = v;
    level[n] = l;
    ++n;
  }
  float total() const {
    if (n == 0) return 0.0f;
    float r = val[n - 1];
    for (int i = n - 2; i >= 0; --i) r = val[i] + r;
    return r;
  }
};
// kern::batch_rule of src/kernels/row_rule.hpp, per column
void cpu_colsum(const float* x, long long R, int C, float* out) {
  for (int c = 0; c < C; ++c) {
    PairwiseStack st;
    for (long long r0 = 0; r0 < R; r0 += 32) {
      float acc = 0.0f;
      for (long long r = r0; r < r0 + 32 && r < R; ++r) acc = acc + x[r * C + c];
      st.push(acc);
    }
    out[c] = canon_host(st.total());
  }
}
void cpu_colsum_sequential(const float* x, long long R, int C, float* out) {  // another order
  for (int c = 0; c < C; ++c) {
    float acc = 0.0f;
    for (long long r = 0; r < R; ++r) acc = acc + x[r * C + c];
    out[c] = acc;
  }
}

constexpr int kColTile = 32;  // columns a thread block (one per warp lane: coalesced rows)
constexpr int kSpan = 32;     // leaves a thread block combines: 2^5, an aligned complete subtree

// Pass over `rows` rows of X[rows, C]. A leaf is a chain of `leaf` rows from +0 (leaf = 32, the
// first pass) or one row as it is (leaf = 1 on later passes, where the rows are subtree values).
// Thread block (bx, by): columns [bx*32, +32), leaves [by*32, +32) -- a run of 32 leaves starting
// at a multiple of 32, so its tree is a complete subtree of the whole tree (or its right tail).
// Thread (tx, ty): column tx, leaf ty. The leaves are combined level by level: at level l,
// leaf slot t (a multiple of 2^(l+1)) takes slot t + 2^l when that slot exists, else keeps its
// value -- adjacent pairs with an odd last one carried up, which is tree(p) of numerics.md §2.
// out[by, c] is the block's subtree value.
__global__ void colsum_pass(const float* __restrict__ X, long long rows, int C, int leaf, float* __restrict__ out) {
  __shared__ float p[kSpan][kColTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = blockIdx.x * kColTile + tx;
  const long long leaves = (rows + leaf - 1) / leaf;
  const long long my_leaf = (long long)blockIdx.y * kSpan + ty;
  const int n = (int)min((long long)kSpan, leaves - (long long)blockIdx.y * kSpan);  // leaves in this block
  float acc = 0.0f;
  if (c < C && ty < n) {
    if (leaf == 1) {
      acc = X[my_leaf * C + c];
    } else {
      const long long r0 = my_leaf * leaf, r1 = min(r0 + leaf, rows);
      for (long long r = r0; r < r1; ++r) acc = __fadd_rn(acc, X[r * C + c]);
    }
  }
  p[ty][tx] = acc;
  __syncthreads();
  for (int h = 1; h < kSpan; h *= 2) {
    if (ty % (2 * h) == 0 && ty + h < n) p[ty][tx] = __fadd_rn(p[ty][tx], p[ty + h][tx]);
    __syncthreads();
  }
  if (ty == 0 && c < C) out[(long long)blockIdx.y * C + c] = p[0][tx];
}
__global__ void canon_kernel(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = canon_dev(x[i]);
}

// Passes until one row is left. Each pass's rows are aligned subtrees of 32^pass leaves (the
// last one possibly a tail), so combining them by the same tree is the tree over all leaves.
void gpu_colsum(const float* dX, long long R, int C, float* buf0, float* buf1, float* dout) {
  const float* in = dX;
  long long rows = R;
  int leaf = 32;
  float* bufs[2] = {buf0, buf1};
  int which = 0;
  if (R == 0) {
    CUDA_OK(cudaMemset(dout, 0, C * 4));
    return;
  }
  for (;;) {
    const long long leaves = (rows + leaf - 1) / leaf;
    const long long blocks = (leaves + kSpan - 1) / kSpan;
    float* dst = blocks == 1 ? dout : bufs[which];
    dim3 grid((C + kColTile - 1) / kColTile, (unsigned)blocks);
    colsum_pass<<<grid, dim3(kColTile, kSpan)>>>(in, rows, C, leaf, dst);
    CUDA_OK(cudaGetLastError());
    if (blocks == 1) break;
    in = dst;
    rows = blocks;
    leaf = 1;
    which ^= 1;
  }
  canon_kernel<<<(C + 255) / 256, 256>>>(dout, C);
  CUDA_OK(cudaGetLastError());
}

bool run_colsum(cublasHandle_t h) {
  struct Shape {
    long long R;
    int C;
  };
  const Shape shapes[] = {{1, 1},     {31, 7},     {32, 33},         {33, 33},          {1000, 1024},
                          {32 * 1024 + 5, 100},    {1 << 20, 1}, {262144, 1024}, {(1 << 20) + 999, 64}};
  bool ok = true;
  std::printf("\n== batch rule: column sums of X[R, C] (numerics.md §3), f32, REPS=%d ==\n", g_reps);
  std::printf("%-18s %10s %10s | %10s %10s %10s | %s\n", "R x C", "cpu diff", "seq diff*", "canon GB/s", "sgemv GB/s",
              "sgemv/can", "sgemv bits vs canon");
  for (const Shape& s : shapes) {
    const long long n = s.R * s.C;
    std::vector<float> X(n);
    for (long long i = 0; i < n; ++i) X[i] = hash_wide(4, i);
    float *dX, *b0, *b1, *dout, *dones, *dy;
    const long long partial = ((s.R + 31) / 32 + 31) / 32 * (long long)s.C + 1;
    CUDA_OK(cudaMalloc(&dX, n * 4));
    CUDA_OK(cudaMalloc(&b0, partial * 4));
    CUDA_OK(cudaMalloc(&b1, partial * 4));
    CUDA_OK(cudaMalloc(&dout, s.C * 4));
    CUDA_OK(cudaMalloc(&dy, s.C * 4));
    CUDA_OK(cudaMalloc(&dones, s.R * 4));
    CUDA_OK(cudaMemcpy(dX, X.data(), n * 4, cudaMemcpyHostToDevice));
    std::vector<float> ones(s.R, 1.0f);
    CUDA_OK(cudaMemcpy(dones, ones.data(), s.R * 4, cudaMemcpyHostToDevice));

    gpu_colsum(dX, s.R, s.C, b0, b1, dout);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> got(s.C), want(s.C), seq(s.C), cb(s.C);
    CUDA_OK(cudaMemcpy(got.data(), dout, s.C * 4, cudaMemcpyDeviceToHost));
    cpu_colsum(X.data(), s.R, s.C, want.data());
    cpu_colsum_sequential(X.data(), s.R, s.C, seq.data());
    const long long d = count_diff(want.data(), got.data(), s.C);
    if (d != 0) ok = false;

    const double t = median_ms([&] { gpu_colsum(dX, s.R, s.C, b0, b1, dout); });
    // column sums as X^T ones: X row-major [R, C] is column-major [C, R] with leading dim C
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
    const double tg = median_ms([&] { CUBLAS_OK(cublasSgemv(h, CUBLAS_OP_N, s.C, (int)s.R, &one, dX, s.C, dones, 1, &zero, dy, 1)); });
    CUBLAS_OK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    CUDA_OK(cudaMemcpy(cb.data(), dy, s.C * 4, cudaMemcpyDeviceToHost));
    const double bytes = n * 4.0;
    char shape[48];
    std::snprintf(shape, sizeof shape, "%lldx%d", s.R, s.C);
    std::printf("%-18s %10lld %10lld | %10.1f %10.1f %10.2f | %lld of %d\n", shape, d,
                count_diff(want.data(), seq.data(), s.C), bytes / (t * 1e-3) / 1e9, bytes / (tg * 1e-3) / 1e9, t / tg,
                count_diff(cb.data(), want.data(), s.C), s.C);
    CUDA_OK(cudaFree(dX));
    CUDA_OK(cudaFree(b0));
    CUDA_OK(cudaFree(b1));
    CUDA_OK(cudaFree(dout));
    CUDA_OK(cudaFree(dy));
    CUDA_OK(cudaFree(dones));
  }
  std::printf("seq diff*: a plain sequential sum against the batch rule (a control: the check can see an order).\n"
              "sgemv/can: time of the canonical passes / time of cublasSgemv(X^T, ones); above 1: cuBLAS faster.\n");
  return ok;
}

// ---- the row rule: sums over rows of X[R, L] ---------------------------------------------------
// numerics.md §4: blocks of 1024 elements; logical lane j (of 16) sums the block's elements j,
// j+16, ... from +0; lanes folded by h = 8, 4, 2, 1: lane[j] = lane[j] + lane[j+h]; block results
// combined by the pairwise tree. Variants: plain sum (lane + x) and the dot of the softmax
// gradient (fma(a, b, lane)), whose lanes can hold -0, so a short last group is added into its own
// lanes only (never padded).
enum class RowOp { sum, dot };

// kern::row_rule of src/kernels/row_rule.hpp, transcribed
// (pad = true: a short last group padded with fma(0, 0, lane), the fault numerics version 3
// removed -- a control that must differ on the rows whose lanes are all -0)
float cpu_row_rule(const float* a, const float* b, long long L, RowOp op, bool pad = false) {
  PairwiseStack st;
  for (long long b0 = 0; b0 < L; b0 += 1024) {
    float lanes[16];
    for (float& l : lanes) l = 0.0f;
    long long i = b0;
    for (; i < b0 + 1024 && i < L; ++i) {
      float& l = lanes[(i - b0) % 16];
      l = op == RowOp::sum ? l + a[i] : std::fma(a[i], b[i], l);
    }
    for (; pad && (i - b0) % 16 != 0; ++i) lanes[(i - b0) % 16] = std::fma(0.0f, 0.0f, lanes[(i - b0) % 16]);
    for (int h = 8; h >= 1; h /= 2)
      for (int j = 0; j < h; ++j) lanes[j] = lanes[j] + lanes[j + h];
    st.push(lanes[0]);
  }
  return canon_host(st.total());
}
float cpu_row_sequential(const float* a, const float* b, long long L, RowOp op) {  // another order
  float acc = 0.0f;
  for (long long i = 0; i < L; ++i) acc = op == RowOp::sum ? acc + a[i] : std::fma(a[i], b[i], acc);
  return acc;
}

// One half-warp per (row, 1024-element block): thread j of the half-warp is logical lane j. The
// fold is a fixed shuffle pattern inside the half-warp (width 16), offsets 8, 4, 2, 1: lane j < h
// gets lane[j] + lane[j+h]; the lanes j >= h compute values nobody reads. Every thread of the
// warp reaches the shuffles (no early return), so the full mask is right.
__global__ void row_rule_blocks(const float* __restrict__ a, const float* __restrict__ b, long long R, long long L,
                                long long nblk, bool dot, float* __restrict__ part) {
  const long long hw = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 16;
  const int j = threadIdx.x % 16;
  const long long row = hw / nblk, blk = hw % nblk;
  float lane = 0.0f;
  if (row < R) {
    const float* ar = a + row * L;
    const float* br = b + row * L;
    const long long end = min(blk * 1024 + 1024, L);
    for (long long i = blk * 1024 + j; i < end; i += 16) lane = dot ? __fmaf_rn(ar[i], br[i], lane) : __fadd_rn(lane, ar[i]);
  }
#pragma unroll
  for (int h = 8; h >= 1; h /= 2) lane = __fadd_rn(lane, __shfl_down_sync(0xffffffffu, lane, h, 16));
  if (row < R && j == 0) part[row * nblk + blk] = lane;
}
// the block results of each row by the streaming pairwise tree (kern::PairwiseStack), one thread
// a row: rows longer than 1024 elements are the minority, and their block count is small
__global__ void row_rule_tree(const float* __restrict__ part, long long R, long long nblk, float* __restrict__ out) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= R) return;
  float val[64];
  int level[64], n = 0;
  for (long long k = 0; k < nblk; ++k) {
    float v = part[row * nblk + k];
    int l = 0;
    while (n > 0 && level[n - 1] == l) {
      v = __fadd_rn(val[n - 1], v);
      --n;
      ++l;
    }
    val[n] = v;
    level[n] = l;
    ++n;
  }
  float r = val[n - 1];
  for (int i = n - 2; i >= 0; --i) r = __fadd_rn(val[i], r);
  out[row] = canon_dev(r);
}
void gpu_row_rule(const float* da, const float* db, long long R, long long L, bool dot, float* part, float* dout) {
  const long long nblk = (L + 1023) / 1024;
  const long long threads = R * nblk * 16;
  row_rule_blocks<<<(unsigned)((threads + 255) / 256), 256>>>(da, db, R, L, nblk, dot, part);
  CUDA_OK(cudaGetLastError());
  row_rule_tree<<<(unsigned)((R + 255) / 256), 256>>>(part, R, nblk, dout);
  CUDA_OK(cudaGetLastError());
}

bool run_row_rule(cublasHandle_t h) {
  struct Shape {
    long long R, L;
  };
  const Shape shapes[] = {{1, 1},    {3, 15},       {7, 17},      {64, 768},    {33, 1024}, {5, 1025},
                          {4, 50257}, {1000, 4096}, {8192, 768}, {512, 50304}};
  struct Variant {
    RowOp op;
    bool tiny;  // a <= 0, b >= 0, both below 2^-75: every product rounds to -0, so every lane holds -0
    const char* name;
  };
  const Variant variants[] = {{RowOp::sum, false, "sum"}, {RowOp::dot, false, "dot fma"}, {RowOp::dot, true, "dot fma, tiny"}};
  bool ok = true;
  std::printf("\n== row rule: sums over rows of X[R, L] (numerics.md §4), f32, REPS=%d ==\n", g_reps);
  std::printf("%-14s %-14s %9s %9s %9s | %10s %10s %10s | %s\n", "R x L", "variant", "cpu diff", "seq diff*", "pad diff*",
              "canon GB/s", "sgemv GB/s", "sgemv/can", "sgemv bits vs canon (sum)");
  for (const Shape& s : shapes) {
    const long long n = s.R * s.L, nblk = (s.L + 1023) / 1024;
    std::vector<float> a(n), b(n);
    float *da, *db, *dpart, *dout, *dones, *dy;
    CUDA_OK(cudaMalloc(&da, n * 4));
    CUDA_OK(cudaMalloc(&db, n * 4));
    CUDA_OK(cudaMalloc(&dpart, s.R * nblk * 4));
    CUDA_OK(cudaMalloc(&dout, s.R * 4));
    CUDA_OK(cudaMalloc(&dy, s.R * 4));
    CUDA_OK(cudaMalloc(&dones, s.L * 4));
    std::vector<float> ones(s.L, 1.0f);
    CUDA_OK(cudaMemcpy(dones, ones.data(), s.L * 4, cudaMemcpyHostToDevice));
    for (const Variant& v : variants) {
      for (long long i = 0; i < n; ++i) {
        a[i] = v.tiny ? -std::fabs(hash_unit(5, i)) * 0x1p-75f : hash_wide(5, i);
        b[i] = v.tiny ? std::fabs(hash_unit(6, i)) * 0x1p-75f : hash_wide(6, i);
      }
      CUDA_OK(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice));
      const bool dot = v.op == RowOp::dot;
      gpu_row_rule(da, db, s.R, s.L, dot, dpart, dout);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<float> got(s.R), want(s.R), seq(s.R), padded(s.R);
      CUDA_OK(cudaMemcpy(got.data(), dout, s.R * 4, cudaMemcpyDeviceToHost));
      for (long long r = 0; r < s.R; ++r) {
        want[r] = cpu_row_rule(a.data() + r * s.L, b.data() + r * s.L, s.L, v.op);
        seq[r] = cpu_row_sequential(a.data() + r * s.L, b.data() + r * s.L, s.L, v.op);
        padded[r] = cpu_row_rule(a.data() + r * s.L, b.data() + r * s.L, s.L, v.op, true);
      }
      const long long pad_diff = count_diff(want.data(), padded.data(), s.R);
      const long long d = count_diff(want.data(), got.data(), s.R);
      if (d != 0) ok = false;
      const double t = median_ms([&] { gpu_row_rule(da, db, s.R, s.L, dot, dpart, dout); });
      const double bytes = n * 4.0 * (dot ? 2 : 1);
      char shape[48];
      std::snprintf(shape, sizeof shape, "%lldx%lld", s.R, s.L);
      if (v.op == RowOp::sum) {
        // row sums as X ones: X row-major [R, L] is column-major [L, R]; op T gives R sums
        const float one = 1.0f, zero = 0.0f;
        CUBLAS_OK(cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH));
        const double tg = median_ms(
            [&] { CUBLAS_OK(cublasSgemv(h, CUBLAS_OP_T, (int)s.L, (int)s.R, &one, da, (int)s.L, dones, 1, &zero, dy, 1)); });
        CUBLAS_OK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
        std::vector<float> cb(s.R);
        CUDA_OK(cudaMemcpy(cb.data(), dy, s.R * 4, cudaMemcpyDeviceToHost));
        std::printf("%-14s %-14s %9lld %9lld %9lld | %10.1f %10.1f %10.2f | %lld of %lld\n", shape, v.name, d,
                    count_diff(want.data(), seq.data(), s.R), pad_diff, bytes / (t * 1e-3) / 1e9, bytes / (tg * 1e-3) / 1e9,
                    t / tg, count_diff(cb.data(), want.data(), s.R), s.R);
      } else {
        std::printf("%-14s %-14s %9lld %9lld %9lld | %10.1f %10s %10s |\n", shape, v.name, d,
                    count_diff(want.data(), seq.data(), s.R), pad_diff, bytes / (t * 1e-3) / 1e9, "", "");
      }
    }
    CUDA_OK(cudaFree(da));
    CUDA_OK(cudaFree(db));
    CUDA_OK(cudaFree(dpart));
    CUDA_OK(cudaFree(dout));
    CUDA_OK(cudaFree(dy));
    CUDA_OK(cudaFree(dones));
  }
  std::printf("seq diff*: one sequential chain per row against the row rule (a control).\n"
              "pad diff*: the row rule with a short last group padded by fma(0, 0, lane) (a control: the\n"
              "  tiny dot rows whose lanes are all -0 and whose length is not a multiple of 16 must differ).\n"
              "sgemv/can: time of the canonical kernels / time of cublasSgemv(X, ones); above 1: cuBLAS faster.\n");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* r = std::getenv("REPS")) g_reps = std::max(1, std::atoi(r));
  const bool info_only = argc > 1 && std::strcmp(argv[1], "--info") == 0;  // print the device and stop
  int dev = 0;
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  int driver = 0, runtime = 0, cbv = 0;
  CUDA_OK(cudaDriverGetVersion(&driver));
  CUDA_OK(cudaRuntimeGetVersion(&runtime));
  cublasHandle_t h;
  CUBLAS_OK(cublasCreate(&h));
  CUBLAS_OK(cublasGetVersion(h, &cbv));
  std::printf("device: %s, sm_%d%d, %d SMs; driver %d, runtime %d, cuBLAS %d\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount, driver, runtime, cbv);
  if (info_only) return 0;
  const bool g = run_gemm(h);
  const bool s = run_colsum(h);
  const bool w = run_row_rule(h);
  CUBLAS_OK(cublasDestroy(h));
  std::printf("\nbitwise: GEMM %s, batch rule %s, row rule %s\n", g ? "all equal" : "DIFFERENCES",
              s ? "all equal" : "DIFFERENCES", w ? "all equal" : "DIFFERENCES");
  return g && s && w ? 0 : 1;
}
