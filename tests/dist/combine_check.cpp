// Run under `mpirun -n P` (ctest: Dist.Combine.P1 ... P8): the tree all-reduce of random node
// values gives, on every rank, the bits of the single-process pairwise tree over the same
// leaves — for batches of 1 to 70 leaves, f32 and f64, lengths from 0 to past a bucket, with
// NaNs of several payloads, infinities and -0 among the values. Exit code 1 on the first
// difference (printed), 0 when all agree.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bitgrad/rng.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "dist/tree_allreduce.hpp"
#include "kernels/kernels.hpp"
#include "kernels/tensor_ops.hpp"

using namespace bitgrad;

namespace {

struct AddT {
  Tensor operator()(const Tensor& a, const Tensor& b) const { return kern::add_same_shape(a, b); }
};

// Leaf i's values: normal draws scaled over a wide range of exponents, with special values.
template <class T>
Tensor leaf(std::uint64_t seed, std::int64_t i, std::int64_t len) {
  rng::Stream s(seed, "combine-leaf");
  rng::Stream st = s.sub(static_cast<std::uint64_t>(i));
  std::vector<T> v(static_cast<std::size_t>(len));
  for (std::int64_t k = 0; k < len; ++k) {
    const double u = st.uniform_f64(static_cast<std::uint64_t>(4 * k));
    const double e = st.uniform_f64(static_cast<std::uint64_t>(4 * k + 1));
    T x = static_cast<T>((u - 0.5) * std::ldexp(1.0, static_cast<int>(e * 40) - 20));
    const double sp = st.uniform_f64(static_cast<std::uint64_t>(4 * k + 2));
    if (sp < 0.002) x = -T(0);
    else if (sp < 0.003) x = std::numeric_limits<T>::infinity();
    else if (sp < 0.004) {  // a NaN with a payload of its own
      x = std::numeric_limits<T>::quiet_NaN();
      unsigned char* b = reinterpret_cast<unsigned char*>(&x);
      b[0] ^= static_cast<unsigned char>(1 + i % 200);
    }
    v[static_cast<std::size_t>(k)] = x;
  }
  return Tensor::from(v, Shape{len});
}

template <class T>
int check(dist::Comm& comm, std::int64_t leaves, std::int64_t len, std::int64_t bucket, std::uint64_t seed) {
  const int P = comm.size();
  std::vector<std::vector<dist::Range>> nodes;
  for (int r = 0; r < P; ++r) nodes.push_back(dist::cover(leaves, dist::shard(leaves, P, r)));
  std::vector<Tensor> all;
  for (std::int64_t i = 0; i < leaves; ++i) all.push_back(leaf<T>(seed, i, len));
  // the single-process tree: the streaming pairwise stack over every leaf
  kern::PairwiseStack<Tensor, AddT> st;
  for (const Tensor& t : all) st.push(t);
  const Tensor want = st.total();
  // this rank's nodes, each the tree over its own leaves
  std::vector<Tensor> mine;
  for (const dist::Range& n : nodes[static_cast<std::size_t>(comm.rank())]) {
    kern::PairwiseStack<Tensor, AddT> s;
    for (std::int64_t i = n.begin; i < n.end; ++i) s.push(all[static_cast<std::size_t>(i)]);
    mine.push_back(s.total());
  }
  const Tensor got = dist::tree_allreduce(comm, nodes, leaves, mine, len, sizeof(T) == 4 ? DType::f32 : DType::f64, "the combine check", bucket);
  if (got.numel() != len || std::memcmp(got.data<T>(), want.data<T>(), static_cast<std::size_t>(len) * sizeof(T)) != 0) {
    std::int64_t at = 0;
    while (at < len && std::memcmp(got.data<T>() + at, want.data<T>() + at, sizeof(T)) == 0) ++at;
    std::fprintf(stderr, "combine check: rank %d of %d, %lld leaves, length %lld, bucket %lld, %s: element %lld differs (%a, want %a)\n",
                 comm.rank(), P, static_cast<long long>(leaves), static_cast<long long>(len), static_cast<long long>(bucket),
                 sizeof(T) == 4 ? "f32" : "f64", static_cast<long long>(at), at < len ? static_cast<double>(got.data<T>()[at]) : 0.0,
                 at < len ? static_cast<double>(want.data<T>()[at]) : 0.0);
    return 1;
  }
  return 0;
}

}  // namespace

int main() {
  try {
    dist::Comm& comm = dist::Comm::world();
    comm.set_timeout(120);
    int bad = 0, cases = 0;
    for (std::int64_t leaves = 1; leaves <= 70; leaves += leaves < 20 ? 1 : 7)
      for (std::int64_t len : {1, 5, 33, 1000}) {
        bad += check<float>(comm, leaves, len, 1 << 20, 11 + static_cast<std::uint64_t>(leaves));
        ++cases;
      }
    // long vectors, several buckets, f64, a length below the number of ranks
    for (std::int64_t leaves : {comm.size() * 1, comm.size() * 3 + 1, 64}) {
      bad += check<float>(comm, leaves, 100003, 4096, 5);
      bad += check<double>(comm, leaves, 20001, 999, 6);
      bad += check<float>(comm, leaves, 3, 1 << 20, 7);
      cases += 3;
    }
    if (comm.root()) std::printf("combine check: %d ranks, %d cases, %d differ\n", comm.size(), cases, bad);
    comm.finalize();
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "combine check: %s\n", e.what());
    dist::abort_job(1);
    return 1;
  }
}
