// Row-major iteration over strided tensors of one shape (internal helper).
#pragma once

#include <cstdint>

#include "bitgrad/shape.hpp"

namespace bitgrad::detail {

// Calls f(offset_a, offset_b) for every element of rows [r0, r1) in row-major order (a row: the
// last dimension; a 0-d tensor is one row of one element); offsets in elements.
template <class F>
void for_each_strided2_rows(const Shape& shape, const Shape& sa, const Shape& sb, std::int64_t r0, std::int64_t r1, F&& f) {
  const int n = shape.ndim();
  if (shape.numel() == 0 || r0 >= r1) return;
  if (n == 0) {
    f(std::int64_t(0), std::int64_t(0));
    return;
  }
  std::int64_t idx[kMaxDims] = {};
  std::int64_t oa = 0, ob = 0;
  for (std::int64_t r = r0, d = n - 2; d >= 0; --d) {  // the multi-index of row r0
    idx[d] = r % shape[static_cast<int>(d)];
    r /= shape[static_cast<int>(d)];
    oa += idx[d] * sa[static_cast<int>(d)];
    ob += idx[d] * sb[static_cast<int>(d)];
  }
  const std::int64_t inner = shape[n - 1], ia = sa[n - 1], ib = sb[n - 1];
  for (std::int64_t r = r0;;) {
    if (ia == 1 && ib == 1) {  // unit strides: a loop the compiler can vectorize
      for (std::int64_t i = 0; i < inner; ++i) f(oa + i, ob + i);
    } else {
      for (std::int64_t i = 0; i < inner; ++i) f(oa + i * ia, ob + i * ib);
    }
    if (++r == r1) return;
    for (int d = n - 2; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= sa[d] * (shape[d] - 1);
      ob -= sb[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Calls f(offset_a, offset_b) for every element in row-major order; offsets in elements.
template <class F>
void for_each_strided2(const Shape& shape, const Shape& sa, const Shape& sb, F&& f) {
  const std::int64_t inner = shape.ndim() ? shape[shape.ndim() - 1] : 1;
  for_each_strided2_rows(shape, sa, sb, 0, inner ? shape.numel() / inner : 0, f);
}

// Calls f(out, offset_a, offset_b, offset_c) for every element in row-major order, out counting
// 0, 1, 2, ... (a contiguous output); offsets in elements (stride 0 for broadcast dimensions).
template <class F>
void for_each_strided3(const Shape& shape, const Shape& sa, const Shape& sb, const Shape& sc, F&& f) {
  const int n = shape.ndim();
  if (shape.numel() == 0) return;
  if (n == 0) {
    f(std::int64_t(0), std::int64_t(0), std::int64_t(0), std::int64_t(0));
    return;
  }
  std::int64_t idx[kMaxDims] = {};
  std::int64_t out = 0, oa = 0, ob = 0, oc = 0;
  const std::int64_t inner = shape[n - 1], ia = sa[n - 1], ib = sb[n - 1], ic = sc[n - 1];
  // inner strides of 0 or 1 (contiguous or broadcast, as a mask over a batch of scores) known
  // at compile time: loops the compiler can vectorize
  auto unit = [&]<int A, int B, int C>() {
    for (std::int64_t i = 0; i < inner; ++i) f(out + i, oa + i * A, ob + i * B, oc + i * C);
  };
  const bool small = (ia == 0 || ia == 1) && (ib == 0 || ib == 1) && (ic == 0 || ic == 1);
  for (;;) {
    if (!small) {
      for (std::int64_t i = 0; i < inner; ++i) f(out + i, oa + i * ia, ob + i * ib, oc + i * ic);
    } else {
      switch (ia * 4 + ib * 2 + ic) {
        case 0: unit.template operator()<0, 0, 0>(); break;
        case 1: unit.template operator()<0, 0, 1>(); break;
        case 2: unit.template operator()<0, 1, 0>(); break;
        case 3: unit.template operator()<0, 1, 1>(); break;
        case 4: unit.template operator()<1, 0, 0>(); break;
        case 5: unit.template operator()<1, 0, 1>(); break;
        case 6: unit.template operator()<1, 1, 0>(); break;
        default: unit.template operator()<1, 1, 1>(); break;
      }
    }
    out += inner;
    int d = n - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        oa += sa[d];
        ob += sb[d];
        oc += sc[d];
        break;
      }
      oa -= sa[d] * (shape[d] - 1);
      ob -= sb[d] * (shape[d] - 1);
      oc -= sc[d] * (shape[d] - 1);
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace bitgrad::detail
