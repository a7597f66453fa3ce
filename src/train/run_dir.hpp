// The run directory: the one owner of the files a run or a study leaves behind.
//   RUN/config.toml        the resolved configuration
//   RUN/manifest.json      what the run was computed with (instruments/manifest.cpp builds it)
//   RUN/metrics.jsonl      one JSON record per line: steps, evaluations, gradient statistics
//   RUN/trace.jsonl        the step trace; RUN/ops.jsonl the op trace (docs/cli.md, "Traces")
//   RUN/checkpoints/...    checkpoints and `latest` (train/checkpoint.hpp has the format)
//   STUDY/audit.json, STUDY/sensitivity.json with STUDY/manifest.json: what audit and sensitivity leave
// Nothing else reads or writes these files, so their formats live here. Records are
// nlohmann JSON values written as `{"key": value, ...}` lines.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train/checkpoint.hpp"

namespace bitgrad::train {

using Json = nlohmann::ordered_json;

// One record as a line of a .jsonl file (with its newline): ", " and ": " separators, integers
// as they are, floating-point numbers to 9 significant digits (the round trip of a float) or in
// the printf format `fixed` names for their key; NaN and infinities, which JSON lacks, as the
// strings "NaN", "Infinity" and "-Infinity" (json_number reads either form back).
struct LineFormat {
  std::vector<std::pair<std::string, const char*>> fixed;  // key, printf format of its number
};
std::string json_line(const Json& record, const LineFormat& format = {});
// A number of a record: a JSON number or one of the strings above; nullopt for anything else.
std::optional<double> json_number(const Json& v);

// Appends records to one .jsonl file of a run directory.
class JsonLinesWriter {
 public:
  JsonLinesWriter(const std::string& path, LineFormat format = {});
  void write(const Json& record);
  void flush();  // throws Error when the file cannot be written

 private:
  std::ofstream out_;
  std::string path_;
  LineFormat format_;
};

// An exclusive lock on a run or study directory (flock on DIR/.lock, which holds the owner's
// pid): held while a run trains or a study computes, released when the last copy goes, and by
// the system when the process dies (kill -9 included), so a stale lock cannot exist.
class DirLock {
 public:
  // Creates the directory if needed; throws, naming the holder's pid, when another process
  // holds it.
  DirLock(const std::string& dir, const std::string& who);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

class RunDir {
 public:
  // The directory of a new run, locked: refuses one that holds a run or a study.
  static RunDir create(const std::string& path);
  // The directory of an existing run to continue, locked.
  static RunDir resume(const std::string& path);
  // The directory of a study (kind: "audit", "sensitivity"), locked: refuses one that holds a
  // run or a study.
  static RunDir create_study(const std::string& path, const std::string& kind);
  // An existing run or study to read; `who` prefixes errors ("diff", "report").
  static RunDir open(const std::string& path, const std::string& who);
  // runs/<prefix><config file name without .toml>, with -2, -3 ... until the name is free
  // (`numbered`), or as it is.
  static std::string default_path(const std::string& config_path, const std::string& prefix, bool numbered);
  static bool holds_run(const std::string& path);
  // "" when the directory holds neither a run nor a study, else what it holds ("a run", "an
  // audit", ...).
  static std::string holds(const std::string& path);
  // A run that stopped before its first checkpoint (killed, out of memory, a full disk):
  // files but no checkpoints/latest. `--resume` starts it again from step 0.
  bool unborn() const;
  // Removes checkpoint directories a killed run left half-written (.tmp-step-*).
  void remove_stale_temporaries() const;
  // Removes the metrics and traces (a run started again from step 0).
  void clear_records() const;

  const std::string& path() const { return path_; }
  std::string file(const char* name) const { return path_ + "/" + name; }
  bool has(const char* name) const;

  void write_config(const std::string& toml) const;
  std::string config_path() const { return file("config.toml"); }
  // a text run's vocabulary (data::vocabulary_json): what inference reads instead of the corpus
  void write_vocabulary(const std::string& json) const;
  std::string vocabulary_path() const { return file("vocabulary.json"); }
  void write_manifest(const std::string& json) const;
  std::string manifest_text() const;  // "" when there is none
  Json manifest() const;              // checked: a bitgrad manifest with run.kind

  JsonLinesWriter metrics() const;
  JsonLinesWriter step_trace() const;
  JsonLinesWriter op_trace() const;
  std::vector<Json> read_lines(const char* name) const;  // errors name file:line
  Json read_json(const char* name) const;
  // Resume: the records of steps after `step` are dropped from metrics, trace and op trace.
  // `expected` (the sizes a checkpoint recorded, file name -> bytes) must then match what is
  // kept: a file cut short (a power loss before it reached the disk), missing or edited is
  // named and nothing is changed.
  void truncate_after(std::int64_t step, const std::map<std::string, std::int64_t>& expected = {}) const;
  // fsync of the metrics and traces, so that a checkpoint never outlives the records before it.
  void sync_records() const;
  // Sizes in bytes of the metrics and traces there are (for a checkpoint to record).
  std::map<std::string, std::int64_t> record_sizes() const;

  void save_checkpoint(const io::NamedTensors& params, const io::NamedTensors& optimizer, const CheckpointInfo& info) const;
  Checkpoint latest_checkpoint() const;
  Checkpoint checkpoint(std::int64_t step) const;
  std::vector<std::int64_t> checkpoint_steps() const;

  // A study (audit, sensitivity): its result file and its manifest.
  void write_study(const char* result_file, const Json& result, const std::string& manifest_json) const;

 private:
  explicit RunDir(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {}
  std::vector<Json> parse_lines(const std::string& text, const std::string& path) const;  // errors name path:line
  std::string path_, who_;
  std::shared_ptr<DirLock> lock_;
};

// Objects flattened to dotted keys in document order; arrays and scalars as compact JSON
// (`bitgrad diff` compares manifests with it).
std::vector<std::pair<std::string, std::string>> flatten_json(const Json& j);

}  // namespace bitgrad::train
