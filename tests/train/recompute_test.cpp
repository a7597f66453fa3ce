// Contract T9: recomputing activations (`[model] recompute = "blocks"` or "all") gives the bits of
// keeping them — on the GPT with dropout, an MLP with dropout and a CNN with dropout, with
// threads, loader workers, micro-batches and resume across the setting — and keeps less.
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {
namespace {

// A small CNN on synthetic images: convolution, pooling and dropout in one segment under "blocks".
const char* kCnn = R"(
seed = 3
[data]
dataset = "synthetic"
samples = 256
test_samples = 64
shape = [2, 8, 8]
classes = 4
[model]
layers = [
  { type = "conv2d", out = 4, kernel = 3, padding = 1 },
  { type = "relu" },
  { type = "maxpool2d", kernel = 2 },
  { type = "dropout", p = 0.25 },
  { type = "conv2d", out = 6, kernel = 3 },
  { type = "tanh" },
  { type = "flatten" },
  { type = "linear", out = 4 },
]
[train]
batch_size = 64
epochs = 1
[optimizer]
type = "adam"
lr = 0.01
)";

TEST(Recompute, GivesTheBitsOfKeepingTheActivations) {
  RuntimeGuard g;
  const std::pair<const char*, std::string> models[] = {{"gpt", tiny_gpt()}, {"mlp", kMlp}, {"cnn", kCnn}};
  for (const auto& [name, cfg] : models) {
    instruments::TrainOptions o = options(4, 2, 0);
    const train::RunResult base = run_text(cfg, o);
    for (const char* mode : {"blocks", "all"}) {
      const std::string rc = with_recompute(cfg, mode);
      std::string log;
      const train::RunResult r = run_text(rc, o, &log);
      EXPECT_EQ(r.fingerprint.hex(), base.fingerprint.hex()) << name << " recompute=" << mode;
      EXPECT_EQ(r.last_loss, base.last_loss) << name << " recompute=" << mode;
      EXPECT_EQ(r.test_loss, base.test_loss) << name << " recompute=" << mode;
    }
    // with other threads, workers and micro-batches (T2, T3, T5 on top of T9)
    const std::string rc = with_recompute(cfg, "blocks");
    instruments::TrainOptions o2 = options(4, 3, 2);
    o2.accumulate = 2;
    EXPECT_EQ(run_text(rc, o2).fingerprint.hex(), base.fingerprint.hex()) << name << " threads 3, workers 2, accumulate 2";
  }
}

TEST(Recompute, ResumesAcrossTheSetting) {
  // the setting is not part of the configuration hash: a run may switch it when it resumes
  RuntimeGuard g;
  const std::string cfg = tiny_gpt();
  instruments::TrainOptions o = options(6, 2, 0);
  const std::string straight = run_text(cfg, o).fingerprint.hex();
  o.steps = 4;
  o.checkpoint_every = 2;
  const std::string dir = train_into(cfg, "recompute_resume", o);
  std::string log;
  instruments::TrainOptions r = resume_options(dir, 6);
  // resume reads the run's own resolved configuration; recompute comes from the run options' config
  EXPECT_EQ(run_text(with_recompute(cfg, "all"), r, &log).fingerprint.hex(), straight) << log;
  EXPECT_NE(log.find("resumed at step 4"), std::string::npos) << log;
}

TEST(Recompute, AnUnknownSettingIsAOneLineError) {
  EXPECT_THROW_MSG(train::parse_config(with_recompute(kMlp, "some"), "test.toml"), "test.toml:");
  EXPECT_THROW_MSG(train::parse_config(with_recompute(kMlp, "some"), "test.toml"), "recompute");
}

}  // namespace
}  // namespace bitgrad::test
