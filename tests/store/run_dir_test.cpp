// The run directory: the line format of its JSON records, resume's cut of the records after a
// step (kept bytes unchanged; damaged records refused), studies and the default names.
#include <unistd.h>

#include <limits>

#include "bitgrad/io.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "store/run_dir.hpp"
#include "store/study_dir.hpp"

namespace bitgrad::test {
namespace {

using store::Json;

TEST(RunDir, JsonLinesKeepTheirFormat) {
  const Json r = {{"step", 3}, {"loss", 0.1f}, {"lr", 0.05}, {"name", "a\"b"}, {"grad", Json::array({Json::array({"w", "00ff"})})}};
  EXPECT_EQ(store::json_line(r), "{\"step\": 3, \"loss\": 0.100000001, \"lr\": 0.05, \"name\": \"a\\\"b\", \"grad\": [[\"w\", \"00ff\"]]}\n");
  const Json e = {{"step", 1}, {"test_accuracy", 0.8673}, {"nested", {{"x", 1.5}}}};
  EXPECT_EQ(store::json_line(e, store::LineFormat{{{"test_accuracy", "%.6f"}}}),
            "{\"step\": 1, \"test_accuracy\": 0.867300, \"nested\": {\"x\": 1.5}}\n");
  // a line always parses back to the same values
  EXPECT_EQ(Json::parse(store::json_line(r)).at("grad"), r.at("grad"));
}

TEST(RunDir, ResumeCutsRecordsAfterTheCheckpointAndKeepsTheRest) {
  const std::string d = fresh_dir("rundir");
  io::make_dirs(d);
  const std::string metrics = "{\"step\": 1, \"loss\": 2.5}\n{\"step\": 2,\"loss\":2.25}\n{\"step\": 3, \"loss\": 2}\n";
  io::write_file_atomic(d + "/metrics.jsonl", metrics);
  io::write_file_atomic(d + "/trace.jsonl", "{\"step\": 1}\n{\"step\": 10}\n");
  const store::RunDir dir = store::RunDir::resume(d);
  dir.truncate_after(2);
  EXPECT_EQ(io::read_file(d + "/metrics.jsonl"), "{\"step\": 1, \"loss\": 2.5}\n{\"step\": 2,\"loss\":2.25}\n");
  EXPECT_EQ(io::read_file(d + "/trace.jsonl"), "{\"step\": 1}\n");
  EXPECT_FALSE(dir.has("ops.jsonl"));

  io::write_file_atomic(d + "/metrics.jsonl", "{\"step\": 1}\n{\"step\": \"two\"}\n");
  EXPECT_THROW_MSG(dir.truncate_after(1), "without an integer \"step\"");
  // half a line a kill left is of a later step: it goes
  io::write_file_atomic(d + "/metrics.jsonl", "{\"step\": 1}\n{\"step\": 2");
  dir.truncate_after(1);
  EXPECT_EQ(io::read_file(d + "/metrics.jsonl"), "{\"step\": 1}\n");
  // with the sizes a checkpoint recorded: cut exactly there, and refuse what does not fit
  io::write_file_atomic(d + "/metrics.jsonl", "{\"step\": 1}\n{\"step\": 2}\n{\"step\": 3, \"lo");
  io::write_file_atomic(d + "/trace.jsonl", "{\"step\": 1}\n{\"step\": 2}\n");
  EXPECT_THROW_MSG(dir.truncate_after(2, {{"metrics.jsonl", 24}, {"trace.jsonl", 40}}), "trace.jsonl was cut short");
  EXPECT_THROW_MSG(dir.truncate_after(2, {{"metrics.jsonl", 23}}), "metrics.jsonl was changed");
  EXPECT_THROW_MSG(dir.truncate_after(1, {{"metrics.jsonl", 24}}), "metrics.jsonl was changed");
  EXPECT_THROW_MSG(dir.truncate_after(2, {{"ops.jsonl", 10}}), "ops.jsonl is missing");
  dir.truncate_after(2, {{"metrics.jsonl", 24}, {"trace.jsonl", 24}});
  EXPECT_EQ(io::read_file(d + "/metrics.jsonl"), "{\"step\": 1}\n{\"step\": 2}\n");
}

TEST(RunDir, NewRunsAndStudies) {
  EXPECT_EQ(train::default_run_dir("configs/mlp.toml", "audit-", false), "runs/audit-mlp");
  EXPECT_EQ(train::default_run_dir(".toml", "", false), "runs/run");
  const std::string d = fresh_dir("study");
  const store::RunDir s = store::RunDir::open(d, "audit");
  EXPECT_THROW(s.manifest(), NotFoundError);  // a path that does not exist (Python: FileNotFoundError)
  EXPECT_THROW_MSG(s.manifest(), "does not exist");
  io::make_dirs(d);
  EXPECT_THROW_MSG(s.manifest(), "is not a bitgrad run directory");
  {
    const store::StudyDir w = store::StudyDir::create(d, "audit");  // locked until it goes
    w.write("audit.json", Json{{"all_zero", true}}, "{\"run\": {\"kind\": \"audit\"}}\n");
  }
  EXPECT_EQ(s.manifest()["run"]["kind"], "audit");
  EXPECT_EQ(s.read_json("audit.json")["all_zero"], true);
  EXPECT_THROW_MSG(store::RunDir::create(d), "already holds an audit");
  EXPECT_THROW_MSG(store::StudyDir::create(d, "sensitivity"), "already holds an audit");
  io::make_dirs(d + "/checkpoints");
  io::write_file_atomic(d + "/checkpoints/latest", "step-000000000\n");
  EXPECT_THROW_MSG(store::RunDir::create(d), "already holds a run; choose another --out or continue it with --resume");
  EXPECT_THROW_MSG(store::StudyDir::create(d, "audit"), "already holds a run");
}

TEST(RunDir, ARunThatDiedBeforeItsFirstCheckpointIsNamedSo) {
  const std::string d = fresh_dir("unborn");
  io::make_dirs(d + "/checkpoints/.tmp-step-000000000-123");
  io::write_file_atomic(d + "/checkpoints/.tmp-step-000000000-123/model.safetensors", "half");
  io::write_file_atomic(d + "/config.toml", "# resolved\n");
  EXPECT_THROW_MSG(store::RunDir::create(d), "stopped before its first checkpoint; start it again with --resume");
  const store::RunDir r = store::RunDir::resume(d);
  EXPECT_TRUE(r.unborn());
  EXPECT_FALSE(io::exists(d + "/checkpoints/.tmp-step-000000000-123")) << "resume removes what a killed checkpoint left";
}

TEST(RunDir, OneProcessAtATime) {
  const std::string d = fresh_dir("locked");
  {
    const store::RunDir first = store::RunDir::create(d);
    const store::RunDir copy = first;  // the lock lives while any copy does
    EXPECT_THROW_MSG(store::RunDir::create(d), "is in use by another bitgrad process (pid " + std::to_string(::getpid()) + ")");
    EXPECT_THROW_MSG(store::RunDir::resume(d), "is in use by another bitgrad process");
    EXPECT_THROW_MSG(store::StudyDir::create(d, "audit"), "is in use by another bitgrad process");
  }
  EXPECT_NO_THROW(store::RunDir::create(d)) << "released with the last copy";
  EXPECT_THROW_MSG(store::RunDir::resume(fresh_dir("empty")), "holds no run to continue");
}

}  // namespace
}  // namespace bitgrad::test
