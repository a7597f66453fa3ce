// Row-major iteration over strided tensors of one shape (internal helper).
#pragma once

#include <cstdint>

#include "bitgrad/shape.hpp"

namespace bitgrad::detail {

// Calls f(offset_a, offset_b) for every element in row-major order; offsets in elements.
template <class F>
void for_each_strided2(const Shape& shape, const Shape& sa, const Shape& sb, F&& f) {
  const int n = shape.ndim();
  if (shape.numel() == 0) return;
  if (n == 0) {
    f(std::int64_t(0), std::int64_t(0));
    return;
  }
  std::int64_t idx[kMaxDims] = {};
  std::int64_t oa = 0, ob = 0;
  const std::int64_t inner = shape[n - 1], ia = sa[n - 1], ib = sb[n - 1];
  for (;;) {
    for (std::int64_t i = 0; i < inner; ++i) f(oa + i * ia, ob + i * ib);
    int d = n - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= sa[d] * (shape[d] - 1);
      ob -= sb[d] * (shape[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace bitgrad::detail
