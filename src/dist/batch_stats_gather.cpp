#include "dist/batch_stats_gather.hpp"

#include <cstring>

#include "bitgrad/error.hpp"

namespace bitgrad::dist {

RankBatchStats::RankBatchStats(Comm& comm, std::vector<Range> rows) : comm_(comm), rows_(std::move(rows)) {
  BITGRAD_CHECK(static_cast<int>(rows_.size()) == comm.size(), "batch statistics", "rows of ", rows_.size(), " ranks for a world of ",
                comm.size());
  std::int64_t at = 0;
  for (const Range& r : rows_) {
    BITGRAD_CHECK(r.begin == at && r.end >= r.begin, "batch statistics", "the ranks' rows are not contiguous in rank order (", r.begin,
                  " after ", at, ")");
    at = r.end;
  }
}

void RankBatchStats::gather(const void* mine, std::int64_t row_bytes, void* all, const char* what) {
  const int me = comm_.rank();
  const Range own = rows_[static_cast<std::size_t>(me)];
  BITGRAD_CHECK(own.size() > 0, "batch statistics", "rank ", me, " holds no samples of this batch and takes no part in ", what);
  char* out = static_cast<char*>(all);
  std::memcpy(out + own.begin * row_bytes, mine, static_cast<std::size_t>(own.size() * row_bytes));
  // the same bytes to every other rank that holds samples; theirs into their rows
  std::vector<Comm::Message> sends, recvs;
  for (int r = 0; r < comm_.size(); ++r) {
    const Range rr = rows_[static_cast<std::size_t>(r)];
    if (r == me || rr.size() == 0) continue;
    sends.push_back({r, const_cast<void*>(mine), own.size() * row_bytes});
    recvs.push_back({r, out + rr.begin * row_bytes, rr.size() * row_bytes});
  }
  comm_.exchange(sends, recvs, what);
}

}  // namespace bitgrad::dist
