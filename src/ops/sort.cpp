// topk and sort along an axis. The order of each lane is a stable sort on a total
// order (NaN above +inf, -0 equal to +0), so ties keep the lower index first; the values are
// then gather(x, axis, indices), whose backward sends each gradient to its selected element
// (one source per destination: exact). Numerics.md §27.
#include <algorithm>
#include <cmath>

#include "ops/op_util.hpp"

namespace bitgrad {
namespace {

template <class T>
bool nan_of(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// indices [outer, k, inner] of the first k of each lane of x [outer, L, inner] in the order
template <class T>
void order_lanes(const T* x, std::int64_t outer, std::int64_t L, std::int64_t inner, std::int64_t k, bool descending,
                 std::int64_t* out) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(L));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      const T* lane = x + o * L * inner + i;
      for (std::int64_t j = 0; j < L; ++j) idx[static_cast<std::size_t>(j)] = j;
      auto key = [&](std::int64_t j) { return lane[j * inner]; };
      // "a goes before b": strictly greater (descending) or strictly less, NaN the greatest
      auto before = [&](std::int64_t a, std::int64_t b) {
        const T va = key(a), vb = key(b);
        const bool na = nan_of(va), nb = nan_of(vb);
        if (na || nb) return descending ? (na && !nb) : (!na && nb);
        return descending ? va > vb : va < vb;
      };
      std::stable_sort(idx.begin(), idx.end(), before);
      for (std::int64_t j = 0; j < k; ++j) out[(o * k + j) * inner + i] = idx[static_cast<std::size_t>(j)];
    }
}

ValuesIndices select(const char* op, const Tensor& x, std::int64_t k, int axis, bool descending, CallSite site) {
  BITGRAD_CHECK(x.defined(), op, "the input is undefined");
  BITGRAD_CHECK(x.ndim() >= 1, op, "the input must have at least one dimension, got a 0-d tensor");
  axis = x.shape().normalize_axis(axis, op);
  const std::int64_t L = x.shape()[axis];
  BITGRAD_CHECK(k >= 0 && k <= L, op, "k is ", k, "; expected 0 .. ", L, " (axis ", axis, " of shape ", x.shape().str(), ")");
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (int d = axis + 1; d < x.ndim(); ++d) inner *= x.shape()[d];
  Shape out = x.shape();
  out[axis] = k;
  Tensor xc = kern::contiguous(x);
  Tensor idx = Tensor::empty(out, DType::i64);
  std::int64_t* pi = kern::out_ptr<std::int64_t>(idx);
  switch (x.dtype()) {
    case DType::f32: order_lanes(xc.data<float>(), outer, L, inner, k, descending, pi); break;
    case DType::f64: order_lanes(xc.data<double>(), outer, L, inner, k, descending, pi); break;
    case DType::i64: {
      order_lanes(xc.data<std::int64_t>(), outer, L, inner, k, descending, pi);
      Tensor v = Tensor::empty(out, DType::i64);  // integers: no gradient
      std::int64_t* pv = kern::out_ptr<std::int64_t>(v);
      const std::int64_t* px = xc.data<std::int64_t>();
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < k; ++j)
          for (std::int64_t i = 0; i < inner; ++i) pv[(o * k + j) * inner + i] = px[(o * L + pi[(o * k + j) * inner + i]) * inner + i];
      return {v, idx};
    }
    default: detail::fail(op, "unsupported dtype ", dtype_name(x.dtype()), "; expected f32, f64 or i64");
  }
  return {gather(x, axis, idx, site), idx};
}

}  // namespace

ValuesIndices topk(const Tensor& x, std::int64_t k, int axis, bool largest, bool /*sorted*/, CallSite site) {
  // unsorted results come sorted too (ONNX leaves their order open)
  return select("topk", x, k, axis, largest, site);
}

ValuesIndices sort(const Tensor& x, int axis, bool descending, CallSite site) {
  BITGRAD_CHECK(x.defined(), "sort", "the input is undefined");
  const int a = x.ndim() >= 1 ? x.shape().normalize_axis(axis, "sort") : 0;
  return select("sort", x, x.ndim() >= 1 ? x.shape()[a] : 0, axis, descending, site);
}

}  // namespace bitgrad
