// A fixed pool of worker threads. parallel_for splits [0, n) into contiguous chunks, one
// per thread; each kernel computes every output element entirely inside one chunk, so
// the partition decides who computes an element, never how: results do not depend on it.
#pragma once

#include <cstdint>
#include <type_traits>

namespace bitgrad::kern {

using ChunkFn = void (*)(void* ctx, std::int64_t begin, std::int64_t end);

// Runs fn(ctx, b, e) over T = min(threads, ceil(n / grain)) contiguous chunks and waits.
// Nested calls run serially. An exception in a chunk is rethrown (the lowest chunk's).
void parallel_chunks(std::int64_t n, std::int64_t grain, ChunkFn fn, void* ctx);

template <class F>
void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
  using Fn = std::remove_reference_t<F>;
  parallel_chunks(
      n, grain, [](void* c, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(c))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Threads the next parallel_for may use (the runtime setting).
int pool_threads();
void pool_resize(int threads);

}  // namespace bitgrad::kern
