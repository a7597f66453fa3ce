// A fixed pool of worker threads per execution context. parallel_for splits [0, n) into
// contiguous chunks, at most one per thread of the calling thread's context, which the caller
// and the workers claim in turn (a worker that is not running leaves its chunk to the caller);
// each kernel computes every output element entirely inside one chunk, so the partition decides
// who computes an element, never how: results depend neither on it nor on who runs a chunk.
// Two contexts' pools run side by side.
#pragma once

#include <cstdint>
#include <type_traits>

namespace bitgrad::kern {

using ChunkFn = void (*)(void* ctx, std::int64_t begin, std::int64_t end);

struct Backend;
struct PoolState;
// A context's pool state (its threads start on first use); destroy_pool_state is in backend.hpp.
PoolState* make_pool_state(Backend* owner, int threads);  // threads <= 0: default_num_threads()
int pool_threads(PoolState& p);
void pool_resize(PoolState& p, int threads);

// Runs fn(ctx, b, e) over T = min(threads, ceil(n / grain)) contiguous chunks on the calling
// thread's context and waits. Nested calls run serially. An exception in a chunk is rethrown
// (the lowest chunk's).
void parallel_chunks(std::int64_t n, std::int64_t grain, ChunkFn fn, void* ctx);

template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
  using Fn = std::remove_reference_t<F>;
  parallel_chunks(
      n, grain, [](void* c, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(c))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Work done in idle time: slices run by pool workers between parallel regions and by the
// caller while it waits for a region's other chunks, one slice at a time and in order (a
// slice may continue a sequential computation such as a hash stream). Never a kernel's work:
// what it computes must not depend on who runs a slice or when.
class IdleWork {
 public:
  virtual ~IdleWork() = default;
  // One short piece (microseconds: a region waits for at most one); false when done. Must not
  // throw or call parallel_for.
  virtual bool slice() = 0;
};
// Idle work belongs to the calling thread's context (its pool runs the slices).
// Posts `w` (at most one at a time; it must outlive its slices), or clears with nullptr.
void post_idle_work(IdleWork* w);
void post_idle_work(Backend& b, IdleWork* w);
// Runs the posted work's remaining slices on this thread, then clears it.
void finish_idle_work();
// Clears the posted work and returns once no slice of it runs any more, leaving what remains
// to the caller (who may then finish it with parallel_for).
void take_back_idle_work();
void take_back_idle_work(Backend& b);

// Threads the next parallel_for may use (the calling thread's context).
int pool_threads();
// Whether the calling thread runs a chunk of a parallel region (a nested parallel_for then runs
// serially): a kernel may then skip work that only pays with more threads.
bool in_parallel_region();
void pool_resize(int threads);

// What the calling thread's context's parallel regions since the last reset did, so that a
// test can prove a kernel was
// split over the threads rather than trust its shapes to exceed the grains.
struct RegionStats {
  std::uint64_t split = 0;  // regions run on more than one chunk
  int widest = 1;           // the most chunks of one region
};
RegionStats region_stats();
void reset_region_stats();

}  // namespace bitgrad::kern
