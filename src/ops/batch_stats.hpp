// The seam through which training-mode batch_norm gets the sums of a batch it holds only a part
// of (numerics.md §31, "what a batch is"; PyTorch's SyncBatchNorm semantics). Data parallel
// (§20): each rank's shard is one node of the batch's canonical tree, and batch_norm's batch
// sums are "two stages" — per sample the row rule, then the batch rule over the N samples. So
// when every process gathers the per-sample first-stage values of all parts in global sample
// order and runs the batch rule itself over all N, every process holds the one-process bits of
// the batch's sums; only bytes move, no floating-point reduction is left to the transport.
//
// Default: none installed, the op's input is the whole batch. train::Session::step installs
// dist::RankBatchStats (src/dist/batch_stats_gather.hpp) for the step, on the training thread;
// the backward (and a checkpoint's recomputed forward, §22) runs inside the step, so it finds
// the same exchange. Every process that holds rows calls gather the same number of times in
// the same order (the same model, forward and backward); one that holds none calls nothing.
#pragma once

#include <cstdint>

namespace bitgrad {

class BatchStatsExchange {
 public:
  virtual ~BatchStatsExchange() = default;
  // The whole batch has total() samples; this process holds rows() of them, [first(), first() + rows()),
  // one node of the batch rule's tree: its own batch-rule sums are that node's value.
  virtual std::int64_t total() const = 0;
  virtual std::int64_t first() const = 0;
  virtual std::int64_t rows() const = 0;
  // Every part's rows in global sample order: `mine` holds rows() rows of `row_bytes` bytes each,
  // `all` receives total() rows (this process's own among them). `what` names it in errors.
  virtual void gather(const void* mine, std::int64_t row_bytes, void* all, const char* what) = 0;
};

// This thread's exchange; null when none is installed.
BatchStatsExchange* batch_stats_exchange();

// Installs `x` (null: none, the input is the whole batch) on this thread until the scope ends;
// scopes nest (a nested Session::step, the f64 shadow's, installs its own).
class BatchStatsScope {
 public:
  explicit BatchStatsScope(BatchStatsExchange* x);
  ~BatchStatsScope();
  BatchStatsScope(const BatchStatsScope&) = delete;
  BatchStatsScope& operator=(const BatchStatsScope&) = delete;

 private:
  BatchStatsExchange* prev_;
};

}  // namespace bitgrad
