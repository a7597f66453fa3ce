// A CNN with batchnorm layers through `bitgrad train`: the same bits at other
// thread counts and loader workers (T2, T3), with recomputation (T9: the running statistics are
// updated once per step), after a resume (T7: the running statistics are in the checkpoint), and
// a clear refusal of accumulate > 1 (T5 would not hold; numerics.md §31).
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

const char* kBnCnn = R"(
seed = 5
[data]
dataset = "synthetic"
samples = 256
test_samples = 64
shape = [2, 8, 8]
classes = 4
[model]
layers = [
  { type = "conv2d", out = 4, kernel = 3, padding = 1, bias = false },
  { type = "batchnorm" },
  { type = "relu" },
  { type = "maxpool2d", kernel = 2 },
  { type = "flatten" },
  { type = "linear", out = 16 },
  { type = "batchnorm", momentum = 0.2, eps = 1e-3 },
  { type = "relu" },
  { type = "linear", out = 4 },
]
[train]
batch_size = 64
epochs = 2
[optimizer]
type = "adam"
lr = 0.01
)";

TEST(BatchNormTrain, ThreadsWorkersRecomputeAndResumeKeepTheBits) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(8, 1, 0);
  const train::RunResult base = run_text(kBnCnn, o);
  ASSERT_EQ(base.steps, 8);
  for (auto [t, w] : {std::pair{2, 2}, std::pair{3, 0}}) {
    instruments::TrainOptions ot = options(8, t, w);
    const train::RunResult r = run_text(kBnCnn, ot);
    EXPECT_EQ(r.fingerprint.hex(), base.fingerprint.hex()) << "threads=" << t << " workers=" << w;
    EXPECT_EQ(r.test_loss, base.test_loss) << "threads=" << t;
  }
  for (const char* mode : {"blocks", "all"}) {
    const train::RunResult r = run_text(with_recompute(kBnCnn, mode), o);
    EXPECT_EQ(r.fingerprint.hex(), base.fingerprint.hex()) << "recompute=" << mode;
    EXPECT_EQ(r.test_loss, base.test_loss) << "recompute=" << mode << ": evaluation reads the running statistics";
  }
  instruments::TrainOptions part = options(5, 2, 0);
  part.checkpoint_every = 5;
  const std::string dir = train_into(kBnCnn, "bn_resume", part);
  EXPECT_EQ(run_text(kBnCnn, resume_options(dir, 8)).fingerprint.hex(), base.fingerprint.hex()) << "resumed at step 5";
}

TEST(BatchNormTrain, TheFloat64ShadowLeavesTheBitsAlone) {
  // the twin takes the run's parameters and buffers (widened) and trains beside it
  RuntimeGuard g;
  instruments::TrainOptions o = options(3, 1, 0);
  const std::string want = run_text(kBnCnn, o).fingerprint.hex();
  o.shadow = instruments::Shadow::f64;
  EXPECT_EQ(run_text(kBnCnn, o).fingerprint.hex(), want);
}

TEST(BatchNormTrain, AccumulateIsRefusedByName) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(2, 1, 0);
  o.accumulate = 2;
  EXPECT_THROW_MSG(run_text(kBnCnn, o), "accumulate = 2 with a batchnorm layer is not supported");
}

}  // namespace
}  // namespace bitgrad::test
