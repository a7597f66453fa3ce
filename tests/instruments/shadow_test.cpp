// --shadow f64: a float64 twin of the run (numerics.md §26). It leaves the run's bits alone, its
// distance is in every step's metrics record, it is the f64 run of the same thing (tiny distance
// for f32, larger for bf16), it measures from the resumed state after a resume, and ops traces
// do not see it.
#include <cmath>

#include <nlohmann/json.hpp>

#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {
namespace {

struct ShadowLine {
  double distance = -1, loss = 0, run_loss = 0;
  int params = 0;
};
std::vector<ShadowLine> shadow_lines(const std::string& dir) {
  std::vector<ShadowLine> out;
  for (const std::string& l : lines_of(dir + "/metrics.jsonl")) {
    const auto j = nlohmann::json::parse(l);
    if (!j.contains("loss")) continue;
    ShadowLine s;
    s.run_loss = j["loss"].get<double>();
    if (j.contains("shadow")) {
      s.distance = j["shadow"]["distance"].get<double>();
      s.loss = j["shadow"]["loss"].get<double>();
      s.params = static_cast<int>(j["shadow"]["params"].size());
    }
    out.push_back(s);
  }
  return out;
}

TEST(Shadow, RecordsTheDistanceToAFloat64TwinAndChangesNoBit) {
  RuntimeGuard g;
  const std::string cfg = tiny_gpt();  // with dropout: the twin draws the run's masks
  instruments::TrainOptions o = options(6, 2, 0);
  const std::string plain = run_text(cfg, o).fingerprint.hex();
  o.shadow = instruments::Shadow::f64;
  o.out = fresh_dir("shadow32");
  std::string log;
  EXPECT_EQ(run_text(cfg, o, &log).fingerprint.hex(), plain) << "the twin must not touch the run";
  EXPECT_NE(log.find("float64 shadow"), std::string::npos) << log;
  const std::vector<ShadowLine> f32 = shadow_lines(o.out);
  ASSERT_EQ(f32.size(), 6u);
  for (const ShadowLine& s : f32) {
    EXPECT_GT(s.distance, 0) << "f32 rounding moves the run off its f64 twin";
    EXPECT_LT(s.distance, 1e-5) << "the twin is the same training in f64 (same batches, masks, schedule)";
    EXPECT_NEAR(s.loss, s.run_loss, 1e-4);
    EXPECT_EQ(s.params, 29);  // the tiny GPT: 2 embeddings, 2 blocks of 12, the final norm's 2, the head
  }
  o.out = fresh_dir("shadow_again");
  run_text(cfg, o);  // the same run again: the distances repeat exactly
  const std::vector<ShadowLine> again = shadow_lines(o.out);
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i].distance, f32[i].distance);
  // bf16: the rounding of the low precision is far larger than f32's
  std::string bf = cfg;
  bf.insert(bf.find("[train]\n") + 8, "precision = \"bf16\"\n");
  o.out = fresh_dir("shadowbf");
  run_text(bf, o);
  const std::vector<ShadowLine> b16 = shadow_lines(o.out);
  ASSERT_EQ(b16.size(), 6u);
  EXPECT_GT(b16.back().distance, 20 * f32.back().distance);
}

TEST(Shadow, AfterAResumeMeasuresFromTheResumedState) {
  RuntimeGuard g;
  const std::string cfg = tiny_gpt();
  instruments::TrainOptions o = options(3, 2, 0);
  o.checkpoint_every = 3;
  const std::string dir = train_into(cfg, "shadow_resume", o);
  instruments::TrainOptions r = resume_options(dir, 6);
  r.shadow = instruments::Shadow::f64;
  run_text(cfg, r);
  const std::vector<ShadowLine> s = shadow_lines(dir);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_LT(s[2].distance, 0) << "steps before the resume had no shadow";
  EXPECT_GT(s[3].distance, 0);
  EXPECT_LT(s[3].distance, 1e-6) << "one step from a common state";
}

TEST(Shadow, OpTracesDoNotSeeTheTwinAndBadKindsAreRefused) {
  RuntimeGuard g;
  const std::string cfg = tiny_gpt();
  instruments::TrainOptions o = options(2, 1, 0);
  o.trace = instruments::TraceLevel::ops;
  o.out = fresh_dir("ops_plain");
  run_text(cfg, o);
  const std::size_t plain = lines_of(o.out + "/ops.jsonl").size();
  o.shadow = instruments::Shadow::f64;
  o.out = fresh_dir("ops_shadow");
  run_text(cfg, o);
  EXPECT_EQ(lines_of(o.out + "/ops.jsonl").size(), plain);
  EXPECT_THROW_MSG(instruments::parse_shadow("f32"), "--shadow takes f64");
}

}  // namespace
}  // namespace bitgrad::test
