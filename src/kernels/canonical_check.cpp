// The build's own numerics, checked once per process: a short computation whose every rounding
// numerics.md fixes (the batch rule, the row rule, softmax, bitgrad's exp, log, tanh, sigmoid,
// erf and sin, gradual underflow), in f32 and f64, hashed (FNV-1a 64 of the bytes) and compared
// with the bits every correct build gives on every code path (contract T8). A library compiled
// with a value-changing option that got around the configure step's probe, or miscompiled, gives
// other bits and refuses to run, naming the cause. Its cost does not show in a process's start
// (docs/benchmarks.md, "Start-up").
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bitgrad/error.hpp"
#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad {
namespace {

// the bits of canonical_bits_hash() on every correct build and code path
constexpr std::uint64_t kCanonicalBits = 0x9e2b41fb72b7d2d4ULL;

struct Fnv {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  template <class T>
  void add(const std::vector<T>& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    for (std::size_t i = 0; i < v.size() * sizeof(T); ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
};

template <class T>
void run(Fnv& f) {
  const kern::Table<T>& k = kern::active<T>();
  // values of every sign and size, a zero of each sign and a subnormal among them
  std::vector<T> x(300);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<T>(static_cast<double>(static_cast<std::int64_t>((i * 2654435761u) % 1000) - 500) / 64.0);
  x[7] = static_cast<T>(-0.0);
  x[11] = sizeof(T) == 4 ? static_cast<T>(0x1p-140) : static_cast<T>(0x1p-1070);
  std::vector<T> cols(3), rows(2), soft(150), un(40);
  k.sum_cols(x.data(), 70, 3, cols.data());  // the batch rule over 70 rows: blocks of 32, the tree
  k.sum_rows(x.data(), 2, 150, rows.data());
  k.softmax_rows(x.data(), 3, 50, soft.data());
  f.add(cols);
  f.add(rows);
  f.add(soft);
  std::vector<T> pos(40);
  for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = static_cast<T>(std::fabs(static_cast<double>(x[i])) + 0.5);
  for (kern::Unary op : {kern::Unary::exp, kern::Unary::tanh, kern::Unary::sigmoid, kern::Unary::erf, kern::Unary::sin}) {
    k.unary(op, x.data() + 40, un.data(), 40);
    f.add(un);
  }
  k.unary(kern::Unary::log, pos.data(), un.data(), 40);
  f.add(un);
  // gradual underflow in plain arithmetic (no flush to zero)
  volatile T tiny = x[11];
  std::vector<T> under{static_cast<T>(tiny * static_cast<T>(0.5)), static_cast<T>(tiny + static_cast<T>(0))};
  f.add(under);
}

}  // namespace

std::uint64_t canonical_bits_hash() {
#if defined(__x86_64__)
  // the build is checked, not the calling thread's MXCSR (check_fp_environment says that)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr & ~0xe040u);
#endif
  Fnv f;
  run<float>(f);
  run<double>(f);
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  return f.h;
}

void check_canonical_bits() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::uint64_t got = canonical_bits_hash();
    if (got != kCanonicalBits) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%016llx (expected %016llx)", static_cast<unsigned long long>(got),
                    static_cast<unsigned long long>(kCanonicalBits));
      throw Error(std::string("numerics check: this build of bitgrad computes other bits than the canonical ones on code path ") +
                  isa_name(active_isa()) + ": " + buf +
                  ". It was compiled with an option that changes floating-point results (-ffast-math, -Ofast, "
                  "-fassociative-math, -ffinite-math-only, -ffp-contract=fast, ... passed through CXX, a wrapper or CXXFLAGS) "
                  "or miscompiled; rebuild it with the project's own flags (numerics.md §1)");
    }
  });
}

}  // namespace bitgrad
