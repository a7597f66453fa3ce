// What `bitgrad train` records for the instruments: manifest.json, the step trace (and its
// equality across thread counts and a resume), the op trace, anomaly detection, gradient
// statistics, and the mark of an order-perturbed run.
#include <nlohmann/json.hpp>
#include <regex>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"
#include "support/fashion.hpp"
#include "instruments/trace.hpp"
#include "store/run_dir.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using json = nlohmann::json;

TEST(TrainInstruments, TheStepTraceHoldsEveryStepAndEqualsAcrossThreadsAndResume) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(25, 1);
  const std::string a = fresh_dir("trace_a");
  o.out = a;
  const train::RunResult ra = run_text(kAdder, o);
  const std::vector<std::string> ta = lines_of(a + "/trace.jsonl");
  ASSERT_EQ(ta.size(), 25u);
  for (std::size_t i = 0; i < ta.size(); ++i) {
    const json r = json::parse(ta[i]);
    EXPECT_EQ(r["step"].get<int>(), static_cast<int>(i) + 1);
    EXPECT_TRUE(std::regex_match(r["input"].get<std::string>(), std::regex("[0-9a-f]{32}")));
    EXPECT_TRUE(std::regex_match(r["loss"].get<std::string>(), std::regex("0x[0-9a-f]{8}")));
    ASSERT_EQ(r["grad"].size(), 2u);
    EXPECT_EQ(r["grad"][0][0], "0.weight");
    EXPECT_EQ(r["param"][1][0], "0.bias");
  }
  // the last record's parameter hashes are the fingerprints of the final parameters
  const json last = json::parse(ta.back());
  const float loss_bits_check = ra.last_loss;
  std::uint32_t bits;
  std::memcpy(&bits, &loss_bits_check, 4);
  EXPECT_EQ(last["loss"].get<std::string>(), instruments::hex32(bits));

  // 3 threads and 2 workers; and 9 steps + resume to 25: the same trace, byte for byte
  o.threads = 3;
  o.workers = 2;
  o.out = fresh_dir("trace_b");
  run_text(kAdder, o);
  EXPECT_EQ(io::read_file(o.out + "/trace.jsonl"), io::read_file(a + "/trace.jsonl"));
  o.steps = 9;
  o.checkpoint_every = 4;
  const std::string c = train_into(kAdder, "trace_c", o);
  instruments::TrainOptions r = resume_options(c, 25);
  run_text(kAdder, r);
  EXPECT_EQ(io::read_file(c + "/trace.jsonl"), io::read_file(a + "/trace.jsonl"));

  // --trace none writes none
  instruments::TrainOptions n;
  n.steps = 3;
  n.trace = instruments::TraceLevel::none;
  n.out = fresh_dir("trace_none");
  run_text(kAdder, n);
  EXPECT_FALSE(io::exists(n.out + "/trace.jsonl"));
  EXPECT_TRUE(io::exists(n.out + "/manifest.json"));
}

TEST(TrainInstruments, TheOpTraceNamesEveryOpWithItsLabelAndCallSite) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  instruments::TrainOptions o = options(2);
  o.trace = instruments::TraceLevel::ops;
  o.out = fresh_dir("ops");
  run_text(kMlp, o);
  const std::vector<std::string> lines = lines_of(o.out + "/ops.jsonl");
  ASSERT_FALSE(lines.empty());
  int fwd = 0, bwd = 0, step2 = 0;
  bool linear_labelled = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const json r = json::parse(lines[i]);
    const std::string phase = r["phase"];
    fwd += phase == "forward";
    bwd += phase == "backward";
    step2 += r["step"] == 2;
    EXPECT_TRUE(std::regex_match(r["hash"].get<std::string>(), std::regex("[0-9a-f]{32}"))) << lines[i];
    EXPECT_TRUE(std::regex_search(r["site"].get<std::string>(), std::regex("^src/.*\\.cpp:[0-9]+$"))) << lines[i];
    if (r["op"] == "linear" && r["label"] == "1:Linear(784, 64)") linear_labelled = true;
  }
  EXPECT_GT(fwd, 5);
  EXPECT_GT(bwd, 5);
  EXPECT_GT(step2, 0);
  EXPECT_TRUE(linear_labelled) << "Sequential labels its children with index and description";
}

// The op trace of a run resumed at an epoch's end (where the evaluation ran) equals the
// straight run's, byte for byte.
TEST(TrainInstruments, TheOpTraceSurvivesAResumeAtAnEpochEnd) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  o.steps = 45;  // 40 steps an epoch
  o.trace = instruments::TraceLevel::ops;
  o.out = fresh_dir("ops_straight");
  run_text(kAdder, o);
  const std::string straight = io::read_file(o.out + "/ops.jsonl");
  o.steps = 40;
  o.out = fresh_dir("ops_resumed");
  run_text(kAdder, o);
  instruments::TrainOptions r = resume_options(o.out, 45);
  r.trace = instruments::TraceLevel::ops;
  run_text(kAdder, r);
  EXPECT_EQ(io::read_file(o.out + "/ops.jsonl"), straight);
  EXPECT_NE(straight.find("{\"step\": 40, "), std::string::npos);
}

// Plain SGD with a huge learning rate on the adder: the weights overflow within a few steps.
const char* kDiverging = R"(
seed = 1
[data]
dataset = "adder"
samples = 4000
test_samples = 500
[model]
layers = [ { type = "linear", out = 8 }, { type = "relu" }, { type = "linear", out = 1 } ]
[train]
batch_size = 100
epochs = 3
loss = "mse"
[optimizer]
type = "sgd"
lr = 10.0
)";

TEST(TrainInstruments, AResumedRunKeepsItsTraceLevel) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(4);
  o.trace = instruments::TraceLevel::ops;
  const std::string dir = train_into(kAdder, "resume_ops", o);
  run_text(kAdder, resume_options(dir, 8));  // no --trace: the run's own level
  const std::string ops = io::read_file(dir + "/ops.jsonl");
  EXPECT_NE(ops.find("{\"step\": 8, "), std::string::npos) << "the op trace goes on after the resume";
  const store::Json m = store::RunDir::open(dir, "test").manifest();
  EXPECT_EQ(m["run"]["trace"], "ops");
  // a trace level this build does not know names the manifest and the key, and trains nothing
  std::string text = io::read_file(dir + "/manifest.json");
  const std::string ops_line = "\"trace\": \"ops\"";
  text.replace(text.find(ops_line), ops_line.size(), "\"trace\": \"all\"");
  io::write_file_atomic(dir + "/manifest.json", text);
  EXPECT_THROW_MSG(run_text(kAdder, resume_options(dir, 10)),
                   "resume: " + dir + "/manifest.json: run.trace: unknown trace level 'all'; expected none, steps or ops");
}

TEST(TrainInstruments, ADivergedRunWritesJsonItsOwnToolsRead) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  const train::RunResult r = run_text(kDiverging, o);
  ASSERT_FALSE(std::isfinite(r.last_loss));
  const std::string metrics = io::read_file(r.out_dir + "/metrics.jsonl");
  EXPECT_EQ(metrics.find("nan"), std::string::npos) << "a bare nan is not JSON";
  EXPECT_NE(metrics.find("\"loss\": \"NaN\""), std::string::npos) << metrics.substr(0, 2000);
  bool read_nan = false;
  for (const store::Json& m : store::RunDir::open(r.out_dir, "test").read_lines("metrics.jsonl"))
    if (m.contains("loss")) read_nan = read_nan || std::isnan(*store::json_number(m["loss"]));
  EXPECT_TRUE(read_nan);
  const std::string html = fresh_dir("diverged") + ".html";
  EXPECT_EQ(instruments::write_report({r.out_dir}, html).runs, 1);
}

TEST(TrainInstruments, AnomalyDetectionNamesTheFirstNonFiniteOpAndStep) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  const train::RunResult plain = run_text(kDiverging, o);
  EXPECT_FALSE(std::isfinite(plain.last_loss)) << "without detection the run goes on to a non-finite loss";
  o.detect_anomaly = true;
  try {
    run_text(kDiverging, o);
    FAIL() << "the anomaly must stop the run";
  } catch (const Error& e) {
    const std::string m = e.what();
    std::smatch s;
    ASSERT_TRUE(std::regex_search(m, s,
                                  std::regex("^anomaly at step ([0-9]+): the (output|gradient of input [0-9]+) of '([a-z_]+)' \\(label "
                                             "([^)]+\\)?)\\), called at (src/[a-z_/]+\\.cpp:[0-9]+), holds a non-finite value")))
        << m;
    EXPECT_GT(std::stoi(s[1]), 1);
    EXPECT_NE(s[4].str().find("Linear"), std::string::npos) << m;
  }
}

TEST(TrainInstruments, GradientStatisticsGoIntoTheMetrics) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(10);
  o.grad_stats_every = 4;
  o.out = fresh_dir("gstats");
  run_text(kAdder, o);
  int found = 0;
  for (const std::string& l : lines_of(o.out + "/metrics.jsonl")) {
    const json r = json::parse(l);
    if (!r.contains("grad_stats")) continue;
    EXPECT_EQ(r["step"].get<int>() % 4, 0);
    ++found;
    ASSERT_EQ(r["grad_stats"].size(), 2u);
    for (const auto& [name, s] : r["grad_stats"].items()) {
      const double norm = s["norm"], mean = s["mean"], mx = s["max_abs"];
      EXPECT_GT(norm, 0) << name;
      EXPECT_LE(mx, norm * (1 + 1e-12)) << name;
      EXPECT_LE(std::fabs(mean), mx) << name;
    }
  }
  EXPECT_EQ(found, 2);  // steps 4 and 8
}

TEST(TrainInstruments, TheManifestDescribesTheRunAndMarksPerturbedOrders) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(3, 2, 1);
  o.out = fresh_dir("manifest");
  const train::RunResult canonical = run_text(kAdder, o);
  const json m = json::parse(io::read_file(o.out + "/manifest.json"));
  EXPECT_EQ(m["bitgrad"]["numerics"], kNumericsVersion);
  EXPECT_EQ(m["run"]["kind"], "train");
  EXPECT_EQ(m["run"]["threads"], 2);
  EXPECT_EQ(m["run"]["workers"], 1);
  EXPECT_EQ(m["run"]["seed"], 1);
  EXPECT_TRUE(m["run"]["perturb_order"].is_null());
  EXPECT_EQ(m["run"]["config_hash"], train::config_hash(train::parse_config(kAdder, "test.toml")));
  EXPECT_EQ(m["run"]["parameters"], json::parse(R"([["0.weight", "[1, 10]"], ["0.bias", "[1]"]])"));
  EXPECT_EQ(m["machine"]["code_path"], isa_name(active_isa()));
  o.perturb_order = 9;
  o.out = fresh_dir("manifest_p");
  std::string log;
  const train::RunResult p = run_text(kAdder, o, &log);
  EXPECT_EQ(json::parse(io::read_file(o.out + "/manifest.json"))["run"]["perturb_order"], 9);
  EXPECT_NE(p.fingerprint.hex(), canonical.fingerprint.hex()) << "another order, other bits";
  o.threads = 3;
  o.workers = 0;
  o.out = fresh_dir("manifest_p3");
  EXPECT_EQ(run_text(kAdder, o).fingerprint.hex(), p.fingerprint.hex()) << "the same perturbed orders on any thread count";
  EXPECT_NE(log.find("--perturb-order 9: every reduction runs in a seeded random order"), std::string::npos) << log;
}

}  // namespace
}  // namespace bitgrad::test
