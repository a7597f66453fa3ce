// `bitgrad audit`: the 2017 adder experiment (7 runs, batch 10000, 1000 steps) across thread
// and worker counts gives all-zero error matrices; a setting outside the contract (micro-batches
// that are not whole canonical blocks) shows up as nonzero entries.
#include <bit>
#include <nlohmann/json.hpp>
#include <regex>

#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using json = nlohmann::json;

TEST(Audit, TheAdderExperimentGivesSevenBySevenZeroMatrices) {
  RuntimeGuard g;
  const train::Config cfg = train::load_config(std::string(BITGRAD_SOURCE_DIR) + "/examples/adder.toml");
  instruments::AuditOptions o;
  o.runs = 7;
  o.threads = {1, 2, 3};
  o.workers = {0, 2};
  o.out = fresh_dir("audit_adder");
  std::ostringstream out;
  EXPECT_EQ(instruments::audit(cfg, o, out), 0) << out.str();
  const std::string text = out.str();
  // five printed matrices of seven rows of seven "=" (the same bits)
  const std::regex same_row("\\[?\\[=( =){6}\\]\\]?\n");
  EXPECT_EQ(std::distance(std::sregex_iterator(text.begin(), text.end(), same_row), std::sregex_iterator()), 5 * 7) << text;
  for (const char* m : {"predictions", "loss", "weight_gradients", "bias_gradients", "optimizer_state"})
    EXPECT_NE(text.find(std::string("\n") + m + " (total absolute difference between runs; = the same bits):\n"), std::string::npos) << m;
  EXPECT_NE(text.find("all bitwise equal: 7 runs"), std::string::npos) << text;

  const json j = json::parse(io::read_file(o.out + "/audit.json"));
  EXPECT_TRUE(j["all_zero"].get<bool>());
  EXPECT_EQ(j["evaluation_batch"], 10000);
  ASSERT_EQ(j["runs"].size(), 7u);
  const int threads[] = {1, 2, 3, 1, 2, 3, 1}, workers[] = {0, 0, 0, 2, 2, 2, 0};
  for (std::size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(j["runs"][i]["threads"], threads[i]) << i;
    EXPECT_EQ(j["runs"][i]["workers"], workers[i]) << i;
    EXPECT_EQ(j["runs"][i]["fingerprint"], j["runs"][0]["fingerprint"]) << i;
  }
  for (const auto& [name, mat] : j["matrices"].items()) {
    ASSERT_EQ(mat.size(), 7u) << name;
    for (const auto& row : mat) {
      ASSERT_EQ(row.size(), 7u) << name;
      for (const auto& v : row) EXPECT_EQ(v.get<double>(), 0.0) << name;
    }
    for (const auto& row : j["bitwise_equal"][name])
      for (const auto& v : row) EXPECT_TRUE(v.get<bool>()) << name;
  }
  EXPECT_EQ(json::parse(io::read_file(o.out + "/manifest.json"))["run"]["kind"], "audit");
  std::ostringstream again;
  EXPECT_THROW(instruments::audit(cfg, o, again), Error) << "an audit is not written over";
}

TEST(Audit, MicroBatchesOutsideTheContractShowNonzeroEntries) {
  RuntimeGuard g;
  train::Config cfg = train::parse_config(kAdder, "adder.toml");
  instruments::AuditOptions o;
  o.threads = {1, 2};
  o.accumulate = {1, 5};  // 5 micro-batches of 20 samples: not whole 32-sample blocks
  o.steps = 20;
  o.out = fresh_dir("audit_acc");
  std::ostringstream out;
  EXPECT_EQ(instruments::audit(cfg, o, out), 1) << out.str();
  const json j = json::parse(io::read_file(o.out + "/audit.json"));
  EXPECT_FALSE(j["all_zero"].get<bool>());
  ASSERT_EQ(j["runs"].size(), 4u);  // one per combination: threads vary fastest
  EXPECT_EQ(j["runs"][2]["accumulate"], 5);
  const json& w = j["matrices"]["weight_gradients"];
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) {
      const bool same_accumulate = (a < 2) == (b < 2);
      if (same_accumulate)
        EXPECT_EQ(w[a][b].get<double>(), 0.0) << a << " vs " << b << ": thread counts change nothing";
      else
        EXPECT_GT(w[a][b].get<double>(), 0.0) << a << " vs " << b;
    }
  EXPECT_NE(out.str().find("note: accumulate 5 gives micro-batches of 20 samples"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("NOT all equal: 4 runs"), std::string::npos) << out.str();
  // differences as small as a few ulps print as numbers (%.3g), never as zeros
  EXPECT_EQ(out.str().find(" 0.0"), std::string::npos) << out.str();
  EXPECT_FALSE(j["bitwise_equal"]["weight_gradients"][0][2].get<bool>());
}

TEST(Audit, EqualityIsDecidedByBits) {
  // audit compares the fingerprints of the quantities, not their values
  const float nan1 = std::bit_cast<float>(0x7fc00001u), nan2 = std::bit_cast<float>(0x7fc00002u);
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return fingerprint(Tensor::from<float>(a, Shape{static_cast<std::int64_t>(a.size())})) ==
           fingerprint(Tensor::from<float>(b, Shape{static_cast<std::int64_t>(b.size())}));
  };
  EXPECT_FALSE(bits_equal({0.0f}, {-0.0f})) << "+0 and -0 are other bits";
  EXPECT_TRUE(bits_equal({nan1}, {nan1})) << "the same NaN is the same bits";
  EXPECT_FALSE(bits_equal({nan1}, {nan2}));
}

TEST(Audit, RefusesEmptyOrSingleRunAudits) {
  train::Config cfg = train::parse_config(kAdder, "adder.toml");
  instruments::AuditOptions o;
  o.out = fresh_dir("audit_bad");
  std::ostringstream out;
  EXPECT_THROW(instruments::audit(cfg, o, out), Error) << "one combination and no --runs: nothing to compare";
  o.threads.clear();
  EXPECT_THROW(instruments::audit(cfg, o, out), Error);
  o.threads = {1};
  o.accumulate = {3};  // the batch of 100 does not split into 3: say so, not "2 runs"
  EXPECT_THROW_MSG(instruments::audit(cfg, o, out), "batch size 100 is not divisible by accumulate 3");
}

TEST(Audit, NeverWritesOverARun) {
  instruments::TrainOptions t = options(2);
  t.out = fresh_dir("audit_over_run");
  run_text(kAdder, t);
  const std::string manifest = io::read_file(t.out + "/manifest.json");
  train::Config cfg = train::parse_config(kAdder, "adder.toml");
  instruments::AuditOptions o;
  o.out = t.out;
  o.threads = {1, 2};
  o.steps = 2;
  std::ostringstream out;
  EXPECT_THROW_MSG(instruments::audit(cfg, o, out), "already holds a run; choose another --out");
  instruments::SensitivityOptions so;
  so.out = t.out;
  so.steps = 2;
  EXPECT_THROW_MSG(instruments::sensitivity(cfg, so, out), "already holds a run; choose another --out");
  EXPECT_EQ(io::read_file(t.out + "/manifest.json"), manifest) << "the run's manifest is untouched";
  // and a run never goes where a study is
  o.out = fresh_dir("audit_then_train");
  instruments::audit(cfg, o, out);
  t.out = o.out;
  EXPECT_THROW_MSG(run_text(kAdder, t), "already holds an audit");
}

}  // namespace
}  // namespace bitgrad::test
