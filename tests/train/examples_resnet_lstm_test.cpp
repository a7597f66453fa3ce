// The ResNet and LSTM examples stay valid and keep their promise on a few steps (the full runs
// and their numbers are in README.md): examples/fashion_resnet.toml (resblocks with batch norm,
// augmentation) and examples/fortunes_lstm.toml (a character LSTM) train with the same bits at
// other thread and loader-worker counts, and the LSTM's run samples the same text at every thread
// count.
#include <unistd.h>

#include <cmath>

#include "bitgrad/infer.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::string example_text(const std::string& name) { return io::read_file(std::string(BITGRAD_SOURCE_DIR) + "/examples/" + name); }

TEST(ResnetLstmExamples, FashionResnetStepsKeepTheirBits) {
  RuntimeGuard g;
  const std::string text = example_text("fashion_resnet.toml");
  const train::RunResult base = run_text(text, options(2, 1, 0));
  ASSERT_EQ(base.steps, 2);
  EXPECT_TRUE(std::isfinite(base.last_loss));
  EXPECT_EQ(run_text(text, options(2, 2, 2)).fingerprint.hex(), base.fingerprint.hex()) << "threads 2, workers 2";
}

TEST(ResnetLstmExamples, FortunesLstmStepsKeepTheirBitsAndSample) {
  if (::access("/usr/share/games/fortunes", R_OK)) GTEST_SKIP() << "fortunes is not installed (apt-get install fortunes)";
  RuntimeGuard g;
  const std::string text = example_text("fortunes_lstm.toml");
  instruments::TrainOptions o = options(3, 1, 0);
  const std::string dir = train_into(text, "lstm_example", o);
  const train::RunResult again = run_text(text, options(3, 2, 2));
  EXPECT_EQ(run_text(text, options(3, 1, 0)).fingerprint.hex(), again.fingerprint.hex()) << "threads 2, workers 2";
  infer::SampleOptions s;
  s.prompt = "The ";
  s.tokens = 24;
  s.temperature = 0.8;
  s.seed = 1;
  s.threads = 1;
  const infer::SampleResult want = infer::sample(dir, s);
  EXPECT_EQ(want.text.substr(0, 4), "The ");
  EXPECT_EQ(want.tokens.size(), 24u);
  EXPECT_EQ(want.step, 3);
  s.threads = 2;
  EXPECT_EQ(infer::sample(dir, s).text, want.text) << "threads 2";
}

}  // namespace
}  // namespace bitgrad::test
