// Reproducibility instruments: what watches, reads and compares runs rather than trains them —
// the manifest, the step and op traces, anomaly detection, diff, audit, sensitivity, the report
// (docs/cli.md). They sit on top of bitgrad/train.hpp.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/train.hpp"

namespace bitgrad::instruments {

enum class TraceLevel { none, steps, ops };  // ops: trace.jsonl and ops.jsonl
TraceLevel parse_trace_level(const std::string& name);  // throws on an unknown name
const char* to_string(TraceLevel t);

enum class Shadow { none, f64 };  // f64: a float64 twin of the run, its distance in the metrics
Shadow parse_shadow(const std::string& name);  // "" or "none": none; "f64"; throws on another name
const char* to_string(Shadow s);

struct TrainOptions : train::RunOptions {
  // unset: steps, or for a resumed run the level it was trained with (its manifest)
  std::optional<TraceLevel> trace;
  bool detect_anomaly = false;  // stop at the first non-finite op output or gradient
  Shadow shadow = Shadow::none;
  std::string command;          // recorded in the manifest
};

// `bitgrad train`: train::run with the manifest, the traces and anomaly detection.
train::RunResult train(train::Config cfg, const TrainOptions& opt, std::ostream& out);

// What a manifest.json describes (its run.kind): a training run, a study, or the scaling
// benchmark's results (bench/report_peer.py), all of which `bitgrad report` draws.
enum class RunKind { train, audit, sensitivity, scaling };
const char* to_string(RunKind k);

struct RunInfo {
  RunKind kind = RunKind::train;
  std::string command;         // the command line
  std::string config_file, config_hash;
  std::uint64_t seed = 0;
  int threads = 0, workers = 0;
  std::int64_t accumulate = 1;
  Precision precision = Precision::fp32;  // [train] precision (mixed precision)
  bool perturbed = false;
  std::uint64_t perturb_seed = 0;
  TraceLevel trace = TraceLevel::steps;
  std::string model;                                        // description
  std::vector<std::pair<std::string, std::string>> params;  // name, shape
  std::vector<std::string> data_files;                      // hashed into the manifest
  std::int64_t resumed_at_step = 0;  // a resumed run: the step it continued from
  int ranks = 1;                     // data-parallel MPI ranks
  std::vector<std::string> hosts;    // each rank's host
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

// Compares two run directories: manifests, then the traces step by step; names the first step,
// tensor (and op, with op traces) that differ and, replaying that step from the nearest
// checkpoint, the largest absolute and ULP difference. Returns 0 when identical, 1 when not;
// throws Error for what cannot be compared (not runs, different models, damaged traces).
struct DiffOptions {
  bool replay = true;
  bool reuse_replays = false;  // a PyTorch run's step replayed before (RUN/replay-step-N) is read again, not rerun
};
int diff(const std::string& run_a, const std::string& run_b, const DiffOptions& opt, std::ostream& out);

// Trains the configuration once per run, cycling through the combinations of threads, loader
// workers and accumulate (threads vary fastest); prints and writes (audit.json) the pairwise
// total absolute differences of the final predictions on a fixed evaluation batch, the last
// loss, and the last step's weight and bias gradients. Returns 0 when every entry is zero.
struct AuditOptions {
  int runs = 0;  // 0: one per combination
  std::vector<int> threads{1}, workers{0};
  std::vector<std::int64_t> accumulate{1};
  std::vector<int> ranks{1};  // > 1: the run is `mpirun -n R bitgrad train` (data parallel)
  std::int64_t steps = -1;  // -1: the configuration's plan
  std::string out;          // directory for audit.json and manifest.json ("": runs/audit-<name>)
  std::string command;
};
int audit(const train::Config& cfg, const AuditOptions& opt, std::ostream& out);
// The same for a PyTorch script (`command`: "python3 SCRIPT ARGS..."), recorded by
// bitgrad.torch at each combination of opt.threads and opt.workers, opt.runs times each
// (default: once, twice with one setting): pairwise matrices of the last step's loss, parameters
// and gradients in ULPs, which settings move the bits, and for each run that differs the first
// divergent step, op, cause and fix (diff's). Writes audit.json; 0 when all bitwise equal.
int audit_torch(const std::string& command, const AuditOptions& opt, std::ostream& out);

// Trains the canonical run and `members` runs with perturbed reduction orders (seeds
// 1..members) side by side; reports per step the spread of the loss and the relative distance
// of the members' parameters to the canonical ones, the growth rate of that distance, and the
// spread of the final test accuracy; writes sensitivity.json.
struct SensitivityOptions {
  int members = 4;
  std::int64_t steps = -1;
  std::int64_t print_every = 0;  // 0: about 10 lines
  int threads = 0;               // 0: as set
  std::string out;
  std::string command;
};
void sensitivity(const train::Config& cfg, const SensitivityOptions& opt, std::ostream& out);

// `bitgrad report`: one self-contained HTML page (inline SVG) of run directories: loss and
// accuracy curves of training runs and how their traces compare, divergence curves of
// sensitivity studies, error-matrix heatmaps of audits, the manifests side by side.
struct ReportSummary {
  int runs = 0, plots = 0;
};
// An existing out_html is replaced only when it is a bitgrad report, or with `replace_any`.
ReportSummary write_report(const std::vector<std::string>& run_dirs, const std::string& out_html, bool replace_any = false);

std::string site_string(const char* file, int line);  // path made relative to the source tree

}  // namespace bitgrad::instruments
