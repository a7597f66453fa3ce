#include "kernels/tensor_ops.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/thread_pool.hpp"

namespace bitgrad::kern {

namespace {

constexpr std::int64_t kCopyGrain = 16384;  // elements per chunk of a strided copy

// rows [r0, r1) of t's row-major order (a row: the last dimension) into dst, elements of ES
// bytes moved with memcpy (any dtype, NaN payloads kept)
template <std::size_t ES>
void copy_rows(const Tensor& t, unsigned char* dst, std::int64_t r0, std::int64_t r1) {
  const Shape& sh = t.shape();
  const Shape& st = t.strides();
  const int nd = sh.ndim();
  const std::int64_t inner = sh[nd - 1], si = st[nd - 1];
  const unsigned char* base = static_cast<const unsigned char*>(t.storage()->data()) + t.offset() * static_cast<std::int64_t>(ES);
  std::int64_t idx[kMaxDims] = {}, off = 0;
  for (std::int64_t r = r0, d = nd - 2; d >= 0; --d) {  // the multi-index of row r0
    idx[d] = r % sh[static_cast<int>(d)];
    r /= sh[static_cast<int>(d)];
    off += idx[d] * st[static_cast<int>(d)];
  }
  for (std::int64_t r = r0; r < r1; ++r) {
    unsigned char* out = dst + r * inner * static_cast<std::int64_t>(ES);
    const unsigned char* in = base + off * static_cast<std::int64_t>(ES);
    if (si == 1) {
      std::memcpy(out, in, static_cast<std::size_t>(inner) * ES);
    } else {
      for (std::int64_t i = 0; i < inner; ++i) std::memcpy(out + i * static_cast<std::int64_t>(ES), in + i * si * static_cast<std::int64_t>(ES), ES);
    }
    for (int d = nd - 2; d >= 0; --d) {  // the next row's offset
      if (++idx[d] < sh[d]) {
        off += st[d];
        break;
      }
      off -= st[d] * (sh[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace

// A strided tensor's copy, its rows split over the threads: a copy of the elements' bytes, so
// who copies which row changes nothing.
Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  const int nd = t.ndim();
  if (nd < 2 || t.numel() < kCopyGrain) return t.contiguous_copy();
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  const std::int64_t inner = t.shape()[nd - 1], rows = t.numel() / inner;
  unsigned char* dst = static_cast<unsigned char*>(out.storage()->data());
  const std::int64_t grain = std::max<std::int64_t>(1, kCopyGrain / std::max<std::int64_t>(inner, 1));
  auto run = [&](auto size) {
    parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) { copy_rows<decltype(size)::value>(t, dst, r0, r1); });
  };
  switch (dtype_size(t.dtype())) {
    case 1: run(std::integral_constant<std::size_t, 1>{}); break;
    case 2: run(std::integral_constant<std::size_t, 2>{}); break;
    case 4: run(std::integral_constant<std::size_t, 4>{}); break;
    default: run(std::integral_constant<std::size_t, 8>{}); break;
  }
  return out;
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
