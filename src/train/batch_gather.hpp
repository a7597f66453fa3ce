// Data parallel: the other ranks' shards of a batch to rank 0 (bytes only), so that what rank 0
// reports of a step (the step trace's input fingerprint) is the whole batch, as in one process.
#pragma once

#include "bitgrad/data.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"

namespace bitgrad::train {

// Every rank calls it with its shard; on rank 0 `b` becomes the whole batch (first = 0).
void gather_batch_on_root(dist::Comm& comm, const dist::StepLayout& layout, data::Batch& b);

// Every rank calls it with its shard of class labels (i64); each gets the whole batch's labels
// (for the weight W a weighted cross_entropy divides by, numerics.md §41).
Tensor gather_labels(dist::Comm& comm, const dist::StepLayout& layout, const Tensor& y);

}  // namespace bitgrad::train
