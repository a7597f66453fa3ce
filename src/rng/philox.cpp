// Philox-4x32-10 and the streams built on it. Checked against the Random123 known-answer
// vectors in tests/rng/philox_test.cpp.
#include <bit>

#include "bitgrad/math.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::rng {

namespace {
constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(p >> 32);
  lo = static_cast<std::uint32_t>(p);
}
}  // namespace

Block philox4x32_10(Block c, std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kM0, c[0], hi0, lo0);
    mulhilo(kM1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

std::uint64_t stream_id(std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 0x100000001b3ULL;
  }
  return h;
}

Stream Stream::sub(std::uint64_t k) const {
  // splitmix64 finaliser of (id + golden * (k + 1)): distinct sub-streams for distinct k
  std::uint64_t z = id_ + 0x9e3779b97f4a7c15ULL * (k + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return Stream(seed_, z ^ (z >> 31));
}

Block Stream::block(std::uint64_t i) const {
  return philox4x32_10({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32), static_cast<std::uint32_t>(id_),
                        static_cast<std::uint32_t>(id_ >> 32)},
                       {static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32)});
}

std::uint32_t Stream::u32(std::uint64_t i) const { return block(i / 4)[i % 4]; }

std::uint64_t Stream::u64(std::uint64_t i) const {
  Block b = block(i / 2);
  int w = static_cast<int>(i % 2) * 2;
  return static_cast<std::uint64_t>(b[w]) | (static_cast<std::uint64_t>(b[w + 1]) << 32);
}

float Stream::uniform_f32(std::uint64_t i) const { return uniform_of(u32(i)); }

double Stream::uniform_f64(std::uint64_t i) const { return uniform_of(u64(i)); }

std::uint64_t Stream::below(std::uint64_t i, std::uint64_t n) const {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(u64(i)) * n) >> 64);
}

double Stream::normal_f64(std::uint64_t i) const {
  Block b = block(i / 2);
  std::uint64_t w01 = static_cast<std::uint64_t>(b[0]) | (static_cast<std::uint64_t>(b[1]) << 32);
  std::uint64_t w23 = static_cast<std::uint64_t>(b[2]) | (static_cast<std::uint64_t>(b[3]) << 32);
  double u1 = static_cast<double>((w01 >> 11) + 1) * 0x1p-53;
  double u2 = static_cast<double>(w23 >> 11) * 0x1p-53;
  double r = math::sqrt(-2.0 * math::log(u1));
  return r * (i % 2 == 0 ? math::cos2pi(u2) : math::sin2pi(u2));
}

float Stream::normal_f32(std::uint64_t i) const { return static_cast<float>(normal_f64(i)); }

void Stream::fill_u32(std::uint32_t* out, std::int64_t n, std::uint64_t first) const {
  std::int64_t j = 0;
  while (j < n) {
    const std::uint64_t i = first + static_cast<std::uint64_t>(j);
    const Block b = block(i / 4);
    for (std::uint64_t w = i % 4; w < 4 && j < n; ++w) out[j++] = b[w];
  }
}
void Stream::fill_u64(std::uint64_t* out, std::int64_t n, std::uint64_t first) const {
  std::int64_t j = 0;
  while (j < n) {
    const std::uint64_t i = first + static_cast<std::uint64_t>(j);
    const Block b = block(i / 2);
    for (std::uint64_t w = i % 2; w < 2 && j < n; ++w) out[j++] = static_cast<std::uint64_t>(b[2 * w]) | (static_cast<std::uint64_t>(b[2 * w + 1]) << 32);
  }
}

namespace {
// out[j] = lo + (hi - lo) * uniform_of(word first + j), the words fetched 256 at a time
template <class T, class W, class Fill>
void fill_uniform_words(T* out, std::int64_t n, std::uint64_t first, T lo, T hi, Fill fill) {
  const T w = hi - lo;
  W u[256];
  for (std::int64_t j0 = 0; j0 < n; j0 += 256) {
    const std::int64_t m = n - j0 < 256 ? n - j0 : 256;
    fill(u, m, first + static_cast<std::uint64_t>(j0));
    for (std::int64_t j = 0; j < m; ++j) out[j0 + j] = lo + w * Stream::uniform_of(u[j]);
  }
}
}  // namespace

void Stream::fill_uniform(float* out, std::int64_t n, std::uint64_t first, float lo, float hi) const {
  fill_uniform_words<float, std::uint32_t>(out, n, first, lo, hi, [this](std::uint32_t* u, std::int64_t m, std::uint64_t at) { fill_u32(u, m, at); });
}
void Stream::fill_uniform(double* out, std::int64_t n, std::uint64_t first, double lo, double hi) const {
  fill_uniform_words<double, std::uint64_t>(out, n, first, lo, hi, [this](std::uint64_t* u, std::int64_t m, std::uint64_t at) { fill_u64(u, m, at); });
}
void Stream::fill_normal(float* out, std::int64_t n, std::uint64_t first, float mean, float stddev) const {
  for (std::int64_t j = 0; j < n; ++j) out[j] = mean + stddev * normal_f32(first + static_cast<std::uint64_t>(j));
}
void Stream::fill_normal(double* out, std::int64_t n, std::uint64_t first, double mean, double stddev) const {
  for (std::int64_t j = 0; j < n; ++j) out[j] = mean + stddev * normal_f64(first + static_cast<std::uint64_t>(j));
}

std::vector<std::int64_t> Stream::permutation(std::int64_t n) const {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n < 0 ? 0 : n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = n - 1; i >= 1; --i) {
    std::uint64_t j = below(static_cast<std::uint64_t>(n - 1 - i), static_cast<std::uint64_t>(i + 1));
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
  }
  return p;
}

}  // namespace bitgrad::rng
