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

// A region's chunks are claimed, not assigned: the caller and the workers take the next
// unclaimed chunk of the posted job until none is left, then the caller waits for the chunks
// others took. A worker the system has not scheduled yet (another process's threads on the
// cores) holds up nothing: the caller runs its chunks itself. Who runs a chunk never changes
// what it computes (thread_pool.hpp).
class Pool {
 public:
  Pool(PoolState* state, int threads) : state_(state), threads_(threads) {
    if (threads_ < 1 || static_cast<std::uint64_t>(threads_) > kChunkMask)
      throw Error("thread pool: expected 1 to " + std::to_string(kChunkMask) + " threads, got " + std::to_string(threads_));
    try {
      for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker(); });
    } catch (const std::system_error& e) {  // the system's limit on threads: an error, not an abort
      const std::size_t started = workers_.size() + 1;
      stop_workers();
      throw Error("thread pool: started " + std::to_string(started) + " of " + std::to_string(threads) + " threads (" + e.what() +
                  "): the system allows fewer; use fewer threads (set_num_threads, --threads)");
    }
  }
  ~Pool() { stop_workers(); }
  // wakes blocked workers: a new region, idle work, or stop
  void wake() {
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
  }
  int threads() const { return threads_; }

  void run(int chunks, std::int64_t n, ChunkFn fn, void* ctx) {
    // the fields are rewritten only here, once every chunk of the last job has finished: a
    // worker reads them only after claiming a chunk of the job they belong to
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunks_ = chunks;
    errors_.assign(static_cast<std::size_t>(chunks), nullptr);
    pending_.store(chunks, std::memory_order_relaxed);
    generation_ = next_gen(generation_);
    // chunk 0 is the caller's: the job is posted with it claimed
    job_.store(job_word(generation_, chunks, 1), std::memory_order_release);
    wake();
    run_chunk(0);
    for (int c; (c = claim(generation_)) >= 0;) run_chunk(c);
    // wait for the chunks the workers took: idle work or spin briefly, then block
    for (int spin = 0;; ++spin) {
      const int p = pending_.load(std::memory_order_acquire);
      if (p == 0) break;
      if (try_idle_slice(*state_)) {
        spin = 0;
      } else if (spin < 4000) {
        cpu_relax();
      } else {
        pending_.wait(p, std::memory_order_acquire);
      }
    }
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  // the posted job in one word: its generation, its number of chunks, the next unclaimed one
  static constexpr int kChunkBits = 12;  // chunks <= threads <= 1024
  static constexpr std::uint64_t kChunkMask = (std::uint64_t{1} << kChunkBits) - 1;
  // generations count modulo 2^40: a worker would have to sleep through 2^40 jobs to mistake one
  static constexpr std::uint64_t kGenMask = (std::uint64_t{1} << (64 - 2 * kChunkBits)) - 1;
  static std::uint64_t next_gen(std::uint64_t g) { return (g + 1) & kGenMask; }
  static std::uint64_t job_word(std::uint64_t gen, int chunks, int next) {
    return (gen << (2 * kChunkBits)) | (static_cast<std::uint64_t>(chunks) << kChunkBits) | static_cast<std::uint64_t>(next);
  }
  static std::uint64_t gen_of(std::uint64_t w) { return w >> (2 * kChunkBits); }
  static int chunks_of(std::uint64_t w) { return static_cast<int>((w >> kChunkBits) & kChunkMask); }
  static int next_of(std::uint64_t w) { return static_cast<int>(w & kChunkMask); }

  // The next unclaimed chunk of generation `gen`'s job, claimed, or -1 when none is left (or
  // the job is no longer that generation's). acquire on success: the job's fields, written
  // before it was posted, are visible.
  int claim(std::uint64_t gen) {
    std::uint64_t w = job_.load(std::memory_order_acquire);
    while (gen_of(w) == gen && next_of(w) < chunks_of(w)) {
      if (job_.compare_exchange_weak(w, w + 1, std::memory_order_acquire, std::memory_order_acquire)) return next_of(w);
    }
    return -1;
  }

  void run_chunk(int c) {
    std::int64_t b = n_ * c / chunks_, e = n_ * (c + 1) / chunks_;
    thread_state().in_parallel = true;
    try {
      if (b < e) fn_(ctx_, b, e);
    } catch (...) {
      errors_[static_cast<std::size_t>(c)] = std::current_exception();
    }
    thread_state().in_parallel = false;
    // release: the chunk's results (and error) before the caller returns
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
  }

  void stop_workers() {
    stop_.store(true);
    generation_ = next_gen(generation_);
    job_.store(job_word(generation_, 0, 0), std::memory_order_release);  // a new generation, nothing to claim
    wake();
    for (auto& w : workers_) w.join();
  }

  void worker() {
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
        if ((g = gen_of(job_.load(std::memory_order_acquire))) != seen) break;
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
      for (int c; (c = claim(g)) >= 0;) run_chunk(c);
    }
  }

  PoolState* state_;
  int threads_;
  std::vector<std::thread> workers_;
  std::uint64_t generation_ = 0;  // the posted job's generation (the caller's, under PoolState::mu)
  std::atomic<std::uint64_t> job_{0}, wake_{0};
  std::atomic<int> pending_{0};  // chunks of the posted job not yet finished
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
