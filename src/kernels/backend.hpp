// The kernel side of an execution context (bitgrad::ExecContext): what the dispatch path reads.
// A Backend owns the resolved kernel tables of its device and code path, its thread pool and
// its order-perturbation state; nothing process-wide and mutable sits between an op and its
// kernel. The calling thread's backend is the innermost ExecScope's (a thread-local pointer),
// or the default context's; a pool's workers run with their own context's backend.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::kern {

struct PoolState;  // the context's thread pool (thread_pool.cpp)
void destroy_pool_state(PoolState* p);
struct PoolStateDeleter {
  void operator()(PoolState* p) const { destroy_pool_state(p); }
};

struct Backend {
  Backend(ExecContext* owner, int threads, Isa isa);
  ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  ExecContext* owner;
  Device device = Device::cpu;
  // the tables kernels dispatch through: the perturbed ones while perturbation is on, else a
  // substitute f32 table if one is installed (benchmarks), else the code path's own. Atomic so
  // that a setting changed between kernels is seen without a data race by other threads
  // entering the context; relaxed, since a change is only allowed while no kernel runs.
  std::atomic<const Table<float>*> f32{nullptr};
  std::atomic<const Table<double>*> f64{nullptr};
  std::atomic<Isa> isa{Isa::scalar};
  const Table<float>* substitute = nullptr;
  // order perturbation (numerics §19): the seed, the step and the count of reducing calls in it
  struct Perturb {
    bool on = false;
    std::uint64_t seed = 0, step = 0, call = 0;
  } perturb;
  std::unique_ptr<PoolState, PoolStateDeleter> pool;

  // recomputes f32 / f64 from isa, substitute and perturb
  void resolve();
  void set_isa(Isa i);
};

// The calling thread's backend.
Backend& current_backend();
// Used by the pool: makes `b` this thread's backend (worker threads, at their start).
void bind_thread(Backend* b);

}  // namespace bitgrad::kern
