// Fingerprints: 128-bit XXH3 hashes of tensors, for proving two runs computed the same bits.
// A tensor contributes its dtype, its shape and its row-major element bytes, so equal
// values of different shapes or dtypes never hash alike.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitgrad/tensor.hpp"

namespace bitgrad {

struct Digest128 {
  std::uint64_t high = 0, low = 0;
  std::string hex() const;  // 32 lowercase hex digits, high word first
  friend bool operator==(const Digest128& a, const Digest128& b) { return a.high == b.high && a.low == b.low; }
  friend bool operator!=(const Digest128& a, const Digest128& b) { return !(a == b); }
};

class Fingerprint {
 public:
  Fingerprint();
  ~Fingerprint();
  Fingerprint(const Fingerprint&) = delete;
  Fingerprint& operator=(const Fingerprint&) = delete;
  void add(const Tensor& t);
  void add_bytes(const void* data, std::size_t n);
  Digest128 digest() const;
  // add(t) in pieces: add_header(t), then the element bytes in any number of add_bytes calls.
  void add_header(const Tensor& t);
  void add_header(DType dtype, const std::int64_t* dims, int ndim);  // of a tensor of that dtype and shape
  static const void* element_bytes(const Tensor& contiguous, std::size_t& n);

 private:
  void* state_;
};

Digest128 fingerprint(const Tensor& t);
Digest128 fingerprint(const std::vector<Tensor>& ts);
// fingerprint(g) of each group g, in one call (one Python call per recorded step). Hashed in
// turn on the calling thread: hashing is bound by memory bandwidth, and two threads side by side
// measured slower than one beside a PyTorch step (docs/benchmarks.md).
std::vector<Digest128> fingerprints(const std::vector<std::vector<Tensor>>& groups);

}  // namespace bitgrad
