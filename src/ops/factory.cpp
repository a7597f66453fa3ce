// Factories, not differentiable: one_hot, arange (ONNX Range), eye, eye_like and the
// random factories, each a pure function of its arguments; the random ones keyed by a Stream and
// the index of their first element, like every draw in bitgrad (numerics.md §12, §27).
#include <cmath>

#include "ops/op_util.hpp"

namespace bitgrad {
namespace {

// v as the dtype's value (float types rounded once; i64 and u8 truncated toward zero)
template <class T>
T as(double v) {
  return static_cast<T>(v);
}

template <class F>
void for_dtype(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); return;
    case DType::f64: f(double{}); return;
    case DType::i64: f(std::int64_t{}); return;
    case DType::u8: f(std::uint8_t{}); return;
    default: detail::fail(op, "unsupported dtype ", dtype_name(dt), "; expected f32, f64, i64 or u8");
  }
}

// the indices of one_hot as integers (a float index is truncated toward zero, as ONNX's cast)
std::vector<std::int64_t> index_values(const Tensor& t, const char* op) {
  Tensor c = kern::contiguous(t);
  std::vector<std::int64_t> v(static_cast<std::size_t>(c.numel()));
  switch (c.dtype()) {
    case DType::i64: v = c.to_vector<std::int64_t>(); break;
    case DType::u8:
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = c.data<std::uint8_t>()[i];
      break;
    case DType::f32:
    case DType::f64: {
      const std::vector<double> d = c.cast(DType::f64).to_vector<double>();
      for (std::size_t i = 0; i < v.size(); ++i) {
        BITGRAD_CHECK(std::isfinite(d[i]) && std::fabs(d[i]) < 9.0e18, op, "index ", d[i], " at position ", i, " is not a finite integer value");
        v[i] = static_cast<std::int64_t>(d[i]);
      }
      break;
    }
    default: detail::fail(op, "unsupported index dtype ", dtype_name(c.dtype()));
  }
  return v;
}

Tensor random_fill(const char* op, const Shape& shape, const rng::Stream& stream, std::uint64_t first, DType dt, bool normal) {
  Tensor y = Tensor::empty(shape, dt);
  const std::int64_t n = y.numel();
  if (dt == DType::f32) {
    float* p = kern::out_ptr<float>(y);
    for (std::int64_t j = 0; j < n; ++j) {
      const std::uint64_t i = first + static_cast<std::uint64_t>(j);
      p[j] = normal ? stream.normal_f32(i) : stream.uniform_f32(i);
    }
  } else if (dt == DType::f64) {
    double* p = kern::out_ptr<double>(y);
    for (std::int64_t j = 0; j < n; ++j) {
      const std::uint64_t i = first + static_cast<std::uint64_t>(j);
      p[j] = normal ? stream.normal_f64(i) : stream.uniform_f64(i);
    }
  } else {
    detail::fail(op, "expected a floating dtype (f32 or f64), got ", dtype_name(dt));
  }
  return y;
}

}  // namespace

Tensor one_hot(const Tensor& indices, std::int64_t depth, int axis, double off, double on, DType dtype) {
  BITGRAD_CHECK(indices.defined(), "one_hot", "the indices are undefined");
  BITGRAD_CHECK(depth >= 1, "one_hot", "depth is ", depth, "; expected >= 1");
  const int r = indices.ndim() + 1;
  BITGRAD_CHECK(r <= kMaxDims, "one_hot", "the result would have ", r, " dimensions; at most ", kMaxDims);
  BITGRAD_CHECK(axis >= -r && axis < r, "one_hot", "axis ", axis, " is out of range for a result of ", r, " dimensions (indices ",
                indices.shape().str(), ")");
  if (axis < 0) axis += r;
  const std::vector<std::int64_t> idx = index_values(indices, "one_hot");
  // the result viewed [outer, depth, inner]: outer the index axes before `axis`, inner those after
  Shape out;
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < indices.ndim(); ++d) {
    if (d == axis) out.push_back(depth);
    out.push_back(indices.shape()[d]);
    (d < axis ? outer : inner) *= indices.shape()[d];
  }
  if (axis == indices.ndim()) out.push_back(depth);
  Tensor y = Tensor::full(out, off, dtype);
  for_dtype(dtype, "one_hot", [&](auto tag) {
    using T = decltype(tag);
    T* p = kern::out_ptr<T>(y);
    const T v = as<T>(on);
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t i = 0; i < inner; ++i) {
        std::int64_t c = idx[static_cast<std::size_t>(o * inner + i)];
        if (c < 0) c += depth;  // ONNX: negative indices count from the end
        if (c >= 0 && c < depth) p[(o * depth + c) * inner + i] = v;
      }
  });
  return y;
}

Tensor arange(double start, double limit, double delta, DType dtype) {
  BITGRAD_CHECK(delta != 0 && std::isfinite(delta), "arange", "delta is ", delta, "; expected a finite nonzero number");
  BITGRAD_CHECK(std::isfinite(start) && std::isfinite(limit), "arange", "start ", start, " and limit ", limit, " must be finite");
  std::int64_t count;
  if (dtype == DType::i64) {
    const auto s = static_cast<std::int64_t>(start), l = static_cast<std::int64_t>(limit), d = static_cast<std::int64_t>(delta);
    BITGRAD_CHECK(static_cast<double>(s) == start && static_cast<double>(l) == limit && static_cast<double>(d) == delta, "arange",
                  "an i64 range takes integers, got start ", start, ", limit ", limit, ", delta ", delta);
    // ceil of (l - s) / d in integers
    const std::int64_t num = l - s;
    std::int64_t q = num / d;
    if (q * d != num && ((num > 0) == (d > 0))) ++q;
    count = std::max<std::int64_t>(q, 0);
    Tensor y = Tensor::empty(Shape{count}, dtype);
    std::int64_t* p = kern::out_ptr<std::int64_t>(y);
    for (std::int64_t i = 0; i < count; ++i) p[i] = s + i * d;
    return y;
  }
  const double c = std::ceil((limit - start) / delta);
  BITGRAD_CHECK(c < 1e12, "arange", "start ", start, ", limit ", limit, ", delta ", delta, " give ", c, " elements");
  count = c > 0 ? static_cast<std::int64_t>(c) : 0;
  Tensor y = Tensor::empty(Shape{count}, dtype);
  for_dtype(dtype, "arange", [&](auto tag) {
    using T = decltype(tag);
    T* p = kern::out_ptr<T>(y);
    for (std::int64_t i = 0; i < count; ++i) p[i] = as<T>(start + static_cast<double>(i) * delta);
  });
  return y;
}

Tensor eye(std::int64_t n, std::int64_t m, std::int64_t k, DType dtype) {
  if (m < 0) m = n;
  BITGRAD_CHECK(n >= 0, "eye", "n is ", n, "; expected >= 0");
  Tensor y = Tensor::zeros(Shape{n, m}, dtype);
  for_dtype(dtype, "eye", [&](auto tag) {
    using T = decltype(tag);
    T* p = kern::out_ptr<T>(y);
    for (std::int64_t i = 0; i < n; ++i)
      if (i + k >= 0 && i + k < m) p[i * m + i + k] = as<T>(1.0);
  });
  return y;
}

Tensor eye_like(const Tensor& x, std::int64_t k, DType dtype) {
  BITGRAD_CHECK(x.defined() && x.ndim() == 2, "eye_like", "expected a 2-d tensor, got shape ",
                x.defined() ? x.shape().str() : "undefined");
  return eye(x.shape()[0], x.shape()[1], k, dtype);
}

Tensor randn(const Shape& shape, const rng::Stream& stream, std::uint64_t first_index, DType dtype) {
  return random_fill("randn", shape, stream, first_index, dtype, true);
}
Tensor rand(const Shape& shape, const rng::Stream& stream, std::uint64_t first_index, DType dtype) {
  return random_fill("rand", shape, stream, first_index, dtype, false);
}
Tensor randn_like(const Tensor& x, const rng::Stream& stream, std::uint64_t first_index) {
  BITGRAD_CHECK(x.defined(), "randn_like", "the input is undefined");
  return random_fill("randn_like", x.shape(), stream, first_index, x.dtype(), true);
}
Tensor rand_like(const Tensor& x, const rng::Stream& stream, std::uint64_t first_index) {
  BITGRAD_CHECK(x.defined(), "rand_like", "the input is undefined");
  return random_fill("rand_like", x.shape(), stream, first_index, x.dtype(), false);
}

}  // namespace bitgrad
