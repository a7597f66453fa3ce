// Tensor: a shared handle to a strided view of a Storage, plus autograd metadata.
// Copying a Tensor shares it (like a reference); clone() copies the data.
//
// Layout: row-major; views (reshape of contiguous data, permute, transpose, slice, expand)
// are strided and share storage; kernels take contiguous inputs and call contiguous()
// where needed. Differentiable ops live in ops.hpp; the autograd members below are
// implemented by the autograd layer.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bitgrad/dtype.hpp"
#include "bitgrad/error.hpp"
#include "bitgrad/shape.hpp"
#include "bitgrad/storage.hpp"

namespace bitgrad {

namespace autograd {
struct AutogradMeta;
}

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  std::int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  bool requires_grad = false;
  std::shared_ptr<autograd::AutogradMeta> autograd;  // grad_fn, grad, label
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (no autograd history) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype = DType::f32);
  static Tensor arange(std::int64_t n, DType dtype = DType::f32);
  template <class T>
  static Tensor from(std::span<const T> values, const Shape& shape);
  template <class T>
  static Tensor from(const std::vector<T>& values, const Shape& shape) {
    return from<T>(std::span<const T>(values), shape);
  }
  // A view of existing storage (no copy).
  static Tensor view_of(const Tensor& base, const Shape& shape, const Shape& strides, std::int64_t offset);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  std::int64_t offset() const { return impl().offset; }
  int ndim() const { return impl().shape.ndim(); }
  std::int64_t dim(int i) const { return impl().shape.at(i); }
  std::int64_t numel() const { return impl().shape.numel(); }
  DType dtype() const { return impl().dtype; }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  Device device() const { return impl().storage ? impl().storage->device() : Device::cpu; }
  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

  // ---- data access: pointer to the first element (offset applied); checks the dtype ----
  template <class T>
  const T* data() const;
  template <class T>
  T* mutable_data();  // bumps the storage version: use only for in-place writes

  // ---- copies and conversions (no autograd; see ops.hpp for differentiable ones) ----
  Tensor contiguous_copy() const;  // always a fresh contiguous copy of the data
  Tensor cast(DType dtype) const;  // conversion copy
  double item() const;             // the value of a one-element tensor
  template <class T>
  std::vector<T> to_vector() const;  // row-major copy of the elements
  void copy_from(const Tensor& src);  // in place, same shape and dtype
  void fill_(double value);           // in place

  std::string str() const;

  // ---- autograd (implemented in src/autograd) ----
  bool requires_grad() const { return defined() && impl().requires_grad; }
  Tensor& set_requires_grad(bool on = true);
  bool is_leaf() const;
  Tensor grad() const;  // accumulated gradient of a leaf (undefined if none)
  void set_grad(const Tensor& g);
  void zero_grad();     // drops the accumulated gradient
  Tensor detach() const;  // shares data, no history, requires_grad false
  // Reverse-mode pass from this tensor. A non-scalar needs an explicit seed of the same
  // shape. Without retain_graph the graph is freed and a second call is an error.
  void backward(const Tensor& seed = Tensor(), bool retain_graph = false) const;
  const std::string& label() const;  // user label shown in traces and errors
  Tensor& set_label(const std::string& label);

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Calls f(ptr) typed by dtype; floating types only unless noted.
#define BITGRAD_DISPATCH_FLOAT(dtype, op, T, ...)                                         \
  [&] {                                                                                   \
    switch (dtype) {                                                                      \
      case ::bitgrad::DType::f32: { using T = float; return __VA_ARGS__(); }              \
      case ::bitgrad::DType::f64: { using T = double; return __VA_ARGS__(); }             \
      default: ::bitgrad::detail::fail(op, "expected a floating dtype (f32 or f64), got ", \
                                       ::bitgrad::dtype_name(dtype));                      \
    }                                                                                     \
  }()

}  // namespace bitgrad
