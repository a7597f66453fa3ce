// The thread pool: every index once, contiguous chunks, region statistics, exceptions, nesting, idle work.
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <stdexcept>
#include <vector>

#include "bitgrad/error.hpp"
#include "bitgrad/bitgrad.hpp"
#include "kernels/kernels.hpp"
#include "kernels/thread_pool.hpp"

#include <immintrin.h>
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  RuntimeGuard g;
  for (int t : thread_counts()) {
    set_num_threads(t);
    for (std::int64_t n : {0, 1, 5, 8, 1001}) {
      std::vector<int> hits(static_cast<std::size_t>(n), 0);
      kern::parallel_for(n, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
      });
      for (int h : hits) ASSERT_EQ(h, 1) << "threads=" << t << " n=" << n;
    }
  }
}

TEST(ThreadPool, GrainLimitsTheChunks) {
  RuntimeGuard g;
  set_num_threads(8);
  std::atomic<int> chunks{0};
  kern::parallel_for(100, 50, [&](std::int64_t, std::int64_t) { chunks++; });
  EXPECT_EQ(chunks.load(), 2);
}

TEST(ThreadPool, RegionStatsCountTheSplitRegions) {
  RuntimeGuard g;
  set_num_threads(4);
  kern::reset_region_stats();
  kern::parallel_for(100, 100, [](std::int64_t, std::int64_t) {});  // one chunk: not split
  EXPECT_EQ(kern::region_stats().split, 0u);
  EXPECT_EQ(kern::region_stats().widest, 1);
  kern::parallel_for(100, 50, [](std::int64_t, std::int64_t) {});
  kern::parallel_for(100, 1, [](std::int64_t, std::int64_t) {
    kern::parallel_for(100, 1, [](std::int64_t, std::int64_t) {});  // nested: serial, not counted
  });
  EXPECT_EQ(kern::region_stats().split, 2u);
  EXPECT_EQ(kern::region_stats().widest, 4);
  kern::reset_region_stats();
  EXPECT_EQ(kern::region_stats().split, 0u);
}

TEST(ThreadPool, ExceptionsPropagateAndThePoolSurvives) {
  RuntimeGuard g;
  set_num_threads(4);
  EXPECT_THROW(kern::parallel_for(100, 1, [&](std::int64_t b, std::int64_t) {
                 if (b > 0) throw std::runtime_error("chunk failed");
               }),
               std::runtime_error);
  std::atomic<std::int64_t> s{0};
  kern::parallel_for(100, 1, [&](std::int64_t b, std::int64_t e) { s += e - b; });
  EXPECT_EQ(s.load(), 100);
}

TEST(ThreadPool, NestedCallsRunSerially) {
  RuntimeGuard g;
  set_num_threads(3);
  std::atomic<std::int64_t> total{0};
  kern::parallel_for(6, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i)
      kern::parallel_for(10, 1, [&](std::int64_t bb, std::int64_t ee) { total += ee - bb; });
  });
  EXPECT_EQ(total.load(), 60);
  EXPECT_THROW(set_num_threads(0), Error);
}

// Idle work runs in order, one slice at a time, whoever runs it, while parallel regions run.
struct Counter final : kern::IdleWork {
  std::vector<int> seen;
  int next = 0, total = 0;
  bool slice() override {
    seen.push_back(next++);
    return next < total;
  }
};

TEST(ThreadPool, IdleWorkRunsInOrderBesideParallelRegions) {
  RuntimeGuard g;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    Counter c;
    c.total = 5000;
    kern::post_idle_work(&c);
    std::vector<double> v(1 << 16);
    for (int r = 0; r < 200; ++r)
      kern::parallel_for(static_cast<std::int64_t>(v.size()), 1024, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) v[static_cast<std::size_t>(i)] += 1.0;
      });
    kern::finish_idle_work();
    ASSERT_EQ(c.seen.size(), 5000u) << threads;
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(c.seen[static_cast<std::size_t>(i)], i);
    for (double x : v) ASSERT_EQ(x, 200.0);
  }
}

// Taken back, idle work runs no further slice: whoever was in one has finished it, and what
// is left is the caller's (the step tracer then hashes the rest on the kernel threads).
TEST(ThreadPool, IdleWorkTakenBackRunsNoMoreSlices) {
  RuntimeGuard g;
  for (int threads : {2, 3, 4}) {
    set_num_threads(threads);
    Counter c;
    c.total = 1 << 30;  // more than the regions' idle time can run
    kern::post_idle_work(&c);
    std::vector<double> v(1 << 16);
    auto regions = [&](int n) {
      for (int r = 0; r < n; ++r)
        kern::parallel_for(static_cast<std::int64_t>(v.size()), 1024, [&](std::int64_t b, std::int64_t e) {
          for (std::int64_t i = b; i < e; ++i) v[static_cast<std::size_t>(i)] += 1.0;
        });
    };
    regions(50);
    kern::take_back_idle_work();
    const std::size_t ran = c.seen.size();
    regions(50);
    EXPECT_EQ(c.seen.size(), ran) << threads;  // a slice after the take-back would append here
    for (std::size_t i = 0; i < c.seen.size(); ++i) ASSERT_EQ(c.seen[i], static_cast<int>(i));
    kern::finish_idle_work();  // nothing posted: returns at once
    EXPECT_EQ(c.seen.size(), ran);
  }
}

// A worker the system does not run (another process's threads on the cores; here it is held
// inside an idle slice) holds up no region: the caller claims the worker's chunk and runs it
// itself, over the same bounds. Before chunks were claimed, the region waited for the worker.
struct Holding final : kern::IdleWork {
  std::atomic<bool> entered{false}, release{false}, timed_out{false};
  bool slice() override {
    entered.store(true);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!release.load()) {
      if (std::chrono::steady_clock::now() > until) {
        timed_out.store(true);
        break;
      }
      std::this_thread::yield();
    }
    return false;
  }
};

TEST(ThreadPool, AWorkerThatDoesNotRunHoldsUpNoRegion) {
  RuntimeGuard g;
  set_num_threads(2);
  kern::parallel_for(2, 1, [](std::int64_t, std::int64_t) {});  // the worker has started
  Holding h;
  kern::post_idle_work(&h);
  while (!h.entered.load()) std::this_thread::yield();
  std::vector<std::pair<std::int64_t, std::int64_t>> bounds;
  std::vector<std::thread::id> who;
  kern::parallel_for(1001, 1, [&](std::int64_t b, std::int64_t e) {
    bounds.emplace_back(b, e);  // one thread runs both chunks, in turn
    who.push_back(std::this_thread::get_id());
  });
  const bool waited = h.timed_out.load();
  h.release.store(true);
  kern::finish_idle_work();
  EXPECT_FALSE(waited) << "the region waited for the held worker";
  ASSERT_EQ(bounds.size(), 2u);
  EXPECT_EQ(bounds[0], std::make_pair(std::int64_t{0}, std::int64_t{500}));
  EXPECT_EQ(bounds[1], std::make_pair(std::int64_t{500}, std::int64_t{1001}));
  for (const auto& id : who) EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace bitgrad::test

// The floating-point environment (numerics.md §1): kernel threads round to nearest with
// gradual underflow whatever their creator had, and a calling thread with flush-to-zero or
// another rounding mode is refused with a clear error rather than computing other bits.
namespace bitgrad::test {
namespace {

struct MxcsrRestore {
  unsigned saved = _mm_getcsr();
  ~MxcsrRestore() { _mm_setcsr(saved); }
};

TEST(FpEnvironment, KernelThreadsClearFlushToZeroInheritedFromTheirCreator) {
  RuntimeGuard g;
  MxcsrRestore restore;
  set_num_threads(1);
  _mm_setcsr(_mm_getcsr() | kern::kNonIeeeMxcsr);  // what a fast-math library does
  set_num_threads(4);
  kern::parallel_for(4, 1, [](std::int64_t, std::int64_t) {});  // the workers start now, inheriting this MXCSR
  _mm_setcsr(restore.saved);
  std::vector<unsigned> csr(4, 0xffffffffu);
  kern::parallel_for(4, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) csr[static_cast<std::size_t>(i)] = _mm_getcsr();
  });
  for (unsigned c : csr) EXPECT_EQ(c & kern::kNonIeeeMxcsr, 0u) << std::hex << c;
}

TEST(FpEnvironment, AThreadWithFlushToZeroOrAnotherRoundingIsRefused) {
  MxcsrRestore restore;
  const Tensor a = Tensor::ones(Shape{3}), b = Tensor::ones(Shape{3});
  _mm_setcsr(restore.saved | (1u << 15));  // flush-to-zero
  EXPECT_THROW_MSG(add(a, b), "flush-to-zero or denormals-are-zero is on in this thread");
  _mm_setcsr(restore.saved | (1u << 13));  // round down
  EXPECT_THROW_MSG(add(a, b), "the rounding mode is not round-to-nearest");
  _mm_setcsr(restore.saved);
  EXPECT_EQ(add(a, b).to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

}  // namespace
}  // namespace bitgrad::test
