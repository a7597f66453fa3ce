#include "bitgrad/tensor.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "bitgrad/checked.hpp"
#include "bitgrad/half.hpp"
#include "tensor/strided.hpp"

namespace bitgrad {

namespace {
std::shared_ptr<TensorImpl> make_impl(const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::allocate(checked_bytes(shape.numel(), dtype_size(dtype), "tensor"));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return impl;
}

template <class F>
void dispatch_any(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::i64: f(std::int64_t{}); break;
    case DType::u8: f(std::uint8_t{}); break;
    case DType::bf16: f(bf16_t{}); break;
    case DType::f16: f(f16_t{}); break;
  }
}

// One element from S to D: the 16-bit formats go through their exact f64 value and are
// rounded to nearest from the exact source value (bitgrad/half.hpp).
template <class S>
double to_double(S v) {
  if constexpr (std::is_same_v<S, bf16_t>) return half::bf16_value(v.bits);
  else if constexpr (std::is_same_v<S, f16_t>) return half::f16_value(v.bits);
  else return static_cast<double>(v);
}
template <class D, class S>
D convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else if constexpr (std::is_same_v<D, bf16_t>) {
    if constexpr (std::is_same_v<S, float>) return bf16_t{half::bf16_bits_f32(v)};
    else return bf16_t{half::bf16_bits(to_double(v))};
  } else if constexpr (std::is_same_v<D, f16_t>) return f16_t{half::f16_bits(to_double(v))};
  else if constexpr (std::is_integral_v<D> && std::is_integral_v<S>) return static_cast<D>(v);  // i64 -> u8: the low 8 bits
  else if constexpr (std::is_integral_v<D>) {
    // a float to an integer truncates toward zero; NaN, infinities and values out of the target's
    // range have no integer (C++ leaves them undefined): refused, as the cast op refuses them
    const double d = to_double(v);
    constexpr bool byte = std::is_same_v<D, std::uint8_t>;  // u8: (-1, 256); i64: [-2^63, 2^63)
    if (!(byte ? (d > -1.0 && d < 256.0) : (d >= -0x1p63 && d < 0x1p63)))
      throw Error(std::string("cast: the value ") + std::to_string(d) + " has no " + dtype_name(dtype_of<D>()) +
                  " (NaN, infinities and values out of range cannot be cast to an integer)");
    return static_cast<D>(d);
  } else return static_cast<D>(to_double(v));
}
}  // namespace

TensorImpl& Tensor::impl() const {
  if (!impl_) throw Error("tensor: use of an undefined tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) { return Tensor(make_impl(shape, dtype)); }

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.impl().storage->data(), 0, static_cast<std::size_t>(shape.numel()) * dtype_size(dtype));
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0, dtype); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full(Shape{}, value, dtype); }

Tensor Tensor::arange(std::int64_t n, DType dtype) {
  BITGRAD_CHECK(n >= 0, "arange", "length must be >= 0, got ", n);
  Tensor t = empty(Shape{n}, dtype);
  dispatch_any(dtype, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(t.impl().storage->data());
    for (std::int64_t i = 0; i < n; ++i) p[i] = convert<T>(i);
  });
  return t;
}

template <class T>
Tensor Tensor::from(std::span<const T> values, const Shape& shape) {
  BITGRAD_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(), "tensor", "got ", values.size(),
                " values for shape ", shape.str(), " (", shape.numel(), " elements)");
  Tensor t = empty(shape, dtype_of<T>());
  if (!values.empty()) std::memcpy(t.impl().storage->data(), values.data(), values.size() * sizeof(T));
  return t;
}
template Tensor Tensor::from<float>(std::span<const float>, const Shape&);
template Tensor Tensor::from<double>(std::span<const double>, const Shape&);
template Tensor Tensor::from<std::int64_t>(std::span<const std::int64_t>, const Shape&);
template Tensor Tensor::from<std::uint8_t>(std::span<const std::uint8_t>, const Shape&);

Tensor Tensor::view_of(const Tensor& base, const Shape& shape, const Shape& strides, std::int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = impl();
  std::int64_t acc = 1;
  for (int i = t.shape.ndim() - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != acc) return false;
    acc *= t.shape[i];
  }
  return true;
}

template <class T>
const T* Tensor::data() const {
  const TensorImpl& t = impl();
  BITGRAD_CHECK(t.dtype == dtype_of<T>(), "tensor", "data access as ", dtype_name(dtype_of<T>()), " but the tensor is ",
                dtype_name(t.dtype));
  return static_cast<const T*>(t.storage->data()) + t.offset;
}
template <class T>
T* Tensor::mutable_data() {
  TensorImpl& t = impl();
  BITGRAD_CHECK(t.dtype == dtype_of<T>(), "tensor", "data access as ", dtype_name(dtype_of<T>()), " but the tensor is ",
                dtype_name(t.dtype));
  t.storage->bump_version();
  return static_cast<T*>(t.storage->data()) + t.offset;
}
template const float* Tensor::data<float>() const;
template const double* Tensor::data<double>() const;
template const std::int64_t* Tensor::data<std::int64_t>() const;
template const std::uint8_t* Tensor::data<std::uint8_t>() const;
template const bf16_t* Tensor::data<bf16_t>() const;
template const f16_t* Tensor::data<f16_t>() const;
template float* Tensor::mutable_data<float>();
template double* Tensor::mutable_data<double>();
template std::int64_t* Tensor::mutable_data<std::int64_t>();
template std::uint8_t* Tensor::mutable_data<std::uint8_t>();
template bf16_t* Tensor::mutable_data<bf16_t>();
template f16_t* Tensor::mutable_data<f16_t>();

Tensor Tensor::contiguous_copy() const { return cast(dtype()); }

Tensor Tensor::cast(DType to) const {
  const TensorImpl& s = impl();
  Tensor out = empty(s.shape, to);
  if (to == s.dtype && is_contiguous()) {  // a copy of the bytes (a value-by-value convert was a leaf gradient's cost)
    const std::size_t bytes = static_cast<std::size_t>(numel()) * dtype_size(to);
    if (bytes) std::memcpy(out.impl().storage->data(), static_cast<const char*>(s.storage->data()) + s.offset * static_cast<std::int64_t>(dtype_size(to)), bytes);
    return out;
  }
  if (to == s.dtype && s.shape.ndim() == 2) {  // e.g. a transposed weight's gradient: in 32 x 32 tiles, not column by column
    const std::int64_t R = s.shape[0], C = s.shape[1], sr = s.strides[0], sc = s.strides[1];
    dispatch_any(to, [&](auto z) {
      using T = decltype(z);
      const T* src = static_cast<const T*>(s.storage->data()) + s.offset;
      T* dst = static_cast<T*>(out.impl().storage->data());
      for (std::int64_t r0 = 0; r0 < R; r0 += 32)
        for (std::int64_t c0 = 0; c0 < C; c0 += 32)
          for (std::int64_t r = r0; r < std::min(R, r0 + 32); ++r)
            for (std::int64_t c = c0; c < std::min(C, c0 + 32); ++c) dst[r * C + c] = src[r * sr + c * sc];
    });
    return out;
  }
  Shape dst_strides = contiguous_strides(s.shape);
  dispatch_any(s.dtype, [&](auto zs) {
    using S = decltype(zs);
    const S* src = static_cast<const S*>(s.storage->data()) + s.offset;
    dispatch_any(to, [&](auto zd) {
      using Dt = decltype(zd);
      Dt* dst = static_cast<Dt*>(out.impl().storage->data());
      detail::for_each_strided2(s.shape, s.strides, dst_strides,
                                [&](std::int64_t a, std::int64_t b) { dst[b] = convert<Dt>(src[a]); });
    });
  });
  return out;
}

double Tensor::item() const {
  BITGRAD_CHECK(numel() == 1, "item", "needs a tensor with one element, got shape ", shape().str());
  double v = 0;
  const TensorImpl& s = impl();
  dispatch_any(s.dtype, [&](auto z) {
    using T = decltype(z);
    v = to_double(static_cast<const T*>(s.storage->data())[s.offset]);
  });
  return v;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = cast(dtype_of<T>());
  const T* p = static_cast<const T*>(c.impl().storage->data());
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template std::vector<std::uint8_t> Tensor::to_vector<std::uint8_t>() const;

void Tensor::copy_from(const Tensor& src) {
  TensorImpl& d = impl();
  const TensorImpl& s = src.impl();
  BITGRAD_CHECK(d.shape == s.shape, "copy_from", "shapes differ: destination ", d.shape.str(), ", source ", s.shape.str());
  BITGRAD_CHECK(d.dtype == s.dtype, "copy_from", "dtypes differ: destination ", dtype_name(d.dtype), ", source ",
                dtype_name(s.dtype));
  d.storage->bump_version();
  // copied as unsigned words of the element's size: bits move unchanged (NaN payloads included)
  auto copy = [&](auto z) {
    using W = decltype(z);
    const W* sp = static_cast<const W*>(s.storage->data()) + s.offset;
    W* dp = static_cast<W*>(d.storage->data()) + d.offset;
    detail::for_each_strided2(d.shape, s.strides, d.strides, [&](std::int64_t a, std::int64_t b) { dp[b] = sp[a]; });
  };
  switch (dtype_size(d.dtype)) {
    case 1: copy(std::uint8_t{}); break;
    case 2: copy(std::uint16_t{}); break;
    case 4: copy(std::uint32_t{}); break;
    default: copy(std::uint64_t{}); break;
  }
}

void Tensor::fill_(double value) {
  TensorImpl& d = impl();
  d.storage->bump_version();
  dispatch_any(d.dtype, [&](auto z) {
    using T = decltype(z);
    T* p = static_cast<T*>(d.storage->data()) + d.offset;
    const T v = convert<T>(value);
    detail::for_each_strided2(d.shape, d.strides, d.strides, [&](std::int64_t a, std::int64_t) { p[a] = v; });
  });
}

}  // namespace bitgrad
