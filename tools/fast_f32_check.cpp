// Every f32 input through the fast f32 exp, sigmoid and tanh of each code path the CPU has,
// against the scalar reference kernels (NaN canonical): exp is the f64 function rounded once,
// which the fast paths decide from a cheaper approximation where its margin allows
// (math/mathfn_impl.hpp, exp_f32r), and this checks that they never decide it differently;
// sigmoid and tanh are f32 formulas (numerics §8) whose vector lanes must give the scalar bits.
//   fast_f32_check [--threads N] [--stride S]   (S > 1: every S-th bit pattern, for a quick run)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"

namespace {

using bitgrad::Isa;
using bitgrad::kern::Unary;

struct Fn {
  Unary op;
  const char* name;
};

const Fn kFns[] = {{Unary::exp, "exp"}, {Unary::sigmoid, "sigmoid"}, {Unary::tanh, "tanh"}};

struct Count {
  std::uint64_t inputs = 0, differ = 0;
  std::uint32_t first_bad = 0;
};

// Bit patterns [lo, hi) with the given stride, in chunks; the reference once per chunk.
void check_range(const Fn& f, const std::vector<Isa>& isas, std::uint64_t lo, std::uint64_t hi, std::uint64_t stride,
                 std::vector<Count>& out) {
  constexpr std::size_t kChunk = 1 << 14;
  std::vector<float> x(kChunk), want(kChunk), got(kChunk);
  std::vector<std::unique_ptr<bitgrad::ExecContext>> ctx;
  for (Isa isa : isas) ctx.push_back(std::make_unique<bitgrad::ExecContext>(1, isa));
  bitgrad::ExecContext ref(1, Isa::scalar);
  for (std::uint64_t b = lo; b < hi;) {
    std::size_t n = 0;
    for (; n < kChunk && b < hi; ++n, b += stride) {
      const auto bits = static_cast<std::uint32_t>(b);
      std::memcpy(&x[n], &bits, 4);
    }
    {
      bitgrad::ExecScope scope(ref);
      bitgrad::kern::table<float>(Isa::scalar).unary(f.op, x.data(), want.data(), static_cast<std::int64_t>(n));
    }
    for (std::size_t k = 0; k < isas.size(); ++k) {
      bitgrad::ExecScope scope(*ctx[k]);
      bitgrad::kern::table<float>(isas[k]).unary(f.op, x.data(), got.data(), static_cast<std::int64_t>(n));
      for (std::size_t i = 0; i < n; ++i) {
        if (std::memcmp(&got[i], &want[i], 4) != 0) {
          std::uint32_t xb;
          std::memcpy(&xb, &x[i], 4);
          if (out[k].differ++ == 0) out[k].first_bad = xb;
        }
      }
      out[k].inputs += n;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  std::uint64_t stride = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--stride" && i + 1 < argc) {
      stride = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "fast_f32_check: unknown argument '%s' (expected --threads N, --stride S)\n", a.c_str());
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  if (stride < 1) stride = 1;
  std::vector<Isa> isas;
  for (Isa isa : {Isa::avx2, Isa::avx512})
    if (bitgrad::cpu_supports(isa)) isas.push_back(isa);
  bool bad = false;
  std::printf("| function | code path | inputs | differ | first differing input |\n|---|---|---:|---:|---|\n");
  for (const Fn& f : kFns) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::uint64_t total = (std::uint64_t{1} << 32);
    std::vector<std::vector<Count>> per(static_cast<std::size_t>(threads), std::vector<Count>(isas.size()));
    std::vector<std::thread> pool;
    const std::uint64_t steps = (total + stride - 1) / stride;
    for (int t = 0; t < threads; ++t) {
      const std::uint64_t s0 = steps * static_cast<std::uint64_t>(t) / static_cast<std::uint64_t>(threads);
      const std::uint64_t s1 = steps * static_cast<std::uint64_t>(t + 1) / static_cast<std::uint64_t>(threads);
      pool.emplace_back([&, t, s0, s1] { check_range(f, isas, s0 * stride, std::min(total, s1 * stride), stride, per[static_cast<std::size_t>(t)]); });
    }
    for (auto& th : pool) th.join();
    for (std::size_t k = 0; k < isas.size(); ++k) {
      Count c;
      for (auto& p : per) {
        if (p[k].differ && !c.differ) c.first_bad = p[k].first_bad;
        c.inputs += p[k].inputs;
        c.differ += p[k].differ;
      }
      bad = bad || c.differ != 0;
      char first[32] = "";
      if (c.differ) {
        float xf;
        std::memcpy(&xf, &c.first_bad, 4);
        std::snprintf(first, sizeof first, "%.9g", static_cast<double>(xf));
      }
      std::printf("| %s | %s | %llu | %llu | %s |\n", f.name, bitgrad::isa_name(isas[k]), static_cast<unsigned long long>(c.inputs),
                  static_cast<unsigned long long>(c.differ), first);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%s: %.1f s\n", f.name, s);
  }
  return bad ? 1 : 0;
}
