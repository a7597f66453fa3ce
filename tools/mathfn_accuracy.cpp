// Measures the accuracy of every elementary function against MPFR on N inputs each
// (default 10^7) for f64 and f32, and prints the table recorded in docs/numerics.md.
//   build/bin/mathfn_accuracy [--n N] [--threads T] [--only NAME]
// --f32-all runs every f32 input (2^32, NaNs skipped) of the functions whose f32 form is a
// formula of its own (sigmoid, tanh: numerics §8) against their f64 functions, which are within
// 2^-52 of the true value (MPFR on 4e9 inputs would take hours): the largest error in ulps and
// how many inputs the formula does not round as the f64 function rounded once.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mpfr_oracle.hpp"

using namespace bitgrad::tools;

template <class T>
Accuracy run(Fn fn, std::size_t n, int threads) {
  auto inputs = make_inputs<T>(fn, n, 0x5eed0000ULL + static_cast<unsigned>(fn));
  std::vector<Accuracy> parts(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::size_t b = inputs.size() * t / threads, e = inputs.size() * (t + 1) / threads;
      parts[t] = measure<T>(fn, inputs, b, e);
    });
  }
  for (auto& th : pool) th.join();
  Accuracy total;
  for (auto& p : parts) {
    total.count += p.count;
    if (!(p.max_ulp <= total.max_ulp)) {
      total.max_ulp = p.max_ulp;
      total.worst_a = p.worst_a;
      total.worst_b = p.worst_b;
    }
  }
  return total;
}

// Error of an f32 result in ulps of the f32 format at the f64 value r (subnormal spacing at the
// bottom), as ulps_from in mpfr_oracle.hpp.
double f32_ulps(float got, double r) {
  int e = 0;
  std::frexp(r, &e);  // r = m 2^e, m in [1/2, 1)
  if (r == 0 || e < -125) e = -125;
  return std::fabs(static_cast<double>(got) - r) / std::ldexp(1.0, e - 24);
}

int all_f32(Fn fn, const char* name, int threads) {
  struct Part {
    double max_ulp = 0, worst = 0;
    std::uint64_t count = 0, not_rounded = 0;
  };
  std::vector<Part> parts(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Part& p = parts[t];
      for (std::uint64_t b = static_cast<std::uint64_t>(t); b < (std::uint64_t{1} << 32); b += static_cast<std::uint64_t>(threads)) {
        const auto bits = static_cast<std::uint32_t>(b);
        float x;
        std::memcpy(&x, &bits, 4);
        if (x != x) continue;
        const float got = call<float>(fn, x, 0.0f);
        const double r = call<double>(fn, static_cast<double>(x), 0.0);
        ++p.count;
        if (static_cast<float>(r) != got || std::signbit(static_cast<float>(r)) != std::signbit(got)) ++p.not_rounded;
        // a NaN for a number (or a number for NaN) is an infinite error, never skipped by the max
        const double e = (got != got) != (r != r) ? INFINITY : f32_ulps(got, r);
        if (!(e <= p.max_ulp)) p.max_ulp = e, p.worst = x;
      }
    });
  }
  for (auto& th : pool) th.join();
  Part all;
  for (const Part& p : parts) {
    all.count += p.count;
    all.not_rounded += p.not_rounded;
    if (!(p.max_ulp <= all.max_ulp)) all.max_ulp = p.max_ulp, all.worst = p.worst;
  }
  std::printf("%s f32, all %llu non-NaN inputs: max error %.4f ulp at %.9g; %llu (%.4f%%) not the f64 function rounded once\n", name,
              static_cast<unsigned long long>(all.count), all.max_ulp, all.worst, static_cast<unsigned long long>(all.not_rounded),
              100.0 * static_cast<double>(all.not_rounded) / static_cast<double>(all.count));
  return all.max_ulp <= 1.0 ? 0 : 1;
}

int main(int argc, char** argv) {
  std::size_t n = 10000000;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  std::string only;
  bool f32_all = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--f32-all")) f32_all = true;
    else {
      std::fprintf(stderr, "usage: mathfn_accuracy [--n N] [--threads T] [--only NAME] [--f32-all]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  if (f32_all) {
    int rc = 0;
    if (only.empty() || only == "sigmoid") rc |= all_f32(Fn::sigmoid, "sigmoid", threads);
    if (only.empty() || only == "tanh") rc |= all_f32(Fn::tanh, "tanh", threads);
    return rc;
  }
  std::printf("| function | inputs | max error f64 (ulp) | worst f64 input | max error f32 (ulp) | worst f32 input |\n");
  std::printf("|---|---|---|---|---|---|\n");
  bool ok = true;
  for (const auto& f : all_functions()) {
    if (!only.empty() && only != f.name) continue;
    Accuracy d = run<double>(f.fn, n, threads);
    Accuracy s = run<float>(f.fn, n, threads);
    char wd[80], ws[80];
    if (f.binary) {
      std::snprintf(wd, sizeof wd, "(%.17g, %.17g)", d.worst_a, d.worst_b);
      std::snprintf(ws, sizeof ws, "(%.9g, %.9g)", s.worst_a, s.worst_b);
    } else {
      std::snprintf(wd, sizeof wd, "%.17g", d.worst_a);
      std::snprintf(ws, sizeof ws, "%.9g", s.worst_a);
    }
    std::printf("| %s | %zu | %.3f | %s | %.3f | %s |\n", f.name, d.count, d.max_ulp, wd, s.max_ulp, ws);
    std::fflush(stdout);
    ok = ok && d.max_ulp <= 2.0 && s.max_ulp <= 2.0;
  }
  return ok ? 0 : 1;
}
