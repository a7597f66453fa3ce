// bitgrad's canonical kernels beside the plain loop a user would write for the same result in
// its natural (sequential) order, compiled with the same flags (-O3, no fast-math), f32, one
// thread: the batch rule and the row rule (GB/s read), im2col convolution through the op
// (GFLOP/s, against a direct six-deep loop of fma chains), softmax and cross-entropy
// (rows/s), the elementary functions (elements/s, against glibc's scalar libm) and dropout's
// mask (elements/s, against a Philox block per element).
//   build/bin/kernel_bench [--benchmark_filter=...]        (bench/run.sh, report_kernels.py)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "bitgrad/bitgrad.hpp"
#include "kernels/kernels.hpp"

namespace {

using bitgrad::kern::Unary;

std::vector<float> data(std::size_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  bitgrad::rng::Stream(seed, "bench").fill_uniform(v.data(), static_cast<std::int64_t>(n), 0, lo, hi);
  return v;
}

const auto& tb() { return bitgrad::kern::active<float>(); }

// ---- reductions: R x C matrix, bytes read per iteration -----------------------------------
void batch_rule(benchmark::State& st, bool ours) {
  const std::int64_t R = st.range(0), C = st.range(1);
  auto x = data(static_cast<std::size_t>(R * C), 1);
  std::vector<float> out(static_cast<std::size_t>(C));
  for (auto _ : st) {
    if (ours) {
      tb().sum_cols(x.data(), R, C, out.data());
    } else {
      for (std::int64_t c = 0; c < C; ++c) out[static_cast<std::size_t>(c)] = 0.0f;
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t c = 0; c < C; ++c) out[static_cast<std::size_t>(c)] += x[static_cast<std::size_t>(r * C + c)];
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(R * C), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

void row_rule(benchmark::State& st, bool ours) {
  const std::int64_t R = st.range(0), L = st.range(1);
  auto x = data(static_cast<std::size_t>(R * L), 2);
  std::vector<float> out(static_cast<std::size_t>(R));
  for (auto _ : st) {
    if (ours) {
      tb().sum_rows(x.data(), R, L, out.data());
    } else {
      for (std::int64_t r = 0; r < R; ++r) {
        float s = 0.0f;  // one sequential chain: the compiler may not reorder it
        for (std::int64_t i = 0; i < L; ++i) s += x[static_cast<std::size_t>(r * L + i)];
        out[static_cast<std::size_t>(r)] = s;
      }
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(R * L), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

// ---- convolution: the op (im2col + canonical GEMM) against a direct loop --------------------
void conv(benchmark::State& st, bool ours) {
  const std::int64_t N = 128, C = st.range(0), H = st.range(1), OC = st.range(2), K = 5, P = st.range(3);
  const std::int64_t OH = H + 2 * P - K + 1;
  auto xv = data(static_cast<std::size_t>(N * C * H * H), 3), wv = data(static_cast<std::size_t>(OC * C * K * K), 4),
       bv = data(static_cast<std::size_t>(OC), 5);
  bitgrad::Tensor x = bitgrad::Tensor::from<float>(xv, bitgrad::Shape{N, C, H, H});
  bitgrad::Tensor w = bitgrad::Tensor::from<float>(wv, bitgrad::Shape{OC, C, K, K});
  bitgrad::Tensor b = bitgrad::Tensor::from<float>(bv, bitgrad::Shape{OC});
  std::vector<float> y(static_cast<std::size_t>(N * OC * OH * OH));
  bitgrad::NoGradGuard ng;
  for (auto _ : st) {
    if (ours) {
      bitgrad::Tensor out = bitgrad::conv2d(x, w, b, 1, static_cast<int>(P));
      benchmark::DoNotOptimize(out.data<float>());
    } else {
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t o = 0; o < OC; ++o)
          for (std::int64_t oh = 0; oh < OH; ++oh)
            for (std::int64_t ow = 0; ow < OH; ++ow) {
              float acc = 0.0f;
              for (std::int64_t c = 0; c < C; ++c)
                for (std::int64_t kh = 0; kh < K; ++kh)
                  for (std::int64_t kw = 0; kw < K; ++kw) {
                    const std::int64_t ih = oh + kh - P, iw = ow + kw - P;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
                    acc = std::fma(xv[static_cast<std::size_t>(((n * C + c) * H + ih) * H + iw)],
                                   wv[static_cast<std::size_t>(((o * C + c) * K + kh) * K + kw)], acc);
                  }
              y[static_cast<std::size_t>(((n * OC + o) * OH + oh) * OH + ow)] = acc + bv[static_cast<std::size_t>(o)];
            }
      benchmark::DoNotOptimize(y.data());
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOPS"] = benchmark::Counter(2.0 * static_cast<double>(N * OC * OH * OH * C * K * K),
                                             benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// ---- 2x2 max pooling through the op (first maximum, NaN wins, argmax kept for backward)
//      against a plain max loop (no NaN rule, no argmax) -------------------------------------
void maxpool(benchmark::State& st, bool ours) {
  const std::int64_t N = 128, C = st.range(0), H = st.range(1), OH = H / 2;
  auto xv = data(static_cast<std::size_t>(N * C * H * H), 8);
  bitgrad::Tensor x = bitgrad::Tensor::from<float>(xv, bitgrad::Shape{N, C, H, H});
  std::vector<float> y(static_cast<std::size_t>(N * C * OH * OH));
  x.set_requires_grad(true);  // so that the op records its argmax as in training
  for (auto _ : st) {
    if (ours) {
      bitgrad::Tensor out = bitgrad::max_pool2d(x, 2);
      benchmark::DoNotOptimize(out.data<float>());
    } else {
      for (std::int64_t q = 0; q < N * C; ++q)
        for (std::int64_t oh = 0; oh < OH; ++oh)
          for (std::int64_t ow = 0; ow < OH; ++ow) {
            const float* p = xv.data() + (q * H + 2 * oh) * H + 2 * ow;
            y[static_cast<std::size_t>((q * OH + oh) * OH + ow)] = std::max(std::max(p[0], p[1]), std::max(p[H], p[H + 1]));
          }
      benchmark::DoNotOptimize(y.data());
    }
    benchmark::ClobberMemory();
  }
  st.counters["GB/s"] = benchmark::Counter(4.0 * static_cast<double>(N * C * H * H), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

// ---- softmax and cross-entropy over rows of L ----------------------------------------------
void xent(benchmark::State& st, bool ours) {
  const std::int64_t R = 4096, L = st.range(0);
  auto x = data(static_cast<std::size_t>(R * L), 6, -4.0f, 4.0f);
  std::vector<std::int64_t> t(static_cast<std::size_t>(R));
  for (std::int64_t r = 0; r < R; ++r) t[static_cast<std::size_t>(r)] = (r * 7) % L;
  std::vector<float> loss(static_cast<std::size_t>(R)), g(static_cast<std::size_t>(R * L));
  const float scale = 1.0f / static_cast<float>(R);
  for (auto _ : st) {
    if (ours) {
      tb().xent_rows(x.data(), t.data(), R, L, loss.data());
      tb().xent_grad_rows(x.data(), t.data(), R, L, scale, g.data());
    } else {
      for (std::int64_t r = 0; r < R; ++r) {
        const float* row = x.data() + r * L;
        float m = row[0];
        for (std::int64_t i = 1; i < L; ++i) m = row[i] > m ? row[i] : m;
        float s = 0.0f;
        for (std::int64_t i = 0; i < L; ++i) s += std::exp(row[i] - m);
        loss[static_cast<std::size_t>(r)] = std::log(s) - (row[t[static_cast<std::size_t>(r)]] - m);
        for (std::int64_t i = 0; i < L; ++i)
          g[static_cast<std::size_t>(r * L + i)] = (std::exp(row[i] - m) / s - (i == t[static_cast<std::size_t>(r)] ? 1.0f : 0.0f)) * scale;
      }
    }
    benchmark::DoNotOptimize(loss.data());
    benchmark::DoNotOptimize(g.data());
    benchmark::ClobberMemory();
  }
  st.counters["rows/s"] = benchmark::Counter(static_cast<double>(R), benchmark::Counter::kIsIterationInvariantRate,
                                             benchmark::Counter::kIs1000);
}

// ---- elementary functions over 2^20 elements -----------------------------------------------
template <Unary op>
void unary(benchmark::State& st, bool ours) {
  const std::int64_t n = 1 << 20;
  const bool positive = op == Unary::log;
  // GELU sees pre-activations of a trained layer: mostly within a few units of 0
  const float lo = positive ? 0.001f : op == Unary::gelu ? -3.0f : -8.0f;
  auto x = data(static_cast<std::size_t>(n), 7, lo, op == Unary::gelu ? 3.0f : 8.0f);
  std::vector<float> y(static_cast<std::size_t>(n));
  for (auto _ : st) {
    if (ours) {
      tb().unary(op, x.data(), y.data(), n);
    } else {
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = x[static_cast<std::size_t>(i)];
        float r;
        if constexpr (op == Unary::exp) r = std::exp(v);
        else if constexpr (op == Unary::log) r = std::log(v);
        else if constexpr (op == Unary::tanh) r = std::tanh(v);
        else if constexpr (op == Unary::sigmoid) r = 1.0f / (1.0f + std::exp(-v));
        else if constexpr (op == Unary::gelu) r = 0.5f * v * (1.0f + std::erf(v * 0.70710678f));
        else r = std::erf(v);
        y[static_cast<std::size_t>(i)] = r;
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

// GELU's gradient g * (Phi(x) + x phi(x)) over 2^20 elements in [-3, 3]
void gelu_grad(benchmark::State& st, bool ours) {
  const std::int64_t n = 1 << 20;
  auto x = data(static_cast<std::size_t>(n), 7, -3.0f, 3.0f);
  auto g = data(static_cast<std::size_t>(n), 8, -1.0f, 1.0f);
  std::vector<float> y(static_cast<std::size_t>(n));
  for (auto _ : st) {
    if (ours) {
      tb().act_grad(bitgrad::kern::ActGrad::gelu, x.data(), g.data(), y.data(), n);
    } else {
      for (std::size_t i = 0; i < y.size(); ++i) {
        const float v = x[i];
        y[i] = g[i] * (0.5f * (1.0f + std::erf(v * 0.70710678f)) + v * std::exp(-0.5f * v * v) * 0.39894228f);
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  st.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

void reg(const std::string& name, void (*f)(benchmark::State&, bool), std::vector<std::vector<std::int64_t>> args) {
  for (bool ours : {true, false}) {
    auto* b = benchmark::RegisterBenchmark((name + (ours ? "/bitgrad" : "/plain")).c_str(), [f, ours](benchmark::State& st) { f(st, ours); });
    for (auto& a : args) b->Args(a);
    b->Unit(benchmark::kMicrosecond)->MinTime(0.2);
  }
}

// ---- dropout's mask of n elements (elements/s): the kernel against the loop a user would write,
// one Philox block per element (rng::Stream::uniform_f32)
void dropout_mask(benchmark::State& st, bool ours) {
  const std::int64_t n = st.range(0);
  const bitgrad::rng::Stream s(7, "dropout");
  std::vector<float> m(static_cast<std::size_t>(n));
  const float keep = 1.0f / 0.9f;
  for (auto _ : st) {
    if (ours) {
      tb().dropout_mask(s, 0, n, 0.1, true, keep, m.data());
    } else {
      for (std::int64_t k = 0; k < n; ++k) m[static_cast<std::size_t>(k)] = s.uniform_f32(static_cast<std::uint64_t>(k)) >= 0.1f ? keep : 0.0f;
    }
    benchmark::DoNotOptimize(m.data());
  }
  st.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1000);
}

}  // namespace

int main(int argc, char** argv) {
  bitgrad::set_num_threads(1);
  // batch rule: a Linear layer's bias gradient at batch 128 and the adder's at batch 10000
  reg("batch_rule", batch_rule, {{128, 512}, {10000, 10}, {128, 401408}});
  reg("row_rule", row_rule, {{128, 784}, {1, 1 << 20}});
  // LeNet's two convolutions (C, H, OC, padding)
  reg("conv2d", conv, {{1, 28, 6, 2}, {6, 14, 16, 0}});
  reg("max_pool2d", maxpool, {{6, 28}, {16, 10}});  // LeNet's two poolings (C, H)
  reg("softmax_xent", xent, {{10}, {1000}});
  reg("exp", unary<Unary::exp>, {{0}});
  reg("log", unary<Unary::log>, {{0}});
  reg("tanh", unary<Unary::tanh>, {{0}});
  reg("sigmoid", unary<Unary::sigmoid>, {{0}});
  reg("erf", unary<Unary::erf>, {{0}});
  reg("gelu", unary<Unary::gelu>, {{0}});
  reg("gelu_grad", gelu_grad, {{0}});
  reg("dropout_mask", dropout_mask, {{1 << 20}});
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
