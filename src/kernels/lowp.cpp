#include "kernels/lowp.hpp"

#include <cstring>

#include "kernels/kernels.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad::kern {
static_assert(kBf16 == Precision::bf16 && kFp16 == Precision::fp16, "kernels.hpp's copies of Precision's values");
namespace {

template <class T>
T widen(std::uint16_t h, Precision p) {
  if constexpr (sizeof(T) == 4) {
    if (p == Precision::bf16) return half::bf16_to_f32(h);
  }
  return static_cast<T>(p == Precision::bf16 ? half::bf16_value(h) : half::f16_value(h));
}

}  // namespace

// Table::round_nearest's reference, by half.hpp's rules: one loop per format, so that each is a
// plain loop over words
template <class T>
void round_nearest_ref(Precision p, const T* x, T* y, std::int64_t n) {
  const std::int64_t b = 0, e = n;
  if constexpr (sizeof(T) == 4) {
    if (p == Precision::bf16) {
      for (std::int64_t k = b; k < e; ++k) y[k] = half::bf16_to_f32(half::bf16_bits_f32(x[k]));
    } else {
      for (std::int64_t k = b; k < e; ++k) y[k] = half::f16_round_f32(x[k]);
    }
  } else {
    for (std::int64_t k = b; k < e; ++k)
      y[k] = widen<T>(p == Precision::bf16 ? half::bf16_bits(x[k]) : half::f16_bits(x[k]), p);
  }
}
template void round_nearest_ref<float>(Precision, const float*, float*, std::int64_t);
template void round_nearest_ref<double>(Precision, const double*, double*, std::int64_t);

template <class T>
void round_to_precision(const T* x, T* y, std::int64_t n, Precision p, const rng::Stream* stochastic, std::uint64_t first) {
  if (p == Precision::fp32) {
    if (x != y) std::memcpy(y, x, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  const auto round = active<T>().round_nearest;  // the caller's code path, read on its thread
  parallel_for(n, 1 << 14, [&](std::int64_t b, std::int64_t e) {
    if (!stochastic) return round(p, x + b, y + b, e - b);
    // word j of the stream is word j % 4 of block j / 4: one block per four elements
    rng::Block blk{};
    std::uint64_t have = ~std::uint64_t{0};
    for (std::int64_t k = b; k < e; ++k) {
      const std::uint64_t j = first + static_cast<std::uint64_t>(k);
      if (j / 4 != have) have = j / 4, blk = stochastic->block(have);
      const std::uint32_t u = blk[j % 4];
      const double v = static_cast<double>(x[k]);
      y[k] = widen<T>(p == Precision::bf16 ? half::bf16_bits_stochastic(v, u) : half::f16_bits_stochastic(v, u), p);
    }
  });
}

template void round_to_precision<float>(const float*, float*, std::int64_t, Precision, const rng::Stream*, std::uint64_t);
template void round_to_precision<double>(const double*, double*, std::int64_t, Precision, const rng::Stream*, std::uint64_t);

}  // namespace bitgrad::kern
