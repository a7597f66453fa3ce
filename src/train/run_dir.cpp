#include "train/run_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "bitgrad/error.hpp"
#include "bitgrad/io.hpp"
#include "io/format.hpp"

namespace bitgrad::train {
namespace {

void put(const Json& j, const LineFormat& f, const char* number_format, std::string& out) {
  switch (j.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += ": ";
        const char* nf = "%.9g";
        for (const auto& [key, fmt] : f.fixed)
          if (key == it.key()) nf = fmt;
        put(*it, f, nf, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (i) out += ", ";
        put(j[i], f, "%.9g", out);
      }
      out += ']';
      return;
    }
    case Json::value_t::number_float: {
      const double v = j.get<double>();
      if (v != v) out += "\"NaN\"";  // JSON has no non-finite numbers: strings that read back
      else if (v == HUGE_VAL || v == -HUGE_VAL) out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      else out += io::strprintf(number_format, v);
      return;
    }
    default:
      out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

void flatten_into(const Json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten_into(*it, prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out.emplace_back(prefix, j.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
}

}  // namespace

std::string json_line(const Json& record, const LineFormat& format) {
  std::string s;
  put(record, format, "%.9g", s);
  s += '\n';
  return s;
}

JsonLinesWriter::JsonLinesWriter(const std::string& path, LineFormat format)
    : out_(path, std::ios::app), path_(path), format_(std::move(format)) {
  if (!out_) throw Error("train: cannot write " + path);
}

void JsonLinesWriter::write(const Json& record) { out_ << json_line(record, format_); }

void JsonLinesWriter::flush() {
  out_.flush();
  if (!out_) throw Error("train: cannot write " + path_ + " (" + std::strerror(errno) + ")");
}

DirLock::DirLock(const std::string& dir, const std::string& who) {
  io::make_dirs(dir);
  const std::string file = dir + "/.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(who + ": cannot create " + file + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw Error(who + ": cannot lock " + file + ": " + std::strerror(err));
    std::string holder(pid, n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw Error(who + ": " + dir + " is in use by another bitgrad process" + (holder.empty() ? "" : " (pid " + holder + ")") +
                "; wait for it to finish or choose another directory");
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    // the lock holds without the pid; only the message of a second process loses it
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

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

RunDir RunDir::create_study(const std::string& path, const std::string& kind) {
  RunDir r(path, kind);
  r.lock_ = std::make_shared<DirLock>(path, kind);
  const std::string what = holds(path);
  if (!what.empty()) throw Error(kind + ": " + path + " already holds " + what + "; choose another --out");
  return r;
}

bool RunDir::unborn() const { return holds_run(path_) && !io::exists(path_ + "/checkpoints/latest"); }

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

void RunDir::clear_records() const {
  for (const char* f : {"metrics.jsonl", "trace.jsonl", "ops.jsonl"})
    if (has(f)) ::unlink(file(f).c_str());
}

RunDir RunDir::open(const std::string& path, const std::string& who) { return RunDir(path, who); }

std::string RunDir::default_path(const std::string& config_path, const std::string& prefix, bool numbered) {
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

JsonLinesWriter RunDir::metrics() const { return JsonLinesWriter(file("metrics.jsonl"), LineFormat{{{"test_accuracy", "%.6f"}}}); }
JsonLinesWriter RunDir::step_trace() const { return JsonLinesWriter(file("trace.jsonl")); }
JsonLinesWriter RunDir::op_trace() const { return JsonLinesWriter(file("ops.jsonl")); }

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
  return parse_lines(io::read_file(p), p);
}

std::vector<Json> RunDir::parse_lines(const std::string& text, const std::string& p) const {
  std::vector<Json> out;
  std::size_t at = 0;
  int lineno = 0;
  while (at < text.size()) {
    ++lineno;
    const std::size_t nl = text.find('\n', at);
    const std::string where = who_ + ": " + p + ":" + std::to_string(lineno) + ": ";
    if (nl == std::string::npos) throw Error(where + "the last line is incomplete (a truncated file)");
    try {
      out.push_back(Json::parse(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(nl)));
    } catch (const Json::exception&) {
      throw Error(where + "not a JSON record (a truncated or damaged file)");
    }
    if (!out.back().is_object()) throw Error(where + "expected a JSON object per line");
    at = nl + 1;
  }
  return out;
}

std::map<std::string, std::int64_t> RunDir::record_sizes() const {
  std::map<std::string, std::int64_t> sizes;
  for (const char* f : {"metrics.jsonl", "trace.jsonl", "ops.jsonl"}) {
    struct stat st {};
    if (::stat(file(f).c_str(), &st) == 0) sizes[f] = static_cast<std::int64_t>(st.st_size);
  }
  return sizes;
}

void RunDir::truncate_after(std::int64_t step, const std::map<std::string, std::int64_t>& expected) const {
  for (const auto& [f, bytes] : expected)
    if (!has(f.c_str()))
      throw Error(who_ + ": " + file(f.c_str()) + " is missing, but the checkpoint at step " + std::to_string(step) + " recorded " +
                  std::to_string(bytes) + " bytes of it");
  std::vector<std::pair<std::string, std::string>> keep;
  for (const char* f : {"metrics.jsonl", "trace.jsonl", "ops.jsonl"}) {
    if (!has(f)) continue;
    const std::string text = io::read_file(file(f));
    std::string kept;
    if (auto e = expected.find(f); e != expected.end()) {
      // The checkpoint says how many bytes were on disk when it was written: what follows is
      // of later steps (a kill can leave half a line there) and goes; what precedes must be
      // whole records of steps up to `step`.
      auto damaged = [&](const std::string& why) {
        return Error(who_ + ": " + file(f) + " " + why + " after the checkpoint at step " + std::to_string(step) + " was written (the checkpoint recorded " +
                     std::to_string(e->second) + " bytes, the file has " + std::to_string(text.size()) +
                     (why == "was cut short" ? "; a power loss or a full disk can do this" : "") + "): the run cannot continue with its records complete");
      };
      if (static_cast<std::int64_t>(text.size()) < e->second) throw damaged("was cut short");
      kept = text.substr(0, static_cast<std::size_t>(e->second));
      if (!kept.empty() && kept.back() != '\n') throw damaged("was changed");
      std::vector<Json> records;
      try {
        records = parse_lines(kept, file(f));
      } catch (const Error&) {
        throw damaged("was changed");
      }
      for (const Json& r : records)
        if (!r.contains("step") || !r["step"].is_number_integer() || r["step"].get<std::int64_t>() > step) throw damaged("was changed");
    } else {
      // no recorded size (the initial checkpoint): keep the whole records of steps up to `step`
      std::size_t at = 0;
      while (at < text.size()) {
        const std::size_t nl = text.find('\n', at);
        if (nl == std::string::npos) break;  // half a line a kill left: of a later step
        const std::vector<Json> r = parse_lines(text.substr(at, nl + 1 - at), file(f));
        if (!r[0].contains("step") || !r[0]["step"].is_number_integer())
          throw Error(who_ + ": " + file(f) + ": a record without an integer \"step\"");
        if (r[0]["step"].get<std::int64_t>() <= step) kept.append(text, at, nl + 1 - at);
        at = nl + 1;
      }
    }
    keep.emplace_back(f, std::move(kept));
  }
  for (const auto& [f, kept] : keep) io::write_file_atomic(file(f.c_str()), kept);
}

void RunDir::sync_records() const {
  for (const char* f : {"metrics.jsonl", "trace.jsonl", "ops.jsonl"}) {
    if (!has(f)) continue;
    const int fd = ::open(file(f).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw Error(who_ + ": cannot sync " + file(f) + " to disk: " + std::strerror(err));
    }
    ::close(fd);
  }
}

void RunDir::save_checkpoint(const io::NamedTensors& params, const io::NamedTensors& optimizer, const CheckpointInfo& info) const {
  train::save_checkpoint(path_, params, optimizer, info);
}
Checkpoint RunDir::latest_checkpoint() const { return load_latest_checkpoint(path_); }
Checkpoint RunDir::checkpoint(std::int64_t step) const { return load_checkpoint(path_, checkpoint_name(step)); }
std::vector<std::int64_t> RunDir::checkpoint_steps() const { return list_checkpoints(path_); }

void RunDir::write_study(const char* result_file, const Json& result, const std::string& manifest_json) const {
  io::make_dirs(path_);
  io::write_file_atomic(file(result_file), result.dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
  io::write_file_atomic(file("manifest.json"), manifest_json);
}

std::optional<double> json_number(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> flatten_json(const Json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(j, "", out);
  return out;
}

}  // namespace bitgrad::train
