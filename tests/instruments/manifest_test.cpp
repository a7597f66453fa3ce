// Manifests: the machine part and the run part, data file hashes.
#include <nlohmann/json.hpp>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"
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
  r.kind = "train";
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

}  // namespace
}  // namespace bitgrad::test
