// The step and op trace records (docs/cli.md, "Traces"); the run directory writes them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/fingerprint.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::instruments {

// trace.jsonl: one record per optimizer step.
struct StepRecord {
  std::int64_t step = 0, epoch = 0, batch = 0;
  Digest128 input;
  float loss = 0;
  std::vector<std::pair<std::string, Digest128>> grads, params;
};
store::Json step_record_json(const StepRecord& r);

// ops.jsonl: every op's output and every gradient an op produced, in order, per step.
class OpTrace {
 public:
  explicit OpTrace(store::JsonLinesWriter out) : out_(std::move(out)) {}
  void begin_step(std::int64_t step);
  void record(const char* op, const Tensor& value, const char* file, int line, const std::string& label, bool backward, int input);
  void flush() { out_.flush(); }

 private:
  store::JsonLinesWriter out_;
  std::int64_t step_ = 0, seq_ = 0;
};

std::string hex32(std::uint32_t v);  // "0x3f800000": how traces write a float's bits

}  // namespace bitgrad::instruments
