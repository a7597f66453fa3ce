// What this CPU and process offer: the code paths the hardware has (and BITGRAD_HIDE_ISA hides),
// the CPUs this process may run on, the model name. Below the kernels, so that io's hash dispatch
// and the instruments' manifest ask the same place the kernels do; nothing here changes a bit.
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "bitgrad/enum_names.hpp"
#include "bitgrad/error.hpp"
#include "bitgrad/runtime.hpp"

namespace bitgrad {
namespace {

int env_isa() {
  const char* e = std::getenv("BITGRAD_ISA");
  if (!e || !*e) return -1;
  Isa isa = parse_isa(e);
  if (!cpu_supports(isa)) throw Error(std::string("BITGRAD_ISA=") + e + ": " + isa_unavailable(isa));
  return static_cast<int>(isa);
}

constexpr EnumName<Isa> kIsas[] = {{Isa::scalar, "scalar"}, {Isa::avx2, "avx2"}, {Isa::avx512, "avx512"}};
}  // namespace

const char* isa_name(Isa isa) { return enum_name(kIsas, isa); }

Isa parse_isa(const std::string& name) {
  if (auto isa = enum_from_name(kIsas, name)) return *isa;
  throw Error("isa: unknown code path '" + name + "' (expected " + enum_names_list(kIsas) + ")");
}

namespace {
// BITGRAD_HIDE_ISA=avx512 (or avx2, which hides both): the library acts as if the CPU lacked
// that code path, so a test run on an AVX-512 machine also covers the CPUs without it (CI runs
// the kernel and contract tests so, docs/numerics.md §1). Read once: the answer never changes in
// a process. Bits do not depend on it (contract T8); only which paths are taken and compared.
int hidden_from() {
  static const int from = [] {
    const char* e = std::getenv("BITGRAD_HIDE_ISA");
    if (!e || !*e) return 3;
    const std::string v(e);
    if (v == "avx512") return static_cast<int>(Isa::avx512);
    if (v == "avx2") return static_cast<int>(Isa::avx2);
    throw Error("BITGRAD_HIDE_ISA=" + v + ": expected avx512 (hide AVX-512) or avx2 (hide AVX2 and AVX-512)");
  }();
  return from;
}

// what the hardware has, BITGRAD_HIDE_ISA aside
bool hardware_has(Isa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

}  // namespace

bool cpu_supports(Isa isa) { return static_cast<int>(isa) < hidden_from() && hardware_has(isa); }

std::string isa_unavailable(Isa isa) {
  const std::string name = isa_name(isa);
  if (hardware_has(isa)) {
    const char* hide = std::getenv("BITGRAD_HIDE_ISA");
    return name + " is hidden by BITGRAD_HIDE_ISA=" + (hide ? hide : "") + " (the library acts as if this CPU lacked it)";
  }
  return "this CPU does not support " + name;
}

Isa best_isa() {
  if (cpu_supports(Isa::avx512)) return Isa::avx512;
  if (cpu_supports(Isa::avx2)) return Isa::avx2;
  return Isa::scalar;
}

Isa default_isa() {
  const int e = env_isa();
  return e >= 0 ? static_cast<Isa>(e) : best_isa();
}

int default_num_threads() {
  if (const char* e = std::getenv("BITGRAD_THREADS"); e && *e) {
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (!end || *end || v < 1 || v > 4096)
      throw Error(std::string("BITGRAD_THREADS=") + e + ": expected a whole number from 1 to 4096");
    return static_cast<int>(v);
  }
  return available_cpus();
}

int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  unsigned h = std::thread::hardware_concurrency();
  return h ? static_cast<int>(h) : 1;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "unknown";
}

}  // namespace bitgrad
