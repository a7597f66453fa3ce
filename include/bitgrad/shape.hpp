// Shape: up to 8 dimensions, row-major. Also used for strides (in elements).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace bitgrad {

inline constexpr int kMaxDims = 8;

class Shape {
 public:
  Shape() = default;  // a 0-d (scalar) shape
  Shape(std::initializer_list<std::int64_t> dims);
  explicit Shape(std::span<const std::int64_t> dims);
  explicit Shape(const std::vector<std::int64_t>& dims) : Shape(std::span<const std::int64_t>(dims)) {}

  int ndim() const { return n_; }
  std::int64_t operator[](int i) const { return d_[i]; }
  std::int64_t& operator[](int i) { return d_[i]; }
  // Python-style index: -1 is the last dimension. Throws on out of range.
  std::int64_t at(int i) const;
  int normalize_axis(int axis, const char* op) const;
  std::int64_t numel() const;
  const std::int64_t* begin() const { return d_; }
  const std::int64_t* end() const { return d_ + n_; }
  std::vector<std::int64_t> vec() const { return {d_, d_ + n_}; }
  void push_back(std::int64_t v);
  Shape without(int axis) const;  // drops one dimension
  std::string str() const;  // "[2, 3]"

  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::int64_t d_[kMaxDims] = {};
  int n_ = 0;
};

// Contiguous row-major strides of a shape.
Shape contiguous_strides(const Shape& s);
// NumPy broadcasting of two shapes; throws naming `op` and both shapes if incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace bitgrad
