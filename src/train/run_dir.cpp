#include "train/run_dir.hpp"

#include <cmath>
#include <cstdio>
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
    out.emplace_back(prefix, j.dump());
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
  if (!out_) throw Error("train: cannot write " + path_);
}

bool RunDir::holds_run(const std::string& d) {
  return io::exists(d + "/config.toml") || io::exists(d + "/metrics.jsonl") || io::exists(d + "/checkpoints");
}

RunDir RunDir::create(const std::string& path) {
  BITGRAD_CHECK(!holds_run(path), "train", "run directory ", path, " already holds a run; choose another --out or continue it with --resume ",
                path);
  return RunDir(path, "train");
}

RunDir RunDir::resume(const std::string& path) { return RunDir(path, "resume"); }

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

void RunDir::write_manifest(const std::string& json) const {
  io::make_dirs(path_);
  io::write_file_atomic(file("manifest.json"), json);
}

std::string RunDir::manifest_text() const { return has("manifest.json") ? io::read_file(file("manifest.json")) : std::string(); }

Json RunDir::manifest() const {
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
  if (!io::exists(p)) throw Error(who_ + ": " + p + " does not exist");
  try {
    return Json::parse(io::read_file(p));
  } catch (const Json::exception& e) {
    throw Error(who_ + ": " + p + " is not valid JSON (" + e.what() + ")");
  }
}

std::vector<Json> RunDir::read_lines(const char* name) const {
  const std::string p = file(name);
  if (!io::exists(p)) throw Error(who_ + ": " + p + " does not exist");
  const std::string text = io::read_file(p);
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

void RunDir::truncate_after(std::int64_t step) const {
  for (const char* f : {"metrics.jsonl", "trace.jsonl", "ops.jsonl"}) {
    if (!has(f)) continue;
    const std::string text = io::read_file(file(f));
    const std::vector<Json> records = read_lines(f);
    // keep the original bytes of the records kept
    std::string kept;
    std::size_t at = 0;
    for (const Json& r : records) {
      const std::size_t nl = text.find('\n', at);
      if (!r.contains("step") || !r["step"].is_number_integer())
        throw Error(who_ + ": " + file(f) + ": a record without an integer \"step\"");
      if (r["step"].get<std::int64_t>() <= step) kept.append(text, at, nl + 1 - at);
      at = nl + 1;
    }
    io::write_file_atomic(file(f), kept);
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
  io::write_file_atomic(file(result_file), result.dump(1) + "\n");
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
