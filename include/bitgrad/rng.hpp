// Counter-based random numbers: Philox-4x32-10 (Salmon et al., SC'11). Every draw is a
// pure function of (root seed, stream, index): no generator state, so threads, loader
// workers and ranks cannot change a draw. Streams name a purpose ("init", "shuffle",
// "dropout", "augment", ...) and may be refined by integers (layer, epoch, step), see
// Stream::sub. Distributions are bitgrad's own (docs/numerics.md, section "Random numbers").
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace bitgrad::rng {

using Block = std::array<std::uint32_t, 4>;

// One Philox-4x32-10 block: counter (4 words), key (2 words).
Block philox4x32_10(Block counter, std::array<std::uint32_t, 2> key);

// 64-bit FNV-1a of a name: the stream id of a purpose.
std::uint64_t stream_id(std::string_view name);

class Stream {
 public:
  Stream(std::uint64_t seed, std::string_view purpose) : Stream(seed, stream_id(purpose)) {}
  Stream(std::uint64_t seed, std::uint64_t id) : seed_(seed), id_(id) {}

  // A derived stream, e.g. Stream(seed, "dropout").sub(step): id' = mix(id, k).
  Stream sub(std::uint64_t k) const;
  std::uint64_t seed() const { return seed_; }
  std::uint64_t id() const { return id_; }

  // Block i: counter = {lo(i), hi(i), lo(id), hi(id)}, key = {lo(seed), hi(seed)}.
  Block block(std::uint64_t i) const;
  std::uint32_t u32(std::uint64_t i) const;  // word i%4 of block i/4
  std::uint64_t u64(std::uint64_t i) const;  // words 2(i%2) (low) and 2(i%2)+1 (high) of block i/2
  float uniform_f32(std::uint64_t i) const;   // uniform_of(u32(i))
  double uniform_f64(std::uint64_t i) const;  // uniform_of(u64(i))
  // The uniforms of words: (w >> 8) * 2^-24 and (w >> 11) * 2^-53, in [0, 1)
  static float uniform_of(std::uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
  static double uniform_of(std::uint64_t w) { return static_cast<double>(w >> 11) * 0x1p-53; }
  // out[j] = u32(first + j) / u64(first + j): each block computed once for its 4 / 2 words
  void fill_u32(std::uint32_t* out, std::int64_t n, std::uint64_t first) const;
  void fill_u64(std::uint64_t* out, std::int64_t n, std::uint64_t first) const;
  // Integer in [0, n), n >= 1: floor(u64(i) * n / 2^64) (bias below n * 2^-64).
  std::uint64_t below(std::uint64_t i, std::uint64_t n) const;
  // Standard normal, Box-Muller on block i/2: u1 = ((w01 >> 11) + 1) 2^-53 in (0, 1],
  // u2 = (w23 >> 11) 2^-53; r = sqrt(-2 log u1); element 2j = r cos(2 pi u2), 2j+1 = r sin(2 pi u2).
  double normal_f64(std::uint64_t i) const;
  float normal_f32(std::uint64_t i) const;  // normal_f64 rounded once

  // out[j] = lo + (hi - lo) * uniform(first + j)
  void fill_uniform(float* out, std::int64_t n, std::uint64_t first, float lo, float hi) const;
  void fill_uniform(double* out, std::int64_t n, std::uint64_t first, double lo, double hi) const;
  // out[j] = mean + stddev * normal(first + j)
  void fill_normal(float* out, std::int64_t n, std::uint64_t first, float mean, float stddev) const;
  void fill_normal(double* out, std::int64_t n, std::uint64_t first, double mean, double stddev) const;
  // Fisher-Yates: for i = n-1 .. 1, swap(p[i], p[below(n-1-i, i+1)]), starting from identity.
  std::vector<std::int64_t> permutation(std::int64_t n) const;

 private:
  std::uint64_t seed_, id_;
};

}  // namespace bitgrad::rng
