// One execution state per thread (src/platform/thread_state.hpp): what a thread's scopes set is
// invisible to another thread, and every scope puts back what it found, however they nest.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "bitgrad/autograd.hpp"
#include "bitgrad/runtime.hpp"
#include "ops/batch_stats.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
namespace {

// An exchange that is installed and read, never asked
struct IdleExchange : BatchStatsExchange {
  std::int64_t total() const override { return 1; }
  std::int64_t first() const override { return 0; }
  std::int64_t rows() const override { return 1; }
  void gather(const void*, std::int64_t, void*, const char*) override {}
};

TEST(ThreadState, ScopesOnOneThreadAreNotSeenOnAnother) {
  ExecContext ctx(1, Isa::scalar);
  ExecScope in_ctx(ctx);
  LabelScope outer("outer");
  NoGradGuard no_grad;
  IdleExchange exchange;
  BatchStatsScope stats(&exchange);
  ASSERT_EQ(current_label(), "outer");
  ASSERT_FALSE(grad_enabled());
  ASSERT_EQ(&current_context(), &ctx);
  std::string label = "unset";
  bool grad = false, other_context = false, no_exchange = false;
  std::thread t([&] {
    label = current_label();
    grad = grad_enabled();
    other_context = &current_context() != &ctx;
    no_exchange = batch_stats_exchange() == nullptr;
  });
  t.join();
  EXPECT_EQ(label, "");
  EXPECT_TRUE(grad);
  EXPECT_TRUE(other_context);
  EXPECT_TRUE(no_exchange);
}

TEST(ThreadState, EveryScopePutsBackWhatItFound) {
  const ThreadState before = thread_state();
  {
    LabelScope a("a");
    {
      LabelScope b("b");
      EXPECT_EQ(current_label(), "a/b");
      NoGradGuard g;
      {
        BatchStatsScope none(nullptr);
        EXPECT_EQ(batch_stats_exchange(), nullptr);
      }
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_EQ(current_label(), "a");
    EXPECT_TRUE(grad_enabled());
    ThreadCountScope threads(3);
    IsaScope isa(Isa::scalar);
    EXPECT_EQ(num_threads(), 3);
  }
  const ThreadState& now = thread_state();
  EXPECT_EQ(now.label, before.label);
  EXPECT_EQ(current_label(), "");
  EXPECT_EQ(now.grad_enabled, before.grad_enabled);
  EXPECT_EQ(now.backend, before.backend);
  EXPECT_EQ(now.batch_stats, before.batch_stats);
  EXPECT_EQ(now.budget, before.budget);
  EXPECT_EQ(now.recompute_depth, before.recompute_depth);
  EXPECT_EQ(now.suppress_forward, before.suppress_forward);
}

}  // namespace
}  // namespace bitgrad
