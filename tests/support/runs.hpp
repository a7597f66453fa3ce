// Small training configurations and run-directory helpers for the training and instrument tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"

namespace bitgrad::test {

// A small MLP on Fashion-MNIST: fast enough for a test, real data.
inline const char* kMlp = R"(
seed = 5
[data]
dataset = "fashion-mnist"
[model]
layers = [
  { type = "flatten" },
  { type = "linear", out = 64 },
  { type = "relu" },
  { type = "dropout", p = 0.2 },
  { type = "linear", out = 10 },
]
[train]
batch_size = 128
epochs = 1
[optimizer]
type = "sgd"
lr = 0.05
momentum = 0.9
[schedule]
type = "cosine"
warmup_steps = 3
[eval]
each_epoch = false
)";

// A linear regression on the adder data (no dataset needed).
inline const char* kAdder = R"(
seed = 1
[data]
dataset = "adder"
samples = 4000
test_samples = 500
[model]
layers = [ { type = "linear", out = 1 } ]
[train]
batch_size = 100
epochs = 3
loss = "mse"
[optimizer]
type = "adam"
lr = 0.05
)";

// The configuration with `recompute = MODE` in its [model] table.
inline std::string with_recompute(std::string cfg, const std::string& mode) {
  const std::size_t at = cfg.find("[model]\n");
  EXPECT_NE(at, std::string::npos);
  return cfg.insert(at + 8, "recompute = \"" + mode + "\"\n");
}

// A fresh (absent) directory under the test temporary directory.
inline std::string fresh_dir(const std::string& name) {
  static std::atomic<int> n{0};  // tests that train on several threads at once ask at once
  const std::string d = ::testing::TempDir() + "/bitgrad_" + std::to_string(::getpid()) + "_" + name + "_" + std::to_string(n++);
  if (std::system(("rm -rf '" + d + "'").c_str()) != 0) ADD_FAILURE() << "cannot clear " << d;
  return d;
}

// Trains the configuration text (as file "test.toml") into a fresh directory unless the options
// name one; the log goes to *log.
inline train::RunResult run_text(const std::string& text, instruments::TrainOptions o, std::string* log = nullptr) {
  train::Config c = train::parse_config(text, "test.toml");
  if (o.out.empty() && o.resume.empty()) o.out = fresh_dir("run");
  o.progress = 0;
  std::ostringstream out;
  train::RunResult r = instruments::train(c, o, out);
  if (log) *log = out.str();
  return r;
}

// Options that stop after `steps` steps, with the thread and worker counts (0 and -1: as set).
inline instruments::TrainOptions options(std::int64_t steps, int threads = 0, int workers = -1) {
  instruments::TrainOptions o;
  o.steps = steps;
  o.threads = threads;
  o.workers = workers;
  return o;
}

// Options that continue the run in `dir` to `steps` steps in total.
inline instruments::TrainOptions resume_options(const std::string& dir, std::int64_t steps) {
  instruments::TrainOptions r;
  r.resume = dir;
  r.steps = steps;
  return r;
}

// Trains the text with the options into a fresh directory named after `name`; returns it.
inline std::string train_into(const std::string& text, const std::string& name, instruments::TrainOptions o) {
  o.out = fresh_dir(name);
  run_text(text, o);
  return o.out;
}

inline std::vector<std::string> lines_of(const std::string& path) {
  std::istringstream in(io::read_file(path));
  std::vector<std::string> v;
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

}  // namespace bitgrad::test
