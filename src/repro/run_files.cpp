#include "repro/run_files.hpp"

#include "bitgrad/io.hpp"
#include "bitgrad/error.hpp"

namespace bitgrad::repro {
namespace {

void flatten_into(const ordered_json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten_into(*it, prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out.emplace_back(prefix, j.dump());
  }
}

}  // namespace

ordered_json read_json_file(const std::string& path, const std::string& who) {
  if (!io::exists(path)) throw Error(who + ": " + path + " does not exist");
  try {
    return ordered_json::parse(io::read_file(path));
  } catch (const ordered_json::exception& e) {
    throw Error(who + ": " + path + " is not valid JSON (" + e.what() + ")");
  }
}

std::vector<ordered_json> read_json_lines(const std::string& path, const std::string& who) {
  if (!io::exists(path)) throw Error(who + ": " + path + " does not exist");
  const std::string text = io::read_file(path);
  std::vector<ordered_json> out;
  std::size_t at = 0;
  int lineno = 0;
  while (at < text.size()) {
    ++lineno;
    const std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos)
      throw Error(who + ": " + path + ":" + std::to_string(lineno) + ": the last line is incomplete (a truncated file)");
    try {
      out.push_back(ordered_json::parse(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(nl)));
    } catch (const ordered_json::exception&) {
      throw Error(who + ": " + path + ":" + std::to_string(lineno) + ": not a JSON record (a truncated or damaged file)");
    }
    if (!out.back().is_object()) throw Error(who + ": " + path + ":" + std::to_string(lineno) + ": expected a JSON object per line");
    at = nl + 1;
  }
  return out;
}

ordered_json read_manifest(const std::string& dir, const std::string& who) {
  if (!io::exists(dir + "/manifest.json")) throw Error(who + ": " + dir + " is not a bitgrad run directory (it has no manifest.json)");
  ordered_json m = read_json_file(dir + "/manifest.json", who);
  if (!m.is_object() || !m.contains("run") || !m["run"].is_object() || !m["run"].contains("kind") || !m["run"]["kind"].is_string())
    throw Error(who + ": " + dir + "/manifest.json is not a bitgrad run manifest (no run.kind)");
  return m;
}

std::vector<std::pair<std::string, std::string>> flatten_json(const ordered_json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(j, "", out);
  return out;
}

}  // namespace bitgrad::repro
