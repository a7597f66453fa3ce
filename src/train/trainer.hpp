// The training loop's seam for the instruments (internal): train::run calls each observer at
// fixed points of the loop, so traces, anomaly detection and the manifest live in
// src/instruments/ and the loop knows nothing of them.
#pragma once

#include <string>
#include <vector>

#include "bitgrad/session.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::train {

class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // Added to the header's "run" line (", trace steps").
  virtual std::string describe() const { return {}; }
  // The run directory is ready (resumed: truncated to `start`); nothing has trained yet. `dir`
  // is null on the ranks other than 0 of a data-parallel run (rank 0 alone writes the run).
  virtual void begin(const store::RunDir* dir, Session& session, std::int64_t start) = 0;
  virtual void begin_step(std::int64_t step) { (void)step; }  // step counts from 1
  // Inside the step, after the gradients are final and before the optimizer updates.
  virtual void before_update() {}
  virtual void end_step(std::int64_t step, const Session& session, const Session::StepOut& out) {
    (void)step, (void)session, (void)out;
  }
  // The step's record for metrics.jsonl, before it is written (after end_step): an observer may
  // add its own fields.
  virtual void add_metrics(std::int64_t step, store::Json& record) { (void)step, (void)record; }
  // Before a checkpoint and at the end: everything of the steps done is on disk.
  virtual void sync() {}
};

RunResult run(Config cfg, const RunOptions& opt, std::ostream& out, const std::vector<RunObserver*>& observers);

}  // namespace bitgrad::train
