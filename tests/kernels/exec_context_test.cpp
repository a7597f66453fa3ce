// Execution contexts (bitgrad/runtime.hpp, src/kernels/backend.hpp): each has its own pool, code
// path and perturbation state; scopes nest and restore; two contexts run kernels side by side
// on other threads with the bits each gets alone.
#include <thread>
#include <vector>

#include "bitgrad/bitgrad.hpp"
#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"
#include "kernels/thread_pool.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

// C = A B through the calling thread's context, on shapes that split over several threads
std::vector<float> gemm_on_context(std::int64_t M, std::int64_t N, std::int64_t K, std::uint64_t seed) {
  const std::vector<float> a = random_vec<float>(static_cast<std::size_t>(M * K), seed);
  const std::vector<float> b = random_vec<float>(static_cast<std::size_t>(K * N), seed + 1);
  std::vector<float> c(static_cast<std::size_t>(M * N));
  kern::GemmArgs<float> g;
  g.M = M, g.N = N, g.K = K, g.A = a.data(), g.rsa = K, g.csa = 1, g.B = b.data(), g.rsb = N, g.csb = 1, g.C = c.data(), g.ldc = N;
  kern::active<float>().gemm(g);
  return c;
}

TEST(ExecContext, ScopesNestAndRestoreTheCallersContext) {
  ExecContext& outer = current_context();
  const int outer_threads = num_threads();
  const Isa outer_isa = active_isa();
  ExecContext a(3, Isa::scalar);
  EXPECT_EQ(a.device(), Device::cpu);
  EXPECT_STREQ(device_name(a.device()), "cpu");
  {
    ExecScope sa(a);
    EXPECT_EQ(&current_context(), &a);
    EXPECT_EQ(num_threads(), 3);
    EXPECT_EQ(active_isa(), Isa::scalar);
    ExecContext b(2, best_isa());
    {
      ExecScope sb(b);
      EXPECT_EQ(&current_context(), &b);
      set_num_threads(5);  // acts on b only
      EXPECT_EQ(b.threads(), 5);
    }
    EXPECT_EQ(&current_context(), &a);
    EXPECT_EQ(num_threads(), 3);
  }
  EXPECT_EQ(&current_context(), &outer);
  EXPECT_EQ(num_threads(), outer_threads);
  EXPECT_EQ(active_isa(), outer_isa);
}

TEST(ExecContext, RefusesACodePathTheCpuLacksAndZeroThreads) {
  for (Isa i : {Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(i)) {
      EXPECT_THROW(ExecContext(1, i), Error) << isa_name(i);
    }
  }
  ExecContext c(1, Isa::scalar);
  EXPECT_THROW(c.set_threads(0), Error);
}

TEST(ExecContext, PerturbationStaysInItsContext) {
  ExecContext a(1, best_isa()), b(1, best_isa());
  ExecScope sa(a);
  kern::set_perturbation(true, 7);
  EXPECT_TRUE(kern::perturbation_active());
  {
    ExecScope sb(b);
    EXPECT_FALSE(kern::perturbation_active());
    EXPECT_EQ(&kern::active<float>(), &kern::table<float>(best_isa()));
  }
  EXPECT_EQ(&kern::active<float>(), &kern::perturbed_table_f32());
  kern::set_perturbation(false);
  EXPECT_EQ(&kern::active<float>(), &kern::table<float>(best_isa()));
}

// Two threads, each in its own context (threads 1 and 3, scalar and the best code path), run the
// same GEMMs at once: each gets the bits of the scalar reference alone, and each context's pool
// shows regions as wide as its own thread count, never the other's.
TEST(ExecContext, TwoContextsRunSideBySideWithTheirOwnPoolsAndBits) {
  const std::int64_t M = 67, N = 129, K = 77;
  std::vector<float> want;
  {
    ExecContext ref(1, Isa::scalar);
    ExecScope s(ref);
    want = gemm_on_context(M, N, K, 11);
  }
  struct Result {
    std::vector<std::vector<float>> got;
    kern::RegionStats stats;
  };
  auto work = [&](int threads, Isa isa, Result& r) {
    ExecContext ctx(threads, isa);
    ExecScope s(ctx);
    kern::reset_region_stats();
    for (int rep = 0; rep < 20; ++rep) r.got.push_back(gemm_on_context(M, N, K, 11));
    r.stats = kern::region_stats();
  };
  Result one, three;
  std::thread t1(work, 1, Isa::scalar, std::ref(one));
  std::thread t3(work, 3, best_isa(), std::ref(three));
  t1.join();
  t3.join();
  for (const auto& g : one.got) EXPECT_TRUE(bitwise_equal(want, g)) << "threads=1 scalar";
  for (const auto& g : three.got) EXPECT_TRUE(bitwise_equal(want, g)) << "threads=3 " << isa_name(best_isa());
  EXPECT_EQ(one.stats.split, 0u) << "a 1-thread context never splits a region";
  EXPECT_EQ(three.stats.widest, 3) << "the 3-thread context split its GEMMs over its own 3 threads";
}

// Idle work posted to one context's pool is run by that pool and taken back from it.
TEST(ExecContext, IdleWorkBelongsToItsContext) {
  struct Count final : kern::IdleWork {
    int left = 50, ran = 0;
    bool slice() override { return ++ran, --left > 0; }
  } w;
  ExecContext a(2, best_isa());
  kern::post_idle_work(a.backend(), &w);
  {
    ExecScope s(a);
    kern::finish_idle_work();
  }
  EXPECT_EQ(w.ran, 50);
  EXPECT_EQ(w.left, 0);
}

}  // namespace
}  // namespace bitgrad::test
