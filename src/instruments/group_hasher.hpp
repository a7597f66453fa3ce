// Fingerprints of groups of tensors, each group one XXH3-128 stream (every tensor's header, then
// its element bytes, in turn: `fingerprint(std::vector<Tensor>)`), computed in pieces for the
// step tracer: a bounded number of bytes at a time, in order (idle-time slices), then whatever is
// left with the groups side by side on the kernel threads. How the work is cut and who does it
// never changes a digest.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad::instruments {

class GroupHasher {
 public:
  explicit GroupHasher(std::vector<std::vector<Tensor>> groups);  // contiguous tensors
  // Hashes up to `budget` bytes further in order; true while bytes remain.
  bool advance(std::size_t budget);
  // Hashes the rest: the unfinished groups largest first, claimed one at a time by the kernel
  // threads (the group the slices stopped in goes on from where they left it).
  void finish_parallel();
  bool done() const { return g_ == groups_.size(); }
  const std::vector<std::vector<Tensor>>& groups() const { return groups_; }
  const std::vector<Digest128>& digests() const { return digests_; }

 private:
  void hash_rest(std::size_t k);

  std::vector<std::vector<Tensor>> groups_;
  std::vector<Digest128> digests_;
  // where advance() stands: group, tensor in it, byte in the tensor's elements
  std::size_t g_ = 0, t_ = 0, at_ = 0;
  bool header_done_ = false;
  std::unique_ptr<Fingerprint> fp_;  // the stream of group g_, once begun
};

}  // namespace bitgrad::instruments
