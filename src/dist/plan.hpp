// How a step's batch is laid out over ranks and combined (numerics.md §18 "data parallel"):
// the batch's tree leaves (32-sample blocks, or whole micro-batches when those are not a
// power-of-two number of blocks) are split into contiguous shards, one per rank; each rank
// covers its shard with the fewest nodes of the canonical pairwise tree (§2) and computes each
// node's value; the combine evaluates the tree above those nodes. A node's value is the same
// whoever computes it, so the result does not depend on the number of ranks (contract T6).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bitgrad::dist {

// Leaves [begin, end) of the tree.
struct Range {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  friend bool operator==(const Range&, const Range&) = default;
};

// The canonical tree over `n` leaves: tree[lo, hi) = tree[lo, lo + h) + tree[lo + h, hi),
// h the largest power of two below hi - lo. split(lo, hi) returns lo + h.
std::int64_t split(std::int64_t lo, std::int64_t hi);
// rows > 0 fill a power-of-two number of whole canonical blocks: a complete subtree of the batch rule
bool complete_subtree(std::int64_t rows);

// The fewest nodes of the tree over n leaves that tile [a, b), in order.
std::vector<Range> cover(std::int64_t n, Range r);

// Rank `rank` of `world` holds leaves [rank n / world, (rank + 1) n / world).
Range shard(std::int64_t n, int world, int rank);

// How a batch's leaves are split over ranks. `even`: shard() above, each rank covering its
// shard with the fewest nodes. `whole_nodes` (a model with batch norm, numerics.md §20, §31):
// each rank holds at most one node of the tree — start from the root and split the largest
// part (the first of equal ones) at the tree's own split until there are `world` parts or no
// part has two leaves; parts go to ranks 0, 1, ... in order, the rest hold none. Batch norm's
// statistics need every sample of the batch before any is normalised, so a rank computes its
// samples in one forward and one backward, and a node is what one piece may hold.
enum class Sharding { even, whole_nodes };
std::vector<Range> whole_node_shards(std::int64_t n, int world);

// The tree over [0, n) given the values of nodes that tile it (in order): evaluated from the
// root down, so each addition is one of the tree's own. add(left, right) returns left + right.
template <class T, class Add>
T evaluate_tree(std::int64_t n, const std::vector<Range>& nodes, std::vector<T>& values, Add add) {
  std::size_t next = 0;
  auto rec = [&](auto& self, std::int64_t lo, std::int64_t hi) -> T {
    if (next < nodes.size() && nodes[next].begin == lo && nodes[next].end == hi) return std::move(values[next++]);
    const std::int64_t mid = split(lo, hi);
    T left = self(self, lo, mid);
    T right = self(self, mid, hi);
    return add(left, right);
  };
  return rec(rec, 0, n);
}

// One step's layout: `rows` samples in leaves of `leaf_rows` (the last one may be short), each
// node computed as forward/backward pieces of at most `piece_rows` rows combined by the
// pairwise tree.
struct StepLayout {
  std::int64_t rows = 0, leaf_rows = 0, piece_rows = 0, leaves = 0;
  int world = 1;
  bool per_block = false;                 // every leaf its own piece (numerics.md §42)
  std::vector<Range> shards;              // per rank: its leaves
  std::vector<std::vector<Range>> nodes;  // per rank, in order
  // All nodes of all ranks in order.
  std::vector<Range> all_nodes() const;
  std::int64_t row_of(std::int64_t leaf) const { return leaf * leaf_rows < rows ? leaf * leaf_rows : rows; }
  // Samples [first, last) of rank r's shard.
  Range rows_of(int rank) const;
};

// The layout of a batch of `rows` samples (the configured batch is `batch_size`, split into
// `accumulate` micro-batches) over `world` ranks. Leaves are 32-sample blocks when the
// micro-batch is a complete subtree (accumulate 1, or a power-of-two number of blocks; then
// any split of the blocks gives the bits of one process); otherwise the micro-batches
// themselves, combined by the tree over micro-batches as one process does. per_block: each
// piece is one leaf (a model whose samples are kept apart but not summed by the batch rule on
// axis 0, numerics.md §42).
StepLayout step_layout(std::int64_t rows, std::int64_t batch_size, std::int64_t accumulate, int world,
                       Sharding sharding = Sharding::even, bool per_block = false);

// Leaves of one sample block per tree leaf (the batch rule's block, numerics.md §3).
inline constexpr std::int64_t kBlockRows = 32;

// Why a configured batch cannot be split over `world` ranks ("" : it can).
std::string layout_problem(std::int64_t batch_size, std::int64_t accumulate, int world);

}  // namespace bitgrad::dist
