// Manifests: the machine part and the run part, data file hashes.
#include <nlohmann/json.hpp>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"
#include "instruments/manifest.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(Manifest, RunManifestHoldsTheRunAndHashesItsDataFiles) {
  const std::string dir = fresh_dir("manifest");
  io::make_dirs(dir);
  const std::string data = "x,y\n1,2\n3,4\n";
  io::write_file_atomic(dir + "/d.csv", data);
  Fingerprint fp;
  fp.add_bytes(data.data(), data.size());
  EXPECT_EQ(instruments::file_hash(dir + "/d.csv"), fp.digest().hex()) << "XXH3-128 of the bytes";
  instruments::RunInfo r;
  r.kind = instruments::RunKind::train;
  r.command = "bitgrad train x.toml";
  r.config_file = "x.toml";
  r.config_hash = "abc";
  r.seed = 42;
  r.threads = 3;
  r.workers = 2;
  r.accumulate = 4;
  r.perturbed = true;
  r.perturb_seed = 7;
  r.model = "Sequential(Linear(1, 1))";
  r.params = {{"0.weight", "[1, 1]"}};
  r.data_files = {dir + "/d.csv"};
  const auto j = nlohmann::json::parse(instruments::run_manifest_json(r));
  EXPECT_EQ(j["run"]["data"][dir + "/d.csv"], fp.digest().hex());
  EXPECT_EQ(j["run"]["perturb_order"], 7);
  EXPECT_EQ(j["run"]["accumulate"], 4);
  EXPECT_EQ(j["run"]["parameters"][0][0], "0.weight");
  EXPECT_EQ(j["bitgrad"]["version"], kVersion);
  EXPECT_EQ(j["machine"], nlohmann::json::parse(instruments::machine_manifest_json())["machine"]);
  r.data_files = {dir + "/missing.csv"};
  EXPECT_THROW(instruments::run_manifest_json(r), Error);
}

// kind, precision and trace are enums written by name (the same text as ever) and read back by
// name; a name this build does not know names the file and the key.
TEST(Manifest, EnumFieldsAreWrittenAndReadByName) {
  instruments::RunInfo r;
  EXPECT_EQ(r.kind, instruments::RunKind::train);
  EXPECT_EQ(r.precision, Precision::fp32);
  EXPECT_EQ(r.trace, instruments::TraceLevel::steps);
  const std::string plain = instruments::run_manifest_json(r);
  EXPECT_NE(plain.find("\"kind\": \"train\","), std::string::npos) << plain;
  EXPECT_NE(plain.find("\"precision\": \"fp32\","), std::string::npos);
  EXPECT_NE(plain.find("\"trace\": \"steps\","), std::string::npos);
  r.kind = instruments::RunKind::audit;
  r.precision = Precision::bf16;
  r.trace = instruments::TraceLevel::ops;
  const store::Json m = store::Json::parse(instruments::run_manifest_json(r));
  EXPECT_EQ(m["run"]["kind"], "audit");
  EXPECT_EQ(m["run"]["precision"], "bf16");
  EXPECT_EQ(m["run"]["trace"], "ops");
  EXPECT_EQ(instruments::manifest_kind(m, "report", "d/manifest.json"), instruments::RunKind::audit);
  EXPECT_EQ(instruments::manifest_precision(m, "report", "d/manifest.json"), Precision::bf16);
  EXPECT_EQ(instruments::manifest_trace(m, "report", "d/manifest.json"), instruments::TraceLevel::ops);
  for (const char* k : {"train", "audit", "sensitivity", "scaling"}) {
    const store::Json j = {{"run", {{"kind", k}}}};
    EXPECT_STREQ(instruments::to_string(instruments::manifest_kind(j, "report", "d/manifest.json")), k);
  }
  // written before precision and trace were recorded: fp32, steps
  const store::Json old = {{"run", {{"kind", "train"}}}};
  EXPECT_EQ(instruments::manifest_precision(old, "resume", "d/manifest.json"), Precision::fp32);
  EXPECT_EQ(instruments::manifest_trace(old, "resume", "d/manifest.json"), instruments::TraceLevel::steps);
  const store::Json bad = {{"run", {{"kind", "party"}, {"precision", "fp8"}, {"trace", "all"}}}};
  EXPECT_THROW_MSG(instruments::manifest_kind(bad, "report", "d/manifest.json"),
                   "report: d/manifest.json: run.kind: unknown run kind 'party'; expected train, audit, sensitivity or scaling");
  EXPECT_THROW_MSG(instruments::manifest_precision(bad, "report", "d/manifest.json"),
                   "report: d/manifest.json: run.precision: unknown precision 'fp8'; expected fp32, bf16 or fp16");
  EXPECT_THROW_MSG(instruments::manifest_trace(bad, "resume", "d/manifest.json"),
                   "resume: d/manifest.json: run.trace: unknown trace level 'all'; expected none, steps or ops");
  EXPECT_THROW_MSG(instruments::manifest_trace(store::Json{{"run", {{"trace", 3}}}}, "resume", "d/manifest.json"),
                   "resume: d/manifest.json: run.trace is 3, not a name");
}

}  // namespace
}  // namespace bitgrad::test
