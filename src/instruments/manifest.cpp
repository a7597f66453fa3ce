// Manifests: what a run was computed with, as JSON.
#include <gnu/libc-version.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <thread>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bitgrad/instruments.hpp"
#include "bitgrad/io.hpp"
#include "instruments/manifest.hpp"
#include "io/format.hpp"
#include "math/isa_targets.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"

extern char** environ;

#ifndef BITGRAD_CXX_FLAGS
#define BITGRAD_CXX_FLAGS "unknown"
#endif
#ifndef BITGRAD_BUILD_TYPE
#define BITGRAD_BUILD_TYPE "unknown"
#endif

namespace bitgrad::instruments {
namespace {

using json = nlohmann::ordered_json;

std::string compiler() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown";
#endif
}

std::string trimmed(std::string s) {
  while (!s.empty() && s.front() == ' ') s.erase(s.begin());
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

json machine() {
  json j;
  j["bitgrad"] = {{"version", kVersion}, {"commit", git_commit()}, {"numerics", kNumericsVersion}};
  j["build"] = {{"compiler", compiler()},
                {"flags", trimmed(BITGRAD_CXX_FLAGS)},
                {"build_type", BITGRAD_BUILD_TYPE},
                {"code_path_flags", {{"avx2", "target(" BITGRAD_TARGET_AVX2 ")"}, {"avx512", "target(" BITGRAD_TARGET_AVX512 ")"}}}};
  json isas = json::array();
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (cpu_supports(i)) isas.push_back(isa_name(i));
  struct utsname u {};
  ::uname(&u);
  unsigned csr = 0;
#if defined(__x86_64__)
  csr = _mm_getcsr();
#endif
  const std::string mx = io::strprintf("0x%04x", csr);
  j["machine"] = {{"cpu", cpu_model()},
                  {"cpus", std::thread::hardware_concurrency()},
                  {"code_paths", isas},
                  {"code_path", isa_name(active_isa())},
                  {"threads", num_threads()},
                  {"os", std::string(u.sysname) + " " + u.release},
                  {"kernel", u.version},
                  {"arch", u.machine},
                  {"libc", std::string("glibc ") + gnu_get_libc_version()},
                  {"mxcsr", mx}};
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string s = *e;
    if (s.rfind("BITGRAD_", 0) == 0 || s.rfind("OMP_", 0) == 0) env.push_back(s);
  }
  std::sort(env.begin(), env.end());
  json ev = json::object();
  for (const auto& s : env) {
    auto eq = s.find('=');
    ev[s.substr(0, eq)] = eq == std::string::npos ? "" : s.substr(eq + 1);
  }
  j["environment"] = ev;
  return j;
}

}  // namespace

std::string file_hash(const std::string& path) { return io::file_hash(path); }

const char* to_string(RunKind k) { return enum_name(kRunKinds, k); }

namespace {
// run.KEY of a manifest: its string, or nullopt when absent; another type is an error
std::optional<std::string> run_field(const json& m, const char* key, const std::string& who, const std::string& file) {
  if (!m.contains("run") || !m["run"].is_object() || !m["run"].contains(key)) return std::nullopt;
  const json& v = m["run"][key];
  if (!v.is_string()) throw Error(who + ": " + file + ": run." + key + " is " + v.dump() + ", not a name");
  return v.get<std::string>();
}
}  // namespace

RunKind manifest_kind(const json& m, const std::string& who, const std::string& file) {
  const std::string name = run_field(m, "kind", who, file).value_or("");
  if (auto k = enum_from_name(kRunKinds, name)) return *k;
  throw Error(who + ": " + file + ": run.kind: unknown run kind '" + name + "'; expected " + enum_names_list(kRunKinds));
}

Precision manifest_precision(const json& m, const std::string& who, const std::string& file) {
  const std::optional<std::string> name = run_field(m, "precision", who, file);
  if (!name) return Precision::fp32;
  try {
    return parse_precision(*name);
  } catch (const Error& e) {
    throw Error(who + ": " + file + ": run." + e.what());  // "run.precision: unknown precision 'x'; expected ..."
  }
}

TraceLevel manifest_trace(const json& m, const std::string& who, const std::string& file) {
  const std::optional<std::string> name = run_field(m, "trace", who, file);
  if (!name) return TraceLevel::steps;
  if (auto t = enum_from_name(kTraceLevels, *name)) return *t;
  throw Error(who + ": " + file + ": run.trace: unknown trace level '" + *name + "'; expected " + enum_names_list(kTraceLevels));
}

std::string machine_manifest_json() { return machine().dump(2, ' ', false, json::error_handler_t::replace) + "\n"; }

std::string run_manifest_json(const RunInfo& r, const std::string& previous) {
  json j = machine();
  json run;
  run["kind"] = to_string(r.kind);
  run["command"] = r.command;
  run["config"] = r.config_file;
  run["config_hash"] = r.config_hash;
  run["seed"] = r.seed;
  run["threads"] = r.threads;
  run["workers"] = r.workers;
  run["accumulate"] = r.accumulate;
  run["precision"] = precision_name(r.precision);
  run["ranks"] = r.ranks;
  if (!r.hosts.empty()) run["hosts"] = r.hosts;
  run["perturb_order"] = r.perturbed ? json(r.perturb_seed) : json(nullptr);
  run["trace"] = to_string(r.trace);
  run["resumed_at_step"] = r.resumed_at_step;
  run["model"] = r.model;
  json params = json::array();
  for (const auto& [n, s] : r.params) params.push_back({n, s});
  run["parameters"] = params;
  json data = json::object();
  for (const auto& f : r.data_files) data[f] = file_hash(f);
  run["data"] = data;
  j["run"] = run;
  if (!previous.empty()) {
    json prev;
    try {
      prev = json::parse(previous);
    } catch (const json::exception& e) {
      throw Error(std::string("manifest: the manifest of the run being resumed is not valid JSON (") + e.what() + ")");
    }
    json hist = prev.contains("history") && prev["history"].is_array() ? prev["history"] : json::array();
    json seg;
    seg["machine"] = prev.value("machine", json::object());
    seg["bitgrad"] = prev.value("bitgrad", json::object());
    seg["run"] = prev.value("run", json::object());
    hist.push_back(seg);
    j["history"] = hist;
  }
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";  // a non-UTF-8 path: U+FFFD, not an exception
}

std::string study_manifest_json(RunKind kind, const train::Config& c, const std::string& command, bool perturbed) {
  RunInfo info;
  info.kind = kind;
  info.command = command;
  info.config_file = c.file;
  info.config_hash = train::config_hash(c);
  info.seed = c.seed;
  info.perturbed = perturbed;
  info.data_files = c.data_files();
  return run_manifest_json(info);
}

}  // namespace bitgrad::instruments
