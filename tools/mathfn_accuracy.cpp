// Measures the accuracy of every elementary function against MPFR on N inputs each
// (default 10^7) for f64 and f32, and prints the table recorded in docs/numerics.md.
//   build/bin/mathfn_accuracy [--n N] [--threads T] [--only NAME]
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

int main(int argc, char** argv) {
  std::size_t n = 10000000;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--n") && i + 1 < argc) n = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: mathfn_accuracy [--n N] [--threads T] [--only NAME]\n");
      return 2;
    }
  }
  if (threads < 1) threads = 1;
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
