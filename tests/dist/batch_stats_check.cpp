// Run under `mpirun -n P` (ctest: Dist.BatchStats.P1 ... P5): dist::RankBatchStats, batch
// norm's exchange over ranks, gathers every rank's rows in global sample order on each rank that
// holds rows — for batches of 1 to 300 samples split by the batch-norm layout
// (dist::whole_node_shards over 32-sample blocks, some ranks holding none in a short batch),
// several gathers of several row sizes in a row; ranks without rows take no part, and the
// collectives after them still line up. Exit code 1 on the first difference (printed).
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "dist/batch_stats_gather.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"

using namespace bitgrad;

namespace {

// The bytes of sample `row` in gather `call` (width `width` bytes): a pattern no other row has.
unsigned char byte_of(std::int64_t call, std::int64_t row, std::int64_t k) {
  return static_cast<unsigned char>((call * 131 + row * 7 + k * 13 + (row >> 8)) & 0xff);
}

int check(dist::Comm& comm, std::int64_t samples) {
  const int P = comm.size(), me = comm.rank();
  const std::int64_t leaves = (samples + dist::kBlockRows - 1) / dist::kBlockRows;
  std::vector<dist::Range> rows;
  for (const dist::Range& s : dist::whole_node_shards(leaves, P))
    rows.push_back({std::min(samples, s.begin * dist::kBlockRows), std::min(samples, s.end * dist::kBlockRows)});
  dist::RankBatchStats ex(comm, rows);
  const dist::Range own = rows[static_cast<std::size_t>(me)];
  if (ex.total() != samples || ex.first() != own.begin || ex.rows() != own.size()) {
    std::printf("rank %d, %lld samples: total/first/rows %lld/%lld/%lld\n", me, static_cast<long long>(samples),
                static_cast<long long>(ex.total()), static_cast<long long>(ex.first()), static_cast<long long>(ex.rows()));
    return 1;
  }
  if (own.size() > 0) {
    for (std::int64_t call = 0; call < 4; ++call) {
      const std::int64_t width = 4 * (1 + call * 3);  // 4, 16, 28, 40 bytes a row
      std::vector<unsigned char> mine(static_cast<std::size_t>(own.size() * width)), all(static_cast<std::size_t>(samples * width), 0);
      for (std::int64_t r = 0; r < own.size(); ++r)
        for (std::int64_t k = 0; k < width; ++k) mine[static_cast<std::size_t>(r * width + k)] = byte_of(call, own.begin + r, k);
      ex.gather(mine.data(), width, all.data(), "the check's gather");
      for (std::int64_t r = 0; r < samples; ++r)
        for (std::int64_t k = 0; k < width; ++k)
          if (all[static_cast<std::size_t>(r * width + k)] != byte_of(call, r, k)) {
            std::printf("rank %d of %d, %lld samples, gather %lld: row %lld byte %lld differs\n", me, P, static_cast<long long>(samples),
                        static_cast<long long>(call), static_cast<long long>(r), static_cast<long long>(k));
            return 1;
          }
    }
  }
  // every rank, those without rows too: the messages still pair up
  const std::vector<std::string> names = comm.allgather(std::to_string(me), "the check's allgather");
  for (int r = 0; r < P; ++r)
    if (names[static_cast<std::size_t>(r)] != std::to_string(r)) {
      std::printf("rank %d: the allgather after the gathers is out of step\n", me);
      return 1;
    }
  return 0;
}

}  // namespace

int main() {
  dist::Comm& comm = dist::Comm::world();
  comm.set_timeout(60);
  int bad = 0;
  std::int64_t cases = 0;
  for (std::int64_t samples : {1, 2, 31, 32, 33, 64, 96, 100, 128, 160, 200, 256, 300}) {
    bad = check(comm, samples);
    ++cases;
    if (bad) break;
  }
  // a rank out of rows would wait for nothing: misuse is an error, not a hang
  if (!bad && comm.size() > 1) {
    try {
      dist::RankBatchStats ex(comm, std::vector<dist::Range>(static_cast<std::size_t>(comm.size() - 1), dist::Range{0, 0}));
      bad = 1;
      std::printf("rows of fewer ranks than the world were accepted\n");
    } catch (const std::exception&) {
    }
  }
  if (comm.root() && !bad) std::printf("batch statistics exchange: %lld layouts on %d ranks agree\n", static_cast<long long>(cases), comm.size());
  comm.finalize();
  return bad;
}
