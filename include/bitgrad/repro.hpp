// Reproducibility instruments: the run manifest, fingerprint traces, the report. (diff, audit
// and sensitivity train, so they live in train.hpp; see docs/cli.md.)
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/fingerprint.hpp"

namespace bitgrad::repro {

struct RunInfo {
  std::string kind = "train";  // train | audit | sensitivity
  std::string command;         // the command line
  std::string config_file, config_hash;
  std::uint64_t seed = 0;
  int threads = 0, workers = 0;
  std::int64_t accumulate = 1;
  bool perturbed = false;
  std::uint64_t perturb_seed = 0;
  std::string trace = "steps";
  std::string model;                                        // description
  std::vector<std::pair<std::string, std::string>> params;  // name, shape
  std::vector<std::string> data_files;                      // hashed into the manifest
  std::int64_t resumed_at_step = 0;  // a resumed run: the step it continued from
};

// JSON: bitgrad version, commit and numerics; compiler, flags and build type; CPU, code path,
// OS and kernel; BITGRAD_* and OMP_* variables. (`bitgrad env`)
std::string machine_manifest_json();
// The machine manifest plus a "run" section (manifest.json of a run directory). For a resumed
// run, `previous` is the manifest it replaces: its machine and run sections (and its own
// history) go into "history", oldest first, so every segment of the run stays described.
std::string run_manifest_json(const RunInfo& run, const std::string& previous = "");
// XXH3-128 of a file's bytes, hex.
std::string file_hash(const std::string& path);

// trace.jsonl: one line per optimizer step (docs/cli.md, "Traces").
struct StepRecord {
  std::int64_t step = 0, epoch = 0, batch = 0;
  Digest128 input;
  float loss = 0;
  std::vector<std::pair<std::string, Digest128>> grads, params;
};
class StepTrace {
 public:
  StepTrace(const std::string& path, bool append);
  void write(const StepRecord& r);

 private:
  std::ofstream out_;
  std::string path_;
};

// ops.jsonl: every op's output and every gradient an op produced, in order, per step.
class OpTrace {
 public:
  OpTrace(const std::string& path, bool append);
  void begin_step(std::int64_t step);
  void record(const char* op, const Tensor& value, const char* file, int line, const std::string& label, bool backward, int input);
  void flush();

 private:
  std::ofstream out_;
  std::string path_;
  std::int64_t step_ = 0, seq_ = 0;
};

// `bitgrad report`: one self-contained HTML page (inline SVG) of run directories: loss and
// accuracy curves of training runs and how their traces compare, divergence curves of
// sensitivity studies, error-matrix heatmaps of audits, the manifests side by side.
struct ReportSummary {
  int runs = 0, plots = 0;
};
ReportSummary write_report(const std::vector<std::string>& run_dirs, const std::string& out_html);

std::string hex32(std::uint32_t v);
std::string site_string(const char* file, int line);  // path made relative to the source tree

}  // namespace bitgrad::repro
