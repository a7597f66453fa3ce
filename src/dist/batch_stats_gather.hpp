// The batch-statistics exchange over MPI ranks (ops/batch_stats.hpp; numerics.md §20, §31):
// batch_norm's per-sample first stages of every rank that holds samples, gathered in global
// sample order on each of them. Bytes only: every rank then runs the batch rule over all N
// samples itself, so each holds the one-process bits. The rows each rank holds are fixed for
// the step (its layout), so a rank that holds none takes no part, and the others do not wait
// for it.
#pragma once

#include <vector>

#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "ops/batch_stats.hpp"

namespace bitgrad::dist {

class RankBatchStats final : public BatchStatsExchange {
 public:
  // rows[r]: rank r's samples [begin, end) of the batch; contiguous in rank order from 0.
  RankBatchStats(Comm& comm, std::vector<Range> rows);
  std::int64_t total() const override { return rows_.back().end; }
  std::int64_t first() const override { return rows_[static_cast<std::size_t>(comm_.rank())].begin; }
  std::int64_t rows() const override { return rows_[static_cast<std::size_t>(comm_.rank())].size(); }
  void gather(const void* mine, std::int64_t row_bytes, void* all, const char* what) override;

 private:
  Comm& comm_;
  std::vector<Range> rows_;
};

}  // namespace bitgrad::dist
