#include "kernels/thread_pool.hpp"

#include <atomic>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bitgrad/error.hpp"
#include "bitgrad/runtime.hpp"
#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad::kern {

class Pool;

// One context's pool and what goes with it.
struct PoolState {
  Backend* owner = nullptr;
  std::mutex mu;  // one parallel region at a time (callers from several threads queue here)
  Pool* pool = nullptr;
  int threads = 0;  // 0: not yet resolved (default_num_threads() on first use)
  // the posted idle work; idle_busy serialises its slices (acquire/release hands its state on)
  std::atomic<IdleWork*> idle{nullptr};
  std::atomic<bool> idle_busy{false};
  // written under mu, read by region_stats without it
  std::atomic<std::uint64_t> split{0};
  std::atomic<int> widest{1};
  ~PoolState();
};

namespace {


// Runs one slice if there is work and no other thread is in one; true if it ran one that
// left more to do.
bool try_idle_slice(PoolState& ps) {
  if (!ps.idle.load(std::memory_order_acquire)) return false;
  // seq_cst: against take_back_idle_work's store-then-load (a Dekker pair)
  if (ps.idle_busy.exchange(true, std::memory_order_seq_cst)) return false;
  IdleWork* w = ps.idle.load(std::memory_order_seq_cst);
  bool more = false;
  if (w) {
    more = w->slice();
    if (!more) ps.idle.store(nullptr, std::memory_order_release);
  }
  ps.idle_busy.store(false, std::memory_order_release);
  return more;
}

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

class Pool {
 public:
  Pool(PoolState* state, int threads) : state_(state), threads_(threads) {
    try {
      for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
    } catch (const std::system_error& e) {  // the system's limit on threads: an error, not an abort
      const std::size_t started = workers_.size() + 1;
      stop_.store(true);
      generation_.fetch_add(1);
      wake();
      for (auto& w : workers_) w.join();
      throw Error("thread pool: started " + std::to_string(started) + " of " + std::to_string(threads) + " threads (" + e.what() +
                  "): the system allows fewer; use fewer threads (set_num_threads, --threads)");
    }
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
      if (try_idle_slice(*state_)) {
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
    thread_state().in_parallel = true;
    try {
      if (b < e) fn_(ctx_, b, e);
    } catch (...) {
      errors_[static_cast<std::size_t>(c)] = std::current_exception();
    }
    thread_state().in_parallel = false;
  }

  void worker(int id) {
    // a new thread inherits its creator's MXCSR: whatever a fast-math library set there,
    // kernel threads round to nearest with gradual underflow (numerics.md §1)
    _mm_setcsr(_mm_getcsr() & ~kNonIeeeMxcsr);
    // a chunk that dispatches a kernel uses this pool's context
    bind_thread(state_->owner);
    // the pool is built at generation 0: a job or stop posted before this thread runs is
    // still seen as new
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t g;
      int spin = 0;
      for (;;) {
        const std::uint64_t w = wake_.load(std::memory_order_acquire);
        if ((g = generation_.load(std::memory_order_acquire)) != seen) break;
        if (try_idle_slice(*state_)) {
          spin = 0;
        } else if (spin++ < 4000) {
          cpu_relax();
        } else if (!state_->idle.load(std::memory_order_acquire)) {
          wake_.wait(w, std::memory_order_acquire);  // returns at once if anything was posted since w
        }
      }
      seen = g;
      if (stop_.load()) return;
      if (id < chunks_) run_chunk(id);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_all();
    }
  }

  PoolState* state_;
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

namespace {

Pool& pool_locked(PoolState& ps) {
  if (!ps.pool) {
    if (ps.threads == 0) ps.threads = default_num_threads();
    ps.pool = new Pool(&ps, ps.threads);
  }
  return *ps.pool;
}

PoolState& current_pool() { return *current_backend().pool; }

}  // namespace

PoolState::~PoolState() { delete pool; }

PoolState* make_pool_state(Backend* owner, int threads) {
  auto* p = new PoolState;
  p->owner = owner;
  p->threads = threads > 0 ? threads : 0;
  return p;
}
void destroy_pool_state(PoolState* p) { delete p; }

int pool_threads(PoolState& ps) {
  std::lock_guard<std::mutex> lock(ps.mu);
  if (ps.threads == 0) ps.threads = default_num_threads();
  return ps.threads;
}

void pool_resize(PoolState& ps, int threads) {
  std::lock_guard<std::mutex> lock(ps.mu);
  if (ps.pool && ps.pool->threads() == threads) return;
  delete ps.pool;
  ps.pool = nullptr;
  ps.threads = threads;
}

int pool_threads() { return pool_threads(current_pool()); }
bool in_parallel_region() { return thread_state().in_parallel; }
void pool_resize(int threads) { pool_resize(current_pool(), threads); }

RegionStats region_stats() {
  PoolState& ps = current_pool();
  return {ps.split.load(std::memory_order_relaxed), ps.widest.load(std::memory_order_relaxed)};
}

void reset_region_stats() {
  PoolState& ps = current_pool();
  std::lock_guard<std::mutex> lock(ps.mu);
  ps.split.store(0, std::memory_order_relaxed);
  ps.widest.store(1, std::memory_order_relaxed);
}

void post_idle_work(IdleWork* w) { post_idle_work(current_backend(), w); }
void post_idle_work(Backend& b, IdleWork* w) {
  PoolState& ps = *b.pool;
  ps.idle.store(w, std::memory_order_release);
  std::lock_guard<std::mutex> lock(ps.mu);
  if (w && ps.pool) ps.pool->wake();
}

void finish_idle_work() {
  PoolState& ps = current_pool();
  while (ps.idle.load(std::memory_order_acquire)) {
    if (!try_idle_slice(ps)) cpu_relax();  // another thread is in a slice, or it just ended
  }
}

void take_back_idle_work() { take_back_idle_work(current_backend()); }
void take_back_idle_work(Backend& b) {
  PoolState& ps = *b.pool;
  ps.idle.store(nullptr, std::memory_order_seq_cst);
  // a slice that took the work before the store finishes it; one that takes the flag after it
  // finds no work (seq_cst on both sides: neither can miss the other's write)
  while (ps.idle_busy.load(std::memory_order_seq_cst)) cpu_relax();
}

void parallel_chunks(std::int64_t n, std::int64_t grain, ChunkFn fn, void* ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (thread_state().in_parallel) {
    fn(ctx, 0, n);
    return;
  }
  PoolState& ps = current_pool();
  std::unique_lock<std::mutex> lock(ps.mu, std::defer_lock);
  lock.lock();
  Pool& p = pool_locked(ps);
  std::int64_t max_chunks = (n + grain - 1) / grain;
  int chunks = static_cast<int>(max_chunks < p.threads() ? max_chunks : p.threads());
  if (chunks <= 1) {
    lock.unlock();
    thread_state().in_parallel = true;
    try {
      fn(ctx, 0, n);
    } catch (...) {
      thread_state().in_parallel = false;
      throw;
    }
    thread_state().in_parallel = false;
    return;
  }
  ps.split.fetch_add(1, std::memory_order_relaxed);
  if (chunks > ps.widest.load(std::memory_order_relaxed)) ps.widest.store(chunks, std::memory_order_relaxed);
  p.run(chunks, n, fn, ctx);
}

}  // namespace bitgrad::kern
