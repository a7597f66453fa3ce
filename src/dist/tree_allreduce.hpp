// The combine of data parallel: every rank holds the values of its nodes of the canonical tree
// (plan.hpp), each a flat vector of `len` elements; afterwards every rank holds the tree's
// value over all nodes, element by element — the bits one process gets.
//
// A reduce-scatter, then an all-gather, both by pairwise exchange: the vector is cut into
// `world` segments; rank s receives segment s of every other rank's node values, evaluates
// the tree for that segment (evaluate_tree: each addition is one of the tree's, in its order),
// and sends the result to every rank. Per rank: 2 (P - 1) messages and 2 (P - 1) / P of the
// vector each way, the bandwidth of a ring all-reduce (docs/distributed.md). Long vectors go
// in buckets so that the segments stay cache-sized.
#pragma once

#include <vector>

#include "bitgrad/tensor.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"

namespace bitgrad::dist {

// nodes[r]: rank r's nodes (in order, tiling [0, leaves) together); mine: this rank's node
// values, contiguous 1-D tensors of `len` elements of `dtype` (every rank passes the same len
// and dtype, also one that holds no node). Returns the tree's value (1-D).
Tensor tree_allreduce(Comm& comm, const std::vector<std::vector<Range>>& nodes, std::int64_t leaves, const std::vector<Tensor>& mine,
                      std::int64_t len, DType dtype, const std::string& what, std::int64_t bucket_elements = std::int64_t{1} << 20);

// The same with `world` ranks simulated in this process (tests, the bench's reference):
// values[r] are rank r's node values; the result is what every rank would hold.
Tensor tree_reduce_local(const std::vector<std::vector<Range>>& nodes, std::int64_t leaves, std::vector<std::vector<Tensor>> values);

}  // namespace bitgrad::dist
