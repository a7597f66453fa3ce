#include "kernels/tensor_ops.hpp"

#include <algorithm>
#include <cstdint>

#include "kernels/thread_pool.hpp"
#include "tensor/strided.hpp"

namespace bitgrad::kern {

namespace {
constexpr std::int64_t kCopyGrain = 16384;  // elements per chunk of a strided copy
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
  auto run = [&](auto z) {
    using W = decltype(z);
    const W* sp = static_cast<const W*>(t.storage()->data()) + t.offset();
    W* dp = static_cast<W*>(out.storage()->data());
    parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
      detail::for_each_strided2_rows(t.shape(), t.strides(), out.strides(), r0, r1,
                                     [&](std::int64_t a, std::int64_t b) { dp[b] = sp[a]; });
    });
  };
  switch (dtype_size(t.dtype())) {
    case 1: run(std::uint8_t{}); break;
    case 2: run(std::uint16_t{}); break;
    case 4: run(std::uint32_t{}); break;
    default: run(std::uint64_t{}); break;
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
