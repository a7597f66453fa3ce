// Checkpoint directories (the store room: train writes them, infer and the instruments read them):
//   RUN/checkpoints/step-000000468/model.safetensors      parameters (public format)
//   RUN/checkpoints/step-000000468/optimizer.safetensors  optimizer buffers; metadata: step,
//                                                          epoch, batch index, config hash, ...
//   RUN/checkpoints/latest                                 name of the newest complete one
// A checkpoint is written into a temporary directory and renamed into place before `latest`
// moves (atomically) to it: an interrupted write leaves the previous checkpoint in charge.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bitgrad/half.hpp"
#include "bitgrad/io.hpp"

namespace bitgrad::store {

struct CheckpointInfo {
  std::int64_t step = 0;       // completed optimizer steps
  std::int64_t epoch = 0;      // of the next batch
  std::int64_t index = 0;      // of the next batch within its epoch
  std::int64_t opt_steps = 0;  // the optimizer's own count
  std::string config_hash;
  std::int64_t accumulate = 0;  // micro-batches per step of the segment that wrote it (0: not recorded)
  std::map<std::string, std::int64_t> records;
  // their digests (xxh128 of the bytes): an edit of the same length is seen too
  std::map<std::string, std::string> record_digests;
  // the digests of the inputs readers take besides the checkpoint (RunDir::input_digests)
  std::map<std::string, std::string> input_digests;
  int world = 1;                    // ranks of the run that wrote it (data parallel)
  std::vector<std::string> hosts;   // each rank's host  // sizes of metrics.jsonl, trace.jsonl, ops.jsonl when it was written
  Precision precision = Precision::fp32;  // mixed precision of the run (written, by name, when not fp32)
  // dynamic loss scaling (numerics.md §25): the scale is 2^loss_scale_log2; steps since the last
  // overflow or growth (written when the run scales dynamically)
  bool dynamic_scale = false;
  int loss_scale_log2 = 0;
  std::int64_t loss_scale_good = 0;
};

struct Checkpoint {
  CheckpointInfo info;
  io::NamedTensors params, optimizer;
  std::string name;  // directory name, e.g. step-000000468
};

void save_checkpoint(const std::string& run_dir, const io::NamedTensors& params, const io::NamedTensors& optimizer,
                     const CheckpointInfo& info, int keep = 3);
// The checkpoint `latest` names; errors name the file and what is wrong.
Checkpoint load_latest_checkpoint(const std::string& run_dir);
Checkpoint load_checkpoint(const std::string& run_dir, const std::string& name);
std::string checkpoint_name(std::int64_t step);  // "step-000000468"
// Steps of the checkpoints in a run directory, ascending.
std::vector<std::int64_t> list_checkpoints(const std::string& run_dir);
// Removes a checkpoint directory (its files, then the directory).
void remove_checkpoint_dir(const std::string& dir);

}  // namespace bitgrad::store
