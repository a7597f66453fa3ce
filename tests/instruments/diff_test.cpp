// `bitgrad diff`: identical runs at different thread counts, a run whose reduction order was
// perturbed from a known step on, and the runs it must refuse to compare.
#include <nlohmann/json.hpp>
#include <regex>

#include "bitgrad/runtime.hpp"
#include "support/fashion.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

int diff(const std::string& a, const std::string& b, std::string& out, bool replay = true) {
  std::ostringstream os;
  instruments::DiffOptions o;
  o.replay = replay;
  const int rc = instruments::diff(a, b, o, os);
  out = os.str();
  return rc;
}

TEST(Diff, RunsAtDifferentThreadCountsAreIdentical) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  instruments::TrainOptions o = options(12, 1);
  const std::string a = train_into(kMlp, "diff_t1", o);
  o.threads = 3;
  o.workers = 2;
  o.out = fresh_dir("diff_t3");
  run_text(kMlp, o);
  std::string out;
  EXPECT_EQ(diff(a, o.out, out), 0) << out;
  EXPECT_NE(out.find("identical: 12 steps"), std::string::npos) << out;
  EXPECT_NE(out.find("run.threads: 1 | 3"), std::string::npos) << "the manifests' differences are listed\n" << out;
  EXPECT_NE(out.find("run.workers: 0 | 2"), std::string::npos) << out;
}

// Run B follows run A for 7 steps, then resumes with every reduction in another order: diff
// must name step 8, the first tensor that differs there, its first op, and the size.
TEST(Diff, APerturbedOrderIsFoundAtItsFirstStepTensorAndOp) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  instruments::TrainOptions o = options(12);
  o.trace = instruments::TraceLevel::ops;
  const std::string a = train_into(kMlp, "diff_a", o);
  o.steps = 7;
  o.threads = 2;
  const std::string b = train_into(kMlp, "diff_b", o);
  instruments::TrainOptions r = resume_options(b, 12);
  r.trace = instruments::TraceLevel::ops;
  r.perturb_order = 3;
  run_text(kMlp, r);

  // what diff must find, read from the traces independently
  const std::vector<std::string> ta = lines_of(a + "/trace.jsonl"), tb = lines_of(b + "/trace.jsonl");
  ASSERT_EQ(ta.size(), 12u);
  ASSERT_EQ(tb.size(), 12u);
  std::size_t first = 0;
  while (first < ta.size() && ta[first] == tb[first]) ++first;
  ASSERT_EQ(first, 7u) << "the first 7 steps are canonical in both runs";
  const nlohmann::json ra = nlohmann::json::parse(ta[first]), rb = nlohmann::json::parse(tb[first]);
  std::string tensor;
  if (ra["loss"] != rb["loss"]) {
    tensor = "the loss";
  } else {
    for (std::size_t k = 0; k < ra["grad"].size() && tensor.empty(); ++k)
      if (ra["grad"][k] != rb["grad"][k]) tensor = "the gradient of " + ra["grad"][k][0].get<std::string>();
  }
  ASSERT_FALSE(tensor.empty());

  auto ops_of_step_8 = [](const std::string& dir) {
    std::vector<std::string> v;
    for (const std::string& l : lines_of(dir + "/ops.jsonl"))
      if (l.rfind("{\"step\": 8,", 0) == 0) v.push_back(l);
    return v;
  };
  const std::vector<std::string> oa = ops_of_step_8(a), ob = ops_of_step_8(b);
  std::size_t first_op = 0;
  while (first_op < oa.size() && first_op < ob.size() && oa[first_op] == ob[first_op]) ++first_op;
  ASSERT_LT(first_op, oa.size());

  std::string out;
  EXPECT_EQ(diff(a, b, out), 1) << out;
  EXPECT_NE(out.find("(op " + std::to_string(first_op + 1) + " of the step)"), std::string::npos) << out;
  EXPECT_NE(out.find("first difference: step 8, " + tensor), std::string::npos) << out;
  EXPECT_NE(out.find("run.perturb_order: null | 3"), std::string::npos) << out;
  std::smatch m;
  EXPECT_TRUE(std::regex_search(out, m, std::regex("first op: (forward|backward) '[a-z_]+'.*, label .+, called at src/[a-z_/]+\\.cpp:[0-9]+")))
      << out;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("replayed: ([0-9]+) of ([0-9]+) elements differ; max \\|a - b\\| = ([^ ]+) .*max ([0-9]+) ulp")))
      << out;
  EXPECT_GT(std::stoll(m[1]), 0);
  EXPECT_GT(std::stod(m[3]), 0.0);
  EXPECT_GE(std::stoll(m[4]), 1);
  EXPECT_EQ(out.find("warning"), std::string::npos) << "the replays reproduce the traced bits\n" << out;
  // without replay, the same first step and tensor
  EXPECT_EQ(diff(a, b, out, false), 1);
  EXPECT_NE(out.find("first difference: step 8, " + tensor), std::string::npos) << out;
  EXPECT_EQ(out.find("replayed"), std::string::npos) << out;
}

// Run B trains 5 steps with a perturbed order, then resumes canonically: the first difference
// is at step 1, and its replay (from the step-0 checkpoint) must use the perturbed order of the
// segment that trained it, as the manifest's history records.
TEST(Diff, ReplaysAStepWithTheSettingsOfTheSegmentThatTrainedIt) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(10);
  const std::string a = train_into(kAdder, "diff_seg_a", o);
  o.steps = 5;
  o.perturb_order = 11;
  o.out = fresh_dir("diff_seg_b");
  run_text(kAdder, o);
  instruments::TrainOptions r = resume_options(o.out, 10);
  run_text(kAdder, r);
  const nlohmann::json m = nlohmann::json::parse(io::read_file(o.out + "/manifest.json"));
  ASSERT_EQ(m["history"].size(), 1u);
  EXPECT_EQ(m["history"][0]["run"]["perturb_order"], 11);
  EXPECT_EQ(m["run"]["resumed_at_step"], 5);
  EXPECT_TRUE(m["run"]["perturb_order"].is_null());
  std::string out;
  EXPECT_EQ(diff(a, o.out, out), 1) << out;
  EXPECT_NE(out.find("first difference: step 1, "), std::string::npos) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  std::smatch sm;
  ASSERT_TRUE(std::regex_search(out, sm, std::regex("replayed: ([0-9]+) of"))) << out;
  EXPECT_GT(std::stoll(sm[1]), 0) << out;
}

TEST(Diff, RefusesWhatCannotBeCompared) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(5);
  const std::string a = train_into(kAdder, "diff_x", o);
  std::string wider = kAdder;
  wider.replace(wider.find("{ type = \"linear\", out = 1 }"), 28,
                "{ type = \"linear\", out = 4 }, { type = \"relu\" }, { type = \"linear\", out = 1 }");
  o.out = fresh_dir("diff_y");
  run_text(wider, o);
  auto expect_error = [](const std::string& x, const std::string& y, const std::string& what) {
    std::string out;
    try {
      diff(x, y, out);
      ADD_FAILURE() << "expected an error: " << what << "\n" << out;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error(a, o.out, "train different models");
  expect_error(a, ::testing::TempDir(), "is not a bitgrad run directory");
  // a trace cut in the middle of a line
  o.out = fresh_dir("diff_z");
  run_text(kAdder, o);
  const std::string t = io::read_file(o.out + "/trace.jsonl");
  io::write_file_atomic(o.out + "/trace.jsonl", t.substr(0, t.size() - 40));
  expect_error(a, o.out, "trace.jsonl:5: the last line is incomplete");
  io::write_file_atomic(o.out + "/trace.jsonl", t.substr(0, t.size() / 2) + "\n");
  expect_error(a, o.out, "not a JSON record");
  io::write_file_atomic(o.out + "/trace.jsonl", "{\"step\": 1, \"loss\": 3}\n");
  expect_error(a, o.out, "trace.jsonl:1: not a step record");
  // a shorter run: the same as far as it goes, then a difference (exit 1), not an error
  io::write_file_atomic(o.out + "/trace.jsonl", t.substr(0, t.find('\n') + 1));
  std::string out;
  EXPECT_EQ(diff(a, o.out, out), 1);
  EXPECT_NE(out.find("identical over the 1 steps both traced"), std::string::npos) << out;
}

}  // namespace
}  // namespace bitgrad::test
