#include "kernels/thread_pool.hpp"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::kern {
namespace {

thread_local bool t_in_parallel = false;

// the posted idle work; g_idle_busy serialises its slices (acquire/release hands its state on)
std::atomic<IdleWork*> g_idle{nullptr};
std::atomic<bool> g_idle_busy{false};

// Runs one slice if there is work and no other thread is in one; true if it ran one that
// left more to do.
bool try_idle_slice() {
  if (!g_idle.load(std::memory_order_acquire)) return false;
  // seq_cst: against take_back_idle_work's store-then-load (a Dekker pair)
  if (g_idle_busy.exchange(true, std::memory_order_seq_cst)) return false;
  IdleWork* w = g_idle.load(std::memory_order_seq_cst);
  bool more = false;
  if (w) {
    more = w->slice();
    if (!more) g_idle.store(nullptr, std::memory_order_release);
  }
  g_idle_busy.store(false, std::memory_order_release);
  return more;
}

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
  }
  ~Pool() {
    stop_.store(true);
    generation_.fetch_add(1);
    wake();
    for (auto& w : workers_) w.join();
  }
  // wakes blocked workers: a new region, idle work, or stop
  void wake() {
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
  }
  int threads() const { return threads_; }

  void run(int chunks, std::int64_t n, ChunkFn fn, void* ctx) {
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunks_ = chunks;
    errors_.assign(static_cast<std::size_t>(chunks), nullptr);
    // every worker acknowledges every job (idle ones too), so no worker can still be reading
    // this job's fields when the next one is posted
    remaining_.store(threads_ - 1);
    generation_.fetch_add(1, std::memory_order_release);
    wake();
    run_chunk(0);
    // wait for the others: idle work or spin briefly, then block
    for (int spin = 0; remaining_.load(std::memory_order_acquire) != 0; ++spin) {
      if (try_idle_slice()) {
        spin = 0;
      } else if (spin < 4000) {
        cpu_relax();
      } else {
        int r = remaining_.load(std::memory_order_acquire);
        if (r != 0) remaining_.wait(r, std::memory_order_acquire);
      }
    }
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  void run_chunk(int c) {
    std::int64_t b = n_ * c / chunks_, e = n_ * (c + 1) / chunks_;
    t_in_parallel = true;
    try {
      if (b < e) fn_(ctx_, b, e);
    } catch (...) {
      errors_[static_cast<std::size_t>(c)] = std::current_exception();
    }
    t_in_parallel = false;
  }

  void worker(int id) {
    // a new thread inherits its creator's MXCSR: whatever a fast-math library set there,
    // kernel threads round to nearest with gradual underflow (numerics.md §1)
    _mm_setcsr(_mm_getcsr() & ~kNonIeeeMxcsr);
    // the pool is built at generation 0: a job or stop posted before this thread runs is
    // still seen as new
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t g;
      int spin = 0;
      for (;;) {
        const std::uint64_t w = wake_.load(std::memory_order_acquire);
        if ((g = generation_.load(std::memory_order_acquire)) != seen) break;
        if (try_idle_slice()) {
          spin = 0;
        } else if (spin++ < 4000) {
          cpu_relax();
        } else if (!g_idle.load(std::memory_order_acquire)) {
          wake_.wait(w, std::memory_order_acquire);  // returns at once if anything was posted since w
        }
      }
      seen = g;
      if (stop_.load()) return;
      if (id < chunks_) run_chunk(id);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_all();
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0}, wake_{0};
  std::atomic<int> remaining_{0};
  std::atomic<bool> stop_{false};
  ChunkFn fn_ = nullptr;
  void* ctx_ = nullptr;
  std::int64_t n_ = 0;
  int chunks_ = 0;
  std::vector<std::exception_ptr> errors_;
};

std::mutex g_mu;  // one parallel region at a time (callers from several threads queue here)
Pool* g_pool = nullptr;
int g_threads = 0;
// written under g_mu, read by region_stats without it
std::atomic<std::uint64_t> g_split{0};
std::atomic<int> g_widest{1};

Pool& pool_locked() {
  if (!g_pool) {
    if (g_threads == 0) g_threads = default_num_threads();
    g_pool = new Pool(g_threads);
  }
  return *g_pool;
}

}  // namespace

int pool_threads() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_threads == 0) g_threads = default_num_threads();
  return g_threads;
}

void pool_resize(int threads) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_pool && g_pool->threads() == threads) return;
  delete g_pool;
  g_pool = nullptr;
  g_threads = threads;
}

RegionStats region_stats() { return {g_split.load(std::memory_order_relaxed), g_widest.load(std::memory_order_relaxed)}; }

void reset_region_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_split.store(0, std::memory_order_relaxed);
  g_widest.store(1, std::memory_order_relaxed);
}

void post_idle_work(IdleWork* w) {
  g_idle.store(w, std::memory_order_release);
  std::lock_guard<std::mutex> lock(g_mu);
  if (w && g_pool) g_pool->wake();
}

void finish_idle_work() {
  while (g_idle.load(std::memory_order_acquire)) {
    if (!try_idle_slice()) cpu_relax();  // another thread is in a slice, or it just ended
  }
}

void take_back_idle_work() {
  g_idle.store(nullptr, std::memory_order_seq_cst);
  // a slice that took the work before the store finishes it; one that takes the flag after it
  // finds no work (seq_cst on both sides: neither can miss the other's write)
  while (g_idle_busy.load(std::memory_order_seq_cst)) cpu_relax();
}

void parallel_chunks(std::int64_t n, std::int64_t grain, ChunkFn fn, void* ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (t_in_parallel) {
    fn(ctx, 0, n);
    return;
  }
  std::unique_lock<std::mutex> lock(g_mu, std::defer_lock);
  lock.lock();
  Pool& p = pool_locked();
  std::int64_t max_chunks = (n + grain - 1) / grain;
  int chunks = static_cast<int>(max_chunks < p.threads() ? max_chunks : p.threads());
  if (chunks <= 1) {
    lock.unlock();
    t_in_parallel = true;
    try {
      fn(ctx, 0, n);
    } catch (...) {
      t_in_parallel = false;
      throw;
    }
    t_in_parallel = false;
    return;
  }
  g_split.fetch_add(1, std::memory_order_relaxed);
  if (chunks > g_widest.load(std::memory_order_relaxed)) g_widest.store(chunks, std::memory_order_relaxed);
  p.run(chunks, n, fn, ctx);
}

}  // namespace bitgrad::kern
