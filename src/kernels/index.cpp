#include "kernels/index.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad::kern {

template <class T, bool Max>
void argmax_axis(const T* x, std::int64_t outer, std::int64_t L, std::int64_t inner, std::int64_t* idx) {
  parallel_for(outer * inner, 1 << 12, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      const std::int64_t o = p / inner, i = p % inner;
      const T* base = x + o * L * inner + i;
      std::int64_t best = 0;
      T bv = base[0];
      for (std::int64_t l = 1; l < L && bv == bv; ++l) {
        const T v = base[l * inner];
        if (v != v || (Max ? v > bv : v < bv)) {
          bv = v;
          best = l;
        }
      }
      idx[p] = best;
    }
  });
}

template <class T>
void index_select_rows(const T* x, std::int64_t outer, std::int64_t S, std::int64_t inner, const std::int64_t* index,
                       std::int64_t n, T* out) {
  parallel_for(outer * n, inner >= 4096 ? 1 : 4096 / (inner + 1) + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      const std::int64_t o = p / n, j = p % n;
      std::memcpy(out + p * inner, x + (o * S + index[j]) * inner, static_cast<std::size_t>(inner) * sizeof(T));
    }
  });
}

template <class T>
void index_add_rows(const T* g, std::int64_t outer, std::int64_t n, std::int64_t inner, const std::int64_t* index,
                    std::int64_t S, T* gx) {
  // sources of each destination row, in increasing source order (stable counting sort)
  std::vector<std::int64_t> start(static_cast<std::size_t>(S + 1), 0), src(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ++start[static_cast<std::size_t>(index[i] + 1)];
  for (std::int64_t r = 0; r < S; ++r) start[static_cast<std::size_t>(r + 1)] += start[static_cast<std::size_t>(r)];
  std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
  for (std::int64_t i = 0; i < n; ++i) src[static_cast<std::size_t>(fill[static_cast<std::size_t>(index[i])]++)] = i;
  parallel_for(outer * S, inner >= 4096 ? 1 : 4096 / (inner + 1) + 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t p = b; p < e; ++p) {
      const std::int64_t o = p / S, r = p % S;
      T* dst = gx + p * inner;
      for (std::int64_t c = 0; c < inner; ++c) dst[c] = T(0);
      for (std::int64_t s = start[static_cast<std::size_t>(r)]; s < start[static_cast<std::size_t>(r + 1)]; ++s) {
        const T* row = g + (o * n + src[static_cast<std::size_t>(s)]) * inner;
        for (std::int64_t c = 0; c < inner; ++c) dst[c] = canon(dst[c] + row[c]);
      }
    }
  });
}

template <class T>
void index_add_rows_by_sample(const T* g, std::int64_t samples, std::int64_t per, std::int64_t inner, const std::int64_t* index,
                              std::int64_t S, T* gx) {
  const std::int64_t n = samples * per;
  std::vector<std::int64_t> start(static_cast<std::size_t>(S + 1), 0), src(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ++start[static_cast<std::size_t>(index[i] + 1)];
  for (std::int64_t r = 0; r < S; ++r) start[static_cast<std::size_t>(r + 1)] += start[static_cast<std::size_t>(r)];
  std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
  for (std::int64_t i = 0; i < n; ++i) src[static_cast<std::size_t>(fill[static_cast<std::size_t>(index[i])]++)] = i;
  const std::int64_t blocks = (samples + kBatchBlock - 1) / kBatchBlock;
  parallel_for(S, inner >= 4096 ? 1 : 4096 / (inner + 1) + 1, [&](std::int64_t b, std::int64_t e) {
    // the pairwise tree's stack (at most 64 levels) of block sums, and one block and one sample
    std::vector<T> stack(static_cast<std::size_t>(64 * inner)), acc(static_cast<std::size_t>(inner)), part(static_cast<std::size_t>(inner));
    int level[64];
    for (std::int64_t r = b; r < e; ++r) {
      T* dst = gx + r * inner;
      std::int64_t s = start[static_cast<std::size_t>(r)];
      const std::int64_t s_end = start[static_cast<std::size_t>(r + 1)];
      std::fill(dst, dst + inner, T(0));
      if (s == s_end) continue;  // no source: +0 (a tree of +0 blocks)
      int depth = 0;
      for (std::int64_t blk = 0; blk < blocks; ++blk) {
        std::fill(acc.begin(), acc.end(), T(0));
        while (s < s_end && src[static_cast<std::size_t>(s)] / per < (blk + 1) * kBatchBlock) {
          const std::int64_t sample = src[static_cast<std::size_t>(s)] / per;
          std::fill(part.begin(), part.end(), T(0));
          for (; s < s_end && src[static_cast<std::size_t>(s)] / per == sample; ++s) {
            const T* row = g + src[static_cast<std::size_t>(s)] * inner;
            for (std::int64_t c = 0; c < inner; ++c) part[static_cast<std::size_t>(c)] = part[static_cast<std::size_t>(c)] + row[c];
          }
          for (std::int64_t c = 0; c < inner; ++c) acc[static_cast<std::size_t>(c)] = acc[static_cast<std::size_t>(c)] + part[static_cast<std::size_t>(c)];
        }
        // push the block (left + right while the top two share a level)
        int l = 0;
        while (depth > 0 && level[depth - 1] == l) {
          const T* left = stack.data() + (depth - 1) * inner;
          for (std::int64_t c = 0; c < inner; ++c) acc[static_cast<std::size_t>(c)] = left[c] + acc[static_cast<std::size_t>(c)];
          --depth, ++l;
        }
        std::copy(acc.begin(), acc.end(), stack.begin() + depth * inner);
        level[depth++] = l;
      }
      // fold from the top down: r = top; r = entry + r
      for (std::int64_t c = 0; c < inner; ++c) dst[c] = canon(stack[static_cast<std::size_t>((depth - 1) * inner + c)]);
      for (int i = depth - 2; i >= 0; --i)
        for (std::int64_t c = 0; c < inner; ++c) dst[c] = canon(stack[static_cast<std::size_t>(i * inner + c)] + dst[c]);
    }
  });
}

template <class T>
void gather_axis(const T* x, std::int64_t outer, std::int64_t S, std::int64_t inner, const std::int64_t* index,
                 std::int64_t n, T* out) {
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t p = (o * n + j) * inner + i;
        out[p] = x[(o * S + index[p]) * inner + i];
      }
}

template <class T>
void gather_axis_backward(const T* g, std::int64_t outer, std::int64_t S, std::int64_t inner, const std::int64_t* index,
                          std::int64_t n, T* gx) {
  for (std::int64_t p = 0; p < outer * S * inner; ++p) gx[p] = T(0);
  // one pass in increasing source order: each destination sums its sources in that order
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t p = (o * n + j) * inner + i;
        T& d = gx[(o * S + index[p]) * inner + i];
        d = canon(d + g[p]);
      }
}

#define BITGRAD_INSTANTIATE(T)                                                                                        \
  template void argmax_axis<T, true>(const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t*);               \
  template void argmax_axis<T, false>(const T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t*);              \
  template void index_select_rows<T>(const T*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*,          \
                                     std::int64_t, T*);                                                               \
  template void index_add_rows_by_sample<T>(const T*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*, std::int64_t, T*); \
  template void index_add_rows<T>(const T*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*, std::int64_t, \
                                  T*);                                                                                \
  template void gather_axis<T>(const T*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*, std::int64_t, T*); \
  template void gather_axis_backward<T>(const T*, std::int64_t, std::int64_t, std::int64_t, const std::int64_t*,       \
                                        std::int64_t, T*);
BITGRAD_INSTANTIATE(float)
BITGRAD_INSTANTIATE(double)
BITGRAD_INSTANTIATE(std::int64_t)
#undef BITGRAD_INSTANTIATE

}  // namespace bitgrad::kern
