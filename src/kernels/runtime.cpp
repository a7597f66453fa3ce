// The settings of the calling thread's execution context (code path, threads) and the check of the
// floating-point environment; what the CPU offers is platform/cpu.cpp's.
#include <string>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bitgrad/error.hpp"
#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad {

Isa active_isa() { return current_context().isa(); }

void set_isa(Isa isa) { current_context().set_isa(isa); }

int num_threads() { return current_context().threads(); }

void set_num_threads(int n) { current_context().set_threads(n); }

ThreadCountScope::ThreadCountScope(int n) : before_(num_threads()) {
  if (n > 0 && n != before_) set_num_threads(n);
}
ThreadCountScope::~ThreadCountScope() {
  if (num_threads() != before_) current_context().set_threads(before_);
}

IsaScope::IsaScope(Isa isa) : before_(active_isa()) { set_isa(isa); }
IsaScope::~IsaScope() { set_isa(before_); }

void check_fp_environment() {
  kern::require_ieee_fp();
  check_canonical_bits();
}

namespace kern {
void require_ieee_fp() {
#if defined(__x86_64__)
  const unsigned csr = _mm_getcsr();
  if (csr & kNonIeeeMxcsr) [[unlikely]] {
    const unsigned ftz = 1u << 15, daz = 1u << 6;
    throw Error("fp environment: " +
                std::string((csr & (ftz | daz)) ? "flush-to-zero or denormals-are-zero is on" : "the rounding mode is not round-to-nearest") +
                " in this thread (MXCSR=" + std::to_string(csr) +
                "); a library built with -ffast-math may have set it. bitgrad needs IEEE round-to-nearest with gradual underflow "
                "(numerics.md §1); clear it with _mm_setcsr(_mm_getcsr() & ~0xe040) or find the library that set it.");
  }
#endif
}
}  // namespace kern

}  // namespace bitgrad
