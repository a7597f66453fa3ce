#include "store/run_dir.hpp"

#include <dirent.h>

#include <algorithm>

#include "bitgrad/error.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/train.hpp"

// train::default_run_dir (bitgrad/train.hpp): the name a new run directory gets
namespace bitgrad::train {

std::string default_run_dir(const std::string& config_path, const std::string& prefix, bool numbered) {
  std::string stem = config_path;
  if (auto p = stem.find_last_of('/'); p != std::string::npos) stem = stem.substr(p + 1);
  if (auto p = stem.rfind(".toml"); p != std::string::npos) stem = stem.substr(0, p);
  if (stem.empty()) stem = "run";
  const std::string base = "runs/" + prefix + stem;
  if (!numbered) return base;
  for (int k = 1;; ++k) {
    const std::string d = k > 1 ? base + "-" + std::to_string(k) : base;
    if (!io::exists(d)) return d;
  }
}

}  // namespace bitgrad::train

namespace bitgrad::store {

bool RunDir::holds_run(const std::string& d) {
  return io::exists(d + "/config.toml") || io::exists(d + "/metrics.jsonl") || io::exists(d + "/checkpoints");
}

std::string RunDir::holds(const std::string& d) {
  if (holds_run(d)) return "a run";
  if (io::exists(d + "/audit.json")) return "an audit";
  if (io::exists(d + "/sensitivity.json")) return "a sensitivity study";
  if (io::exists(d + "/manifest.json")) return "a run or study (it has a manifest.json)";
  return "";
}

RunDir RunDir::create(const std::string& path) {
  RunDir r(path, "train");
  r.lock_ = std::make_shared<DirLock>(path, "train");  // first: two runs cannot both find it free
  const std::string what = holds(path);
  if (!what.empty()) {
    if (what == "a run" && r.unborn())
      throw Error("train: " + path + " holds a run that stopped before its first checkpoint; start it again with --resume " + path +
                  " (from step 0), or choose another --out");
    throw Error("train: " + path + " already holds " + what + "; choose another --out" +
                (what == "a run" ? " or continue it with --resume " + path : std::string()));
  }
  return r;
}

RunDir RunDir::resume(const std::string& path) {
  RunDir r(path, "resume");
  r.lock_ = std::make_shared<DirLock>(path, "resume");
  if (!holds_run(path)) throw Error("resume: " + path + " holds no run to continue (no config.toml, metrics or checkpoints)");
  r.remove_stale_temporaries();
  return r;
}

RunDir RunDir::open(const std::string& path, const std::string& who) { return RunDir(path, who); }

bool RunDir::unborn() const { return holds_run(path_) && !io::exists(path_ + "/checkpoints/latest"); }

bool RunDir::has(const char* name) const { return io::exists(file(name)); }

void RunDir::write_config(const std::string& toml) const {
  io::make_dirs(path_);
  io::write_file_atomic(file("config.toml"), toml);
}

void RunDir::write_vocabulary(const std::string& json) const { io::write_file_atomic(vocabulary_path(), json); }

void RunDir::write_manifest(const std::string& json) const {
  io::make_dirs(path_);
  io::write_file_atomic(file("manifest.json"), json);
}

std::string RunDir::manifest_text() const { return has("manifest.json") ? io::read_file(file("manifest.json")) : std::string(); }

Json RunDir::manifest() const {
  if (!io::exists(path_)) throw NotFoundError(who_ + ": " + path_ + " does not exist");
  if (!has("manifest.json")) throw Error(who_ + ": " + path_ + " is not a bitgrad run directory (it has no manifest.json)");
  Json m = read_json("manifest.json");
  if (!m.is_object() || !m.contains("run") || !m["run"].is_object() || !m["run"].contains("kind") || !m["run"]["kind"].is_string())
    throw Error(who_ + ": " + file("manifest.json") + " is not a bitgrad run manifest (no run.kind)");
  return m;
}

Json RunDir::read_json(const char* name) const {
  const std::string p = file(name);
  if (!io::exists(p)) throw NotFoundError(who_ + ": " + p + " does not exist");
  try {
    return Json::parse(io::read_file(p));
  } catch (const Json::exception& e) {
    throw Error(who_ + ": " + p + " is not valid JSON (" + e.what() + ")");
  }
}

std::vector<Json> RunDir::read_lines(const char* name) const {
  const std::string p = file(name);
  if (!io::exists(p)) throw NotFoundError(who_ + ": " + p + " does not exist");
  return parse_json_lines(io::read_file(p), who_, p);
}

void RunDir::save_checkpoint(const io::NamedTensors& params, const io::NamedTensors& optimizer, const CheckpointInfo& info) const {
  store::save_checkpoint(path_, params, optimizer, info);
}
Checkpoint RunDir::latest_checkpoint() const { return load_latest_checkpoint(path_); }
Checkpoint RunDir::checkpoint(std::int64_t step) const { return load_checkpoint(path_, checkpoint_name(step)); }
std::vector<std::int64_t> RunDir::checkpoint_steps() const { return list_checkpoints(path_); }

void RunDir::remove_stale_temporaries() const {
  const std::string root = path_ + "/checkpoints";
  std::vector<std::string> stale;
  if (DIR* d = ::opendir(root.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind(".tmp-", 0) == 0) stale.push_back(root + "/" + n);
    }
    ::closedir(d);
  }
  std::sort(stale.begin(), stale.end());
  for (const std::string& t : stale) remove_checkpoint_dir(t);
}

}  // namespace bitgrad::store
