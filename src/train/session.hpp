// A training session (internal): datasets, loader, model, optimizer and schedule of one
// configuration, and the canonical optimizer step. `bitgrad train`, `audit`, `sensitivity` and
// `diff` (replay) all step sessions.
#pragma once

#include <memory>
#include <optional>

#include "bitgrad/optim.hpp"
#include <functional>
#include "bitgrad/train.hpp"
#include "train/checkpoint.hpp"

namespace bitgrad::train {

struct Eval {
  double accuracy = -1, loss = 0;
};

class Session {
 public:
  // perturb: evaluate every reduction of this session in a seeded random order (analysis mode)
  Session(const Config& cfg, std::shared_ptr<data::Dataset> train_ds, std::shared_ptr<data::Dataset> test_ds, int workers,
          std::optional<std::uint64_t> perturb = std::nullopt);

  struct StepOut {
    data::Batch batch;
    float loss = 0;
    double lr = 0;
    double grad_norm = -1;
  };
  // One optimizer step (number `s`, from 0). The step's gradients stay in the parameters'
  // .grad until the next step.
  StepOut step(std::int64_t s);
  Eval evaluate() const;
  Tensor predict(const Tensor& x) const;  // evaluation-mode forward
  void restore(const Checkpoint& ck, const std::string& where);
  Digest128 fingerprint() const;  // parameters, optimizer buffers, optimizer step count


  Config cfg;
  std::shared_ptr<data::Dataset> train_ds, test_ds;
  std::unique_ptr<data::DataLoader> loader;
  std::shared_ptr<nn::Sequential> model;
  optim::NamedTensors params;
  std::unique_ptr<optim::Optimizer> opt;
  optim::Schedule sched;
  std::int64_t bpe = 0, planned = 0, divisor = 1;
  std::optional<std::uint64_t> perturb;
  // Called in step() just before the optimizer changes the parameters (the step tracer waits
  // there for the previous step's record).
  std::function<void()> before_update;
};

bool t5_holds(std::int64_t micro);
// The configuration file's name without directory and ".toml" ("run" if nothing is left): the
// default run, audit and sensitivity directories are named after it.
std::string config_stem(const std::string& path);
// Files the configuration reads (hashed into manifests).
std::vector<std::string> data_files(const Config& c);
// Writes a study's result (dir/result_file, JSON) and its manifest (kind, command, config, seed,
// data files; perturbed for sensitivity studies): what audit and sensitivity leave behind.
void write_study(const std::string& dir, const std::string& kind, const std::string& result_file, const std::string& json,
                 const Config& c, const std::string& command, bool perturbed);

}  // namespace bitgrad::train
