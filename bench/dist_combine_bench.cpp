// The cost of the deterministic combine of data parallel (docs/distributed_bench.md): under
// `mpirun -n P`, dist::tree_allreduce (one node per rank: leaves = P, rank r holds leaf r)
// beside MPI_Allreduce(MPI_FLOAT, MPI_SUM) on the same float payload, in interleaved
// repetitions (the order alternating each repetition, a barrier before each call). A
// repetition's time is the slowest rank's; the table gives the median over repetitions.
// Before timing, checks once that the tree's result has the same bytes on every rank and
// equals the single-process tree (tree_reduce_local); exit code 1 if not.
//   mpirun --oversubscribe --allow-run-as-root --bind-to none -n P build/bin/dist_combine_bench
//          [--reps 30] [--warmup 3] [--sizes 669706,10745088] [--bucket 1048576]
// Prints one line of JSON per payload size on rank 0 (bench/report_dist.py makes the table).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "bitgrad/runtime.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "dist/tree_allreduce.hpp"

using namespace bitgrad;

namespace {

// Rank r's payload: small values of varied sign and magnitude (a splitmix64 stream per rank).
std::vector<float> payload(int rank, std::int64_t len) {
  std::vector<float> v(static_cast<std::size_t>(len));
  std::uint64_t s = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank + 1);
  for (float& x : v) {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 - 0.5) * 1e-2f;
  }
  return v;
}

double max_over_ranks(double t) {
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 30, warmup = 3;
  std::int64_t bucket = std::int64_t{1} << 20;
  std::vector<std::int64_t> sizes = {669706, 10745088};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--reps") reps = std::atoi(v);
    else if (k == "--warmup") warmup = std::atoi(v);
    else if (k == "--bucket") bucket = std::atoll(v);
    else if (k == "--sizes") {
      sizes.clear();
      std::stringstream ss(v);
      std::string item;
      while (std::getline(ss, item, ',')) sizes.push_back(std::atoll(item.c_str()));
    } else {
      std::fprintf(stderr, "dist_combine_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    set_num_threads(1);
    dist::Comm& comm = dist::Comm::world();  // starts MPI under mpirun
    int mpi_up = 0;
    MPI_Initialized(&mpi_up);
    const bool own_mpi = !mpi_up;
    if (own_mpi) MPI_Init(&argc, &argv);  // one rank (mpirun -n 1, or no mpirun): Comm starts no MPI
    const int P = comm.size(), me = comm.rank();
    int bad = 0;
    std::vector<std::vector<dist::Range>> nodes;
    for (int r = 0; r < P; ++r) nodes.push_back(dist::cover(P, dist::shard(P, P, r)));
    for (const std::int64_t len : sizes) {
      const std::vector<float> mine_v = payload(me, len);
      const std::vector<Tensor> mine = {Tensor::from(mine_v, Shape{len})};
      std::vector<float> recv(static_cast<std::size_t>(len));
      auto tree = [&] { return dist::tree_allreduce(comm, nodes, P, mine, len, DType::f32, "the combine bench", bucket); };
      auto mpi = [&] { MPI_Allreduce(mine_v.data(), recv.data(), static_cast<int>(len), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };

      // sanity: the same bytes on every rank, and the single-process tree's bytes
      {
        const Tensor got = tree();
        std::vector<float> root(got.data<float>(), got.data<float>() + len);
        MPI_Bcast(root.data(), static_cast<int>(len), MPI_FLOAT, 0, MPI_COMM_WORLD);
        int same = std::memcmp(root.data(), got.data<float>(), static_cast<std::size_t>(len) * sizeof(float)) == 0;
        if (me == 0) {
          std::vector<std::vector<Tensor>> all;
          for (int r = 0; r < P; ++r) all.push_back({Tensor::from(payload(r, len), Shape{len})});
          const Tensor want = dist::tree_reduce_local(nodes, P, all);
          same &= std::memcmp(want.data<float>(), got.data<float>(), static_cast<std::size_t>(len) * sizeof(float)) == 0;
        }
        int all_same = 0;
        MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_same) {
          if (me == 0) std::fprintf(stderr, "dist_combine_bench: %d ranks, %lld floats: the tree's result differs between ranks\n", P,
                                    static_cast<long long>(len));
          bad = 1;
        }
        mpi();
        int mpi_same = std::memcmp(root.data(), recv.data(), static_cast<std::size_t>(len) * sizeof(float)) == 0, mpi_all = 0;
        MPI_Allreduce(&mpi_same, &mpi_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (me == 0)
          std::fprintf(stderr, "dist_combine_bench: %d ranks, %lld floats: tree result identical on every rank: %s; MPI_Allreduce's bits %s the tree's\n",
                       P, static_cast<long long>(len), all_same ? "yes" : "NO", mpi_all ? "equal" : "differ from");
      }

      std::vector<double> t_tree, t_mpi;
      for (int rep = -warmup; rep < reps; ++rep) {
        for (int k = 0; k < 2; ++k) {
          const bool do_tree = (k == 0) == (rep % 2 == 0);  // alternate which goes first
          MPI_Barrier(MPI_COMM_WORLD);
          const double t0 = MPI_Wtime();
          if (do_tree) (void)tree();
          else mpi();
          const double dt = MPI_Wtime() - t0;
          const double slowest = max_over_ranks(dt);
          if (rep >= 0) (do_tree ? t_tree : t_mpi).push_back(slowest * 1e3);
        }
      }
      if (me == 0) {
        const double mt = bench::median(t_tree), mm = bench::median(t_mpi);
        auto lo = [](std::vector<double> v) { return *std::min_element(v.begin(), v.end()); };
        std::printf("{\"ranks\": %d, \"floats\": %lld, \"reps\": %d, \"bucket\": %lld, \"tree_ms\": %.4f, \"mpi_ms\": %.4f, "
                    "\"tree_min_ms\": %.4f, \"mpi_min_ms\": %.4f, \"ratio\": %.3f, \"tree_GBps\": %.3f, \"mpi_GBps\": %.3f, \"identical\": %s}\n",
                    P, static_cast<long long>(len), reps, static_cast<long long>(bucket), mt, mm, lo(t_tree), lo(t_mpi), mt / mm,
                    static_cast<double>(len) * 4 / (mt * 1e6), static_cast<double>(len) * 4 / (mm * 1e6), bad ? "false" : "true");
        std::fflush(stdout);
      }
    }
    if (own_mpi) MPI_Finalize();
    else comm.finalize();
    return bad;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_combine_bench: %s\n", e.what());
    dist::abort_job(1);
    return 1;
  }
}
