#include "kernels/tensor_ops.hpp"

#include <algorithm>
#include <cstdint>

#include "kernels/thread_pool.hpp"
#include "tensor/strided.hpp"

namespace bitgrad::kern {

namespace {
constexpr std::int64_t kCopyGrain = 16384;  // elements per chunk of a strided copy
constexpr std::int64_t kTile = 16;          // a transposing copy's square tile

// f(W{}) with W the unsigned word of dt's size: copies move bits unchanged (NaN payloads kept)
template <class F>
void by_word(DType dt, F&& f) {
  switch (dtype_size(dt)) {
    case 1: f(std::uint8_t{}); break;
    case 2: f(std::uint16_t{}); break;
    case 4: f(std::uint32_t{}); break;
    default: f(std::uint64_t{}); break;
  }
}

// The source's unit-stride dimension when it is not the last one (a permuted view such as an
// attention's k^T or a transposed weight), else -1.
int transposed_dim(const Tensor& t) {
  const int nd = t.ndim();
  if (t.strides()[nd - 1] == 1 || t.shape()[nd - 1] < kTile) return -1;
  for (int d = 0; d < nd - 1; ++d)
    if (t.strides()[d] == 1 && t.shape()[d] >= kTile) return d;
  return -1;
}

// Copies a view whose unit-stride dimension q is not the last (L) in kTile x kTile tiles of the
// (q, L) planes: a tile reads kTile source runs, then writes kTile output runs (through a local
// tile: with rows a multiple of 4 KiB apart, interleaved reads and writes would evict each
// other's lines), where an element-by-element copy of the last dimension would read one
// element a cache line. The tiles of one plane row (kTile values of q) are a unit of work.
template <class W>
void copy_transposed(const Tensor& t, int q, W* dp) {
  const int nd = t.ndim(), L = nd - 1;
  const W* sp = static_cast<const W*>(t.storage()->data()) + t.offset();
  const std::int64_t nq = t.shape()[q], nl = t.shape()[L], sl = t.strides()[L];
  std::int64_t dq = 1;  // the output's stride of q
  for (int d = q + 1; d < nd; ++d) dq *= t.shape()[d];
  Shape outer, outer_src, outer_dst;  // every other dimension, with both strides
  for (int d = 0; d < L; ++d) {
    if (d == q) continue;
    std::int64_t ds = 1;
    for (int e = d + 1; e < nd; ++e) ds *= t.shape()[e];
    outer.push_back(t.shape()[d]);
    outer_src.push_back(t.strides()[d]);
    outer_dst.push_back(ds);
  }
  const std::int64_t bands = (nq + kTile - 1) / kTile, units = outer.numel() * bands;
  parallel_for(units, std::max<std::int64_t>(1, kCopyGrain / (kTile * nl)), [&](std::int64_t u0, std::int64_t u1) {
    for (std::int64_t u = u0; u < u1; ++u) {
      std::int64_t o = u / bands, so = 0, doff = 0;
      for (int d = outer.ndim() - 1; d >= 0; --d) {
        const std::int64_t i = o % outer[d];
        o /= outer[d];
        so += i * outer_src[d];
        doff += i * outer_dst[d];
      }
      const std::int64_t i0 = (u % bands) * kTile, i1 = std::min(nq, i0 + kTile);
      W tile[kTile * kTile];  // each source run read whole, then each output run written whole
      for (std::int64_t j0 = 0; j0 < nl; j0 += kTile) {
        const std::int64_t j1 = std::min(nl, j0 + kTile);
        for (std::int64_t j = j0; j < j1; ++j)
          for (std::int64_t i = i0; i < i1; ++i) tile[(i - i0) * kTile + (j - j0)] = sp[so + i + j * sl];
        for (std::int64_t i = i0; i < i1; ++i)
          for (std::int64_t j = j0; j < j1; ++j) dp[doff + i * dq + j] = tile[(i - i0) * kTile + (j - j0)];
      }
    }
  });
}
}  // namespace

// A strided tensor's copy, its rows (the last dimension) split over the threads: the elements
// moved as unsigned words of their size (NaN payloads kept), so who copies which row changes
// nothing.
Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  const int nd = t.ndim();
  if (nd < 2 || t.numel() < kCopyGrain) return t.contiguous_copy();
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const std::int64_t inner = t.shape()[nd - 1], rows = t.numel() / inner;
  const std::int64_t grain = std::max<std::int64_t>(1, kCopyGrain / inner);
  const int q = transposed_dim(t);
  auto run = [&](auto z) {
    using W = decltype(z);
    const W* sp = static_cast<const W*>(t.storage()->data()) + t.offset();
    W* dp = static_cast<W*>(out.storage()->data());
    if (q >= 0) return copy_transposed<W>(t, q, dp);
    parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
      detail::for_each_strided2_rows(t.shape(), t.strides(), out.strides(), r0, r1,
                                     [&](std::int64_t a, std::int64_t b) { dp[b] = sp[a]; });
    });
  };
  by_word(t.dtype(), run);
  return out;
}

Tensor place_in_zeros(const Tensor& g, const Shape& shape, int axis, std::int64_t start, std::int64_t step) {
  const Tensor gc = contiguous(g);
  Tensor out = Tensor::empty(shape, g.dtype());
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < shape.ndim(); ++d) inner *= shape[d];
  const std::int64_t A = shape[axis], len = g.shape()[axis], block = A * inner;
  if (out.numel() == 0) return out;
  auto run = [&](auto z) {
    using W = decltype(z);
    const W* sp = static_cast<const W*>(gc.storage()->data()) + gc.offset();
    W* dp = static_cast<W*>(out.storage()->data());
    parallel_for(outer, std::max<std::int64_t>(1, kCopyGrain / std::max<std::int64_t>(block, 1)), [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o) {
        W* d = dp + o * block;
        const W* s = sp + o * len * inner;
        if (step == 1) {  // zeros, the run of g, zeros
          std::fill(d, d + start * inner, W(0));
          std::copy(s, s + len * inner, d + start * inner);
          std::fill(d + (start + len) * inner, d + block, W(0));
          continue;
        }
        for (std::int64_t a = 0; a < A; ++a) {
          const std::int64_t k = a - start;
          if (k >= 0 && k % step == 0 && k / step < len) std::copy(s + (k / step) * inner, s + (k / step + 1) * inner, d + a * inner);
          else std::fill(d + a * inner, d + (a + 1) * inner, W(0));
        }
      }
    });
  };
  by_word(g.dtype(), run);
  return out;
}

Tensor place_parts_in_zeros(const std::vector<std::pair<Tensor, std::int64_t>>& parts, const Shape& shape, int axis) {
  std::vector<std::pair<Tensor, std::int64_t>> by_start;  // contiguous, in order along the axis; none empty
  for (const auto& [g, start] : parts)
    if (g.numel() > 0) by_start.emplace_back(contiguous(g), start);
  std::sort(by_start.begin(), by_start.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < shape.ndim(); ++d) inner *= shape[d];
  const std::int64_t A = shape[axis], block = A * inner;
  Tensor out = Tensor::empty(shape, parts[0].first.dtype());
  if (out.numel() == 0) return out;
  BITGRAD_DISPATCH_FLOAT(out.dtype(), "add", T, [&] {
    T* dp = out_ptr<T>(out);
    parallel_for(outer, std::max<std::int64_t>(1, kCopyGrain / std::max<std::int64_t>(block, 1)), [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o) {
        T* d = dp + o * block;
        std::int64_t at = 0;  // along the axis, times inner
        for (const auto& [g, start] : by_start) {
          const std::int64_t len = g.shape()[axis] * inner;
          std::fill(d + at, d + start * inner, T(0));
          const T* s = g.template data<T>() + o * len;
          T* to = d + start * inner;
          for (std::int64_t i = 0; i < len; ++i) to[i] = canon(s[i] + T(0));
          at = start * inner + len;
        }
        std::fill(d + at, d + block, T(0));
      }
    });
  });
  return out;
}

void add_into(Tensor& a, const Tensor& b) {
  BITGRAD_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype() && a.is_contiguous(), "add", "internal: gradient shapes differ ",
                a.shape().str(), " vs ", b.shape().str());
  const Tensor bc = contiguous(b);
  BITGRAD_DISPATCH_FLOAT(a.dtype(), "add", T, [&] {
    T* pa = out_ptr<T>(a);  // each element read, then written, at its own index
    active<T>().binary(Binary::add, Bcast::same, pa, bc.data<T>(), pa, 1, a.numel());
  });
}

Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  BITGRAD_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), "add", "internal: gradient shapes differ ",
                a.shape().str(), " vs ", b.shape().str());
  Tensor ac = contiguous(a), bc = contiguous(b);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  BITGRAD_DISPATCH_FLOAT(a.dtype(), "add", T, [&] {
    active<T>().binary(Binary::add, Bcast::same, ac.data<T>(), bc.data<T>(), out_ptr<T>(out), 1, out.numel());
  });
  return out;
}

}  // namespace bitgrad::kern
