// What the ranks of a data-parallel run agree on besides gradients: the start (same
// configuration, build, data and stop point on every rank, or every rank refuses alike), rank
// 0's checkpoint handed to the others on resume, and the replica check (every rank's
// parameters and optimizer state compared by fingerprint).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bitgrad/session.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "store/checkpoint.hpp"

namespace bitgrad::train {

struct StartInfo {
  std::string error;  // why this rank cannot start ("": it can)
  std::string config_hash;
  std::int64_t stop = 0;
  std::optional<std::uint64_t> perturb;
  std::vector<std::string> data_files;  // hashed and compared
};

// Every rank's StartInfo compared: throws dist::CollectiveError on every rank when one failed
// or they differ. Returns each rank's host.
std::vector<std::string> agree_to_start(dist::Comm& comm, const StartInfo& mine);

// Rank 0's state on every rank: with `ck` (rank 0 resumed from it) the others restore it too;
// returns the step the run starts at.
std::int64_t share_start_state(dist::Comm& comm, Session& session, const store::Checkpoint* ck);

// The replica check after step `step`: the fingerprints of every parameter and optimizer
// buffer, the optimizer's step count and the loader's position on every rank against rank
// 0's; a difference throws dist::CollectiveError naming the step, the ranks and the tensor.
void check_replicas(dist::Comm& comm, const Session& session, std::int64_t step, const std::vector<std::string>& hosts);

// After a step with batch norm over ranks (numerics.md §20): the ranks that held no samples of
// the batch (a short last batch) ran no forward, so rank 0, which always holds some, sends them
// the model's buffers (the running statistics, which every rank with samples updated alike).
void share_buffers_with_idle_ranks(dist::Comm& comm, const dist::StepLayout& layout, nn::Module& model);

}  // namespace bitgrad::train
