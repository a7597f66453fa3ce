// Runtime settings: code path (ISA) and thread count. Neither can change a result (the
// canonical orders are functions of shapes only); they change speed.
//   BITGRAD_ISA=scalar|avx2|avx512   force a code path (default: the best the CPU has)
//   BITGRAD_THREADS=N                threads for kernels (default: the CPUs this process may use)
#pragma once

#include <string>

namespace bitgrad {

enum class Isa { scalar, avx2, avx512 };

const char* isa_name(Isa isa);
Isa parse_isa(const std::string& name);  // throws on an unknown name
bool cpu_supports(Isa isa);
Isa best_isa();
Isa active_isa();
void set_isa(Isa isa);  // throws if the CPU lacks it

int num_threads();
void set_num_threads(int n);  // n >= 1
int default_num_threads();
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
};    // BITGRAD_THREADS or the CPUs of this process
int available_cpus();         // the CPUs this process may run on

// Throws if the floating-point environment is not IEEE default (round to nearest, no
// flush-to-zero, no denormals-are-zero): a library built with fast-math can set those.
void check_fp_environment();
std::string cpu_model();

}  // namespace bitgrad
