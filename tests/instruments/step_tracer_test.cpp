// The step tracer writes the same trace.jsonl in each of its modes (its own thread, idle-time
// slices on the kernel threads, inline) and at any thread count: who hashes cannot matter.
#include <algorithm>

#include "bitgrad/runtime.hpp"
#include "support/fashion.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "instruments/step_tracer.hpp"

namespace bitgrad::test {
namespace {

std::string trace_with(const std::string& text, instruments::StepTracer::Mode mode, int threads, int steps) {
  ThreadCountScope thread_count(threads);
  const train::Config cfg = train::parse_config(text, "test.toml");
  train::Session session(cfg, train::train_dataset(cfg), nullptr, 0);
  const std::string path = fresh_dir("tracer") + ".jsonl";
  {
    instruments::StepTracer tracer(store::JsonLinesWriter(path), mode);
    session.set_before_update([&tracer] { tracer.wait(); });
    for (int s = 0; s < steps; ++s) tracer.submit(s, session, session.step(s));
  }
  return io::read_file(path);
}

TEST(StepTracer, EveryModeAndThreadCountWritesTheSameTrace) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  using M = instruments::StepTracer::Mode;
  const std::string want = trace_with(kMlp, M::inline_, 1, 12);
  EXPECT_EQ(std::count(want.begin(), want.end(), '\n'), 12);
  for (int threads : {1, 2, 3})
    for (M m : {M::thread, M::idle, M::inline_})
      EXPECT_EQ(trace_with(kMlp, m, threads, 12), want) << instruments::StepTracer::mode_name(m) << ", threads " << threads;
}

}  // namespace
}  // namespace bitgrad::test
