// The step loop: loader -> forward -> backward -> (micro-batch tree) -> optimizer, with
// evaluation, metrics, checkpoints and resume. What the `bitgrad train` command and the tests
// drive. docs/cli.md documents the configuration file.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bitgrad/data.hpp"
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/nn.hpp"

namespace bitgrad::train {

struct LayerSpec {
  std::string type;  // linear conv2d flatten relu gelu tanh sigmoid dropout maxpool2d avgpool2d layernorm
  std::int64_t out = 0;
  int kernel = 0, stride = 0, padding = 0;
  double p = 0.0, eps = 1e-5;
  bool bias = true;
  int line = 0;  // in the configuration file, for errors
};

struct Config {
  std::string file;  // where it was read from (errors)
  std::uint64_t seed = 0;
  // [data]
  std::string dataset = "fashion-mnist";  // fashion-mnist | csv | adder
  std::string path;                        // fashion-mnist directory
  bool normalize = true;
  int crop_padding = 0;
  bool hflip = false;
  std::string train_csv, test_csv;
  bool csv_header = false;
  int label_column = -1;
  int targets = 1;
  std::int64_t samples = 0, test_samples = 0;  // adder
  int features = 10;                           // adder
  // [model]
  std::vector<LayerSpec> layers;
  std::string init = "kaiming_uniform";
  // [train]
  std::int64_t batch_size = 128;
  std::int64_t epochs = 1;
  std::int64_t steps = 0;  // > 0: the planned length in steps instead of epochs
  std::int64_t accumulate = 1;
  std::string loss = "cross_entropy";  // cross_entropy | mse
  double clip_grad_norm = 0.0;
  bool shuffle = true;
  bool drop_last = true;
  std::int64_t log_every = 0;  // 0: about 10 lines an epoch
  // [optimizer]
  std::string optimizer = "sgd";  // sgd | adam | adamw
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  // [schedule]
  std::string schedule = "constant";  // constant | step | cosine
  double gamma = 0.1, min_lr = 0.0;
  std::int64_t step_size = 1000, warmup_steps = 0;
  // [eval]
  std::int64_t eval_batch_size = 1000;
  bool eval_each_epoch = true;
  // [run] (not part of the hash: they cannot change a result)
  int threads = 0, workers = 0;
};

// Reads and checks a configuration; errors are one line "FILE:LINE: what".
Config load_config(const std::string& path);
Config parse_config(const std::string& text, const std::string& name);
// The resolved configuration (every value, defaults included) as TOML.
std::string resolved_toml(const Config& c);
// XXH3-128 (hex) of the settings that define the training (everything but [run]).
std::string config_hash(const Config& c);

// Datasets, model and loss of a configuration.
std::shared_ptr<data::Dataset> train_dataset(const Config& c);
std::shared_ptr<data::Dataset> test_dataset(const Config& c);  // may be null
std::shared_ptr<nn::Sequential> build_model(const Config& c, const data::Dataset& ds);

struct RunOptions {
  int threads = 0;               // 0: config / BITGRAD_THREADS
  int workers = -1;              // -1: config
  std::int64_t steps = -1;       // stop after this many steps in total (-1: the plan)
  std::int64_t epochs = -1;      // stop after this many epochs in total
  std::optional<std::uint64_t> seed;
  std::int64_t accumulate = 0;   // 0: config
  std::string out;               // run directory ("" : runs/<config name>[-N])
  std::string resume;            // run directory to continue
  std::int64_t checkpoint_every = 0;
  int progress = -1;             // -1: a bar when stdout is a terminal, 0: log lines, 1: bar
  std::string trace = "steps";   // none | steps (trace.jsonl) | ops (also ops.jsonl)
  bool detect_anomaly = false;   // stop at the first non-finite op output or gradient
  std::optional<std::uint64_t> perturb_order;  // evaluate every reduction in a seeded random order
  std::int64_t grad_stats_every = 0;  // per-parameter gradient statistics into the metrics
  std::string command;                // recorded in the manifest
};

struct RunResult {
  Digest128 fingerprint;  // final parameters and optimizer state
  std::int64_t steps = 0;
  double last_loss = 0;
  std::vector<double> test_accuracy;  // per evaluated epoch (classification)
  std::vector<double> test_loss;
  std::string out_dir;
};

RunResult run(Config cfg, const RunOptions& opt, std::ostream& out);

// ---- instruments (docs/cli.md) ----------------------------------------------------------------
// Compares two run directories: manifests, then the traces step by step; names the first step,
// tensor (and op, with op traces) that differ and, replaying that step from the nearest
// checkpoint, the largest absolute and ULP difference. Returns 0 when identical, 1 when not;
// throws Error for what cannot be compared (not runs, different models, damaged traces).
struct DiffOptions {
  bool replay = true;
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
  std::int64_t steps = -1;  // -1: the configuration's plan
  std::string out;          // directory for audit.json and manifest.json ("": runs/audit-<name>)
  std::string command;
};
int audit(const Config& cfg, const AuditOptions& opt, std::ostream& out);

// Trains the canonical run and `members` runs with perturbed reduction orders (seeds
// 1..members) side by side; reports per step the spread of the loss and the relative distance
// of the members' parameters to the canonical ones, the growth rate of that distance, and the
// spread of the final test accuracy; writes sensitivity.json.
struct SensitivityOptions {
  int members = 4;
  std::int64_t steps = -1;
  std::int64_t print_every = 0;  // 0: about 10 lines
  std::string out;
  std::string command;
};
void sensitivity(const Config& cfg, const SensitivityOptions& opt, std::ostream& out);

}  // namespace bitgrad::train
