// The run directory: the one owner of the files a run leaves behind.
//   RUN/config.toml        the resolved configuration
//   RUN/vocabulary.json    a text run's vocabulary (what inference reads instead of the corpus)
//   RUN/manifest.json      what the run was computed with (instruments/manifest.cpp builds it)
//   RUN/metrics.jsonl      one JSON record per line: steps, evaluations, gradient statistics
//   RUN/trace.jsonl        the step trace; RUN/ops.jsonl the op trace (docs/cli.md, "Traces")
//   RUN/checkpoints/...    checkpoints and `latest` (store/checkpoint.hpp has the format)
// Nothing else reads or writes these files, so their formats live here; the records' JSON in
// json_lines.hpp, the lock in dir_lock.hpp. A study (audit, sensitivity) is a StudyDir
// (study_dir.hpp); RunDir::open reads either.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/checkpoint.hpp"
#include "store/dir_lock.hpp"
#include "store/json_lines.hpp"

namespace bitgrad::store {

class RunDir {
 public:
  // The directory of a new run, locked: refuses one that holds a run or a study.
  static RunDir create(const std::string& path);
  // The directory of an existing run to continue, locked.
  static RunDir resume(const std::string& path);
  // An existing run or study to read; `who` prefixes errors ("diff", "report").
  static RunDir open(const std::string& path, const std::string& who);
  static bool holds_run(const std::string& path);
  // "" when the directory holds neither a run nor a study, else what it holds ("a run", "an
  // audit", ...).
  static std::string holds(const std::string& path);
  // A run that stopped before its first checkpoint (killed, out of memory, a full disk):
  // files but no checkpoints/latest. `--resume` starts it again from step 0.
  bool unborn() const;

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
  std::vector<Json> read_lines(const char* name) const;  // errors name file:line
  Json read_json(const char* name) const;

  // The records (run_records.cpp): metrics.jsonl, trace.jsonl, ops.jsonl.
  JsonLinesWriter metrics() const;
  JsonLinesWriter step_trace() const;
  JsonLinesWriter op_trace() const;
  // Resume: the records of steps after `step` are dropped from metrics, trace and op trace.
  // `expected` (the sizes a checkpoint recorded, file name -> bytes) must then match what is
  // kept: a file cut short (a power loss before it reached the disk), missing or edited is
  // named and nothing is changed.
  // `digests` (file name -> xxh128 hex of those bytes, checkpoints that record them) must match too.
  void truncate_after(std::int64_t step, const std::map<std::string, std::int64_t>& expected = {},
                      const std::map<std::string, std::string>& digests = {}) const;
  // fsync of the metrics and traces, so that a checkpoint never outlives the records before it.
  void sync_records() const;
  // Sizes in bytes of the metrics and traces there are (for a checkpoint to record).
  std::map<std::string, std::int64_t> record_sizes() const;
  // Their digests (xxh128 of each file's bytes, hex), for a checkpoint to record.
  std::map<std::string, std::string> record_digests() const;
  // The digests (xxh128 of the bytes) of the files a run's readers take from the directory
  // besides the checkpoint: a text run's vocabulary.json, which sample, serve and export decode
  // with. Each checkpoint records them; check_inputs refuses, naming the file, one that is
  // missing or changed since `checkpoint` recorded it.
  std::map<std::string, std::string> input_digests() const;
  void check_inputs(const std::map<std::string, std::string>& recorded, const std::string& checkpoint) const;
  // Removes the metrics and traces (a run started again from step 0).
  void clear_records() const;

  // The checkpoints.
  void save_checkpoint(const io::NamedTensors& params, const io::NamedTensors& optimizer, const CheckpointInfo& info) const;
  Checkpoint latest_checkpoint() const;
  Checkpoint checkpoint(std::int64_t step) const;
  std::vector<std::int64_t> checkpoint_steps() const;
  // Removes checkpoint directories a killed run left half-written (.tmp-step-*).
  void remove_stale_temporaries() const;

 private:
  explicit RunDir(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {}
  std::string path_, who_;
  std::shared_ptr<DirLock> lock_;
};

}  // namespace bitgrad::store
