// Two trainings at once in one process, each in its own execution context at another thread
// count and code path, get the bits each gets alone (and the manifests show the settings they
// ran with), and neither waits on the other's node allocations. Also under TSan (make tsan).
#include <barrier>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "autograd/node.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

// A small MLP on the adder data (no dataset file needed), wide enough that its GEMMs and
// batch reductions split over several threads, with dropout so that random draws are in play.
std::string adder_mlp(int seed, int width) {
  return "seed = " + std::to_string(seed) + R"(
[data]
dataset = "adder"
samples = 2048
test_samples = 256
[model]
layers = [ { type = "linear", out = )" +
         std::to_string(width) + R"( }, { type = "relu" }, { type = "dropout", p = 0.1 }, { type = "linear", out = 1 } ]
[train]
batch_size = 256
epochs = 1
loss = "mse"
[optimizer]
type = "adam"
lr = 0.01
)";
}

struct Outcome {
  std::string fingerprint, code_path;
  int threads = 0;
  std::string error;
};

// One run in a context of its own: `threads` and `isa` for the context; the run inherits both.
Outcome run_in_context(const std::string& text, int threads, Isa isa) {
  Outcome o;
  try {
    ExecContext ctx(threads, isa);
    ExecScope scope(ctx);
    instruments::TrainOptions opt;
    const train::RunResult r = run_text(text, opt);
    o.fingerprint = r.fingerprint.hex();
    std::ifstream f(r.out_dir + "/manifest.json");
    const nlohmann::json m = nlohmann::json::parse(f);
    o.code_path = m.at("machine").at("code_path").get<std::string>();
    o.threads = m.at("run").at("threads").get<int>();
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

TEST(ConcurrentSessions, TwoTrainingsAtOnceGetTheBitsEachGetsAlone) {
  const std::string a = adder_mlp(3, 96), b = adder_mlp(4, 160);
  const Isa fast = best_isa();
  // alone, one after the other
  const Outcome a_alone = run_in_context(a, 1, Isa::scalar);
  const Outcome b_alone = run_in_context(b, 3, fast);
  ASSERT_EQ(a_alone.error, "");
  ASSERT_EQ(b_alone.error, "");
  EXPECT_NE(a_alone.fingerprint, b_alone.fingerprint) << "two different trainings";
  // at once, on two threads, twice over (the second round swaps which starts first)
  for (int round = 0; round < 2; ++round) {
    Outcome ra, rb;
    std::thread ta([&] { ra = run_in_context(a, 1, Isa::scalar); });
    std::thread tb([&] { rb = run_in_context(b, 3, fast); });
    if (round == 1) std::swap(ta, tb);
    ta.join();
    tb.join();
    ASSERT_EQ(ra.error, "");
    ASSERT_EQ(rb.error, "");
    EXPECT_EQ(ra.fingerprint, a_alone.fingerprint) << "round " << round;
    EXPECT_EQ(rb.fingerprint, b_alone.fingerprint) << "round " << round;
    EXPECT_EQ(ra.threads, 1);
    EXPECT_EQ(ra.code_path, "scalar");
    EXPECT_EQ(rb.threads, 3);
    EXPECT_EQ(rb.code_path, isa_name(fast));
  }
  // the contract itself: the same training at other settings gives the same bits (T2, T8)
  EXPECT_EQ(run_in_context(a, 3, fast).fingerprint, a_alone.fingerprint);
}

// Two trainings on two threads that live through two rounds: after the first (which fills each
// thread's node list), the second takes the node pool's shared lock not once, and both rounds
// give the bits of the trainings alone.
TEST(ConcurrentSessions, NeitherWaitsOnTheOthersNodeAllocations) {
  const std::string a = adder_mlp(5, 64), b = adder_mlp(6, 128);
  const Outcome a_alone = run_in_context(a, 1, best_isa());
  const Outcome b_alone = run_in_context(b, 2, best_isa());
  ASSERT_EQ(a_alone.error, "");
  ASSERT_EQ(b_alone.error, "");
  std::barrier sync(2);
  std::uint64_t before = 0, after = 0;
  Outcome got[2][2];
  auto work = [&](int id) {
    const std::string& text = id == 0 ? a : b;
    got[id][0] = run_in_context(text, id + 1, best_isa());
    sync.arrive_and_wait();
    if (id == 0) before = autograd::node_pool_locked_calls();
    sync.arrive_and_wait();
    got[id][1] = run_in_context(text, id + 1, best_isa());
    sync.arrive_and_wait();
    if (id == 0) after = autograd::node_pool_locked_calls();
  };
  std::thread ta(work, 0), tb(work, 1);
  ta.join();
  tb.join();
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(got[0][round].fingerprint, a_alone.fingerprint) << "round " << round << got[0][round].error;
    EXPECT_EQ(got[1][round].fingerprint, b_alone.fingerprint) << "round " << round << got[1][round].error;
  }
  EXPECT_EQ(after, before) << "a training took the node pool's shared lock while the other trained";
}

// A run leaves the caller's context as it found it, whatever thread count it asked for.
TEST(ConcurrentSessions, ARunLeavesTheCallersContextAlone) {
  RuntimeGuard g;
  set_num_threads(2);
  instruments::TrainOptions opt;
  opt.threads = 3;
  opt.steps = 2;
  const train::RunResult r = run_text(adder_mlp(1, 32), opt);
  EXPECT_EQ(r.steps, 2);
  EXPECT_EQ(num_threads(), 2);
}

}  // namespace
}  // namespace bitgrad::test
