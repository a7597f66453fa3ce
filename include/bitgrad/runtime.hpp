// Where and how kernels run: the execution context (device, code path, thread pool, order
// perturbation). None of it can change a result (the canonical orders are functions of the
// shapes only); it changes speed, and perturbation is the one opt-in exception (numerics §19).
//   BITGRAD_ISA=scalar|avx2|avx512   force the default code path (default: the best the CPU has)
//   BITGRAD_THREADS=N                threads of the default context (default: the CPUs this process may use)
#pragma once

#include <memory>
#include <string>

#include "bitgrad/device.hpp"

namespace bitgrad {

enum class Isa { scalar, avx2, avx512 };
const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // throws on an unknown name
bool cpu_supports(Isa isa);
// Why cpu_supports(isa) is false, for an error: the CPU lacks it, or BITGRAD_HIDE_ISA hides it.
std::string isa_unavailable(Isa isa);
Isa best_isa();
Isa default_isa();  // BITGRAD_ISA, or the best the CPU has

namespace kern {
struct Backend;  // the kernel side of a context (src/kernels/backend.hpp)
}

// An execution context: one device, its kernel tables for one code path, its own thread pool,
// and its order-perturbation state. Kernels dispatch through the context of the calling thread
// (the innermost ExecScope, or the process's default context), so two contexts in one process
// run side by side at different thread counts and code paths, each with the bits it would get
// alone. A context may be entered by several threads; its pool runs one parallel region at a
// time, and perturbation (numerics §19) is meant for a context that one thread uses.
class ExecContext {
 public:
  // threads <= 0: the default thread count (BITGRAD_THREADS or the CPUs of this process);
  // throws if the CPU lacks `isa`.
  explicit ExecContext(int threads = 0, Isa isa = default_isa());
  ~ExecContext();
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;

  Device device() const;
  Isa isa() const;
  void set_isa(Isa isa);  // throws if the CPU lacks it; only between kernels
  int threads() const;
  void set_threads(int n);  // n >= 1; only between kernels
  kern::Backend& backend() const { return *backend_; }
  // shared with whoever must outlive the context's last use, e.g. idle work posted to its pool
  const std::shared_ptr<kern::Backend>& backend_ptr() const { return backend_; }

 private:
  std::shared_ptr<kern::Backend> backend_;
};

// Makes `ctx` this thread's context until the scope ends (scopes nest).
class ExecScope {
 public:
  explicit ExecScope(ExecContext& ctx);
  ~ExecScope();
  ExecScope(const ExecScope&) = delete;
  ExecScope& operator=(const ExecScope&) = delete;

 private:
  kern::Backend* before_;
};
// This thread's context: the innermost ExecScope's, or the default context.
ExecContext& current_context();
ExecContext& default_context();

// The settings below act on current_context().

Isa active_isa();
void set_isa(Isa isa);  // throws if the CPU lacks it

int num_threads();
void set_num_threads(int n);  // n >= 1
int default_num_threads();  // BITGRAD_THREADS or the CPUs of this process
// The one way to change the thread count for a while: sets n (n <= 0: leaves it) and
// restores the count it found when the scope ends.
class ThreadCountScope {
 public:
  explicit ThreadCountScope(int n = 0);
  ~ThreadCountScope();
  ThreadCountScope(const ThreadCountScope&) = delete;
  ThreadCountScope& operator=(const ThreadCountScope&) = delete;

 private:
  int before_;
};
// The same for the code path.
class IsaScope {
 public:
  explicit IsaScope(Isa isa);
  ~IsaScope();
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  Isa before_;
};
int available_cpus();         // the CPUs this process may run on

// Throws if the floating-point environment is not IEEE default (round to nearest, no
// flush-to-zero, no denormals-are-zero): a library built with fast-math can set those.
// Also checks, once per process, the build's own numerics (check_canonical_bits).
void check_fp_environment();
// The FNV-1a 64 hash of a short canonical computation on the active code path (the same on every
// correct build and path); check_canonical_bits() throws, once per process, naming the cause when
// it is not the canonical value (a build with value-changing options, a miscompile).
std::uint64_t canonical_bits_hash();
void check_canonical_bits();
std::string cpu_model();

}  // namespace bitgrad
