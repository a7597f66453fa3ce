#include "bitgrad/shape.hpp"

#include <string>

#include "bitgrad/checked.hpp"
#include "bitgrad/error.hpp"

namespace bitgrad {

namespace {
[[noreturn]] void past_bound(const char* what, std::int64_t a, const char* op, std::int64_t b) {
  throw Error(std::string(what) + ": " + std::to_string(a) + op + std::to_string(b) + " is more than 2^56 (" + std::to_string(kMaxElements) +
              "), the most elements or bytes a tensor may span");
}
}  // namespace

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > kMaxElements) past_bound(what, a, " x ", b);
  return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r) || r > kMaxElements) past_bound(what, a, " + ", b);
  return r;
}

std::size_t checked_bytes(std::int64_t n, std::size_t item, const char* what) {
  return static_cast<std::size_t>(checked_mul(n, static_cast<std::int64_t>(item), what));
}

Shape::Shape(std::initializer_list<std::int64_t> dims) : Shape(std::span<const std::int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const std::int64_t> dims) {
  BITGRAD_CHECK(dims.size() <= static_cast<std::size_t>(kMaxDims), "shape", "at most ", kMaxDims, " dimensions are supported, got ",
                dims.size());
  for (std::int64_t d : dims) {
    BITGRAD_CHECK(d >= 0, "shape", "dimensions must be >= 0, got ", d);
    d_[n_++] = d;
  }
  (void)numel();  // a shape's element count fits (checked_mul): a hostile one fails here, named
}

std::int64_t Shape::at(int i) const {
  return d_[normalize_axis(i, "shape")];
}

int Shape::normalize_axis(int axis, const char* op) const {
  int a = axis < 0 ? axis + n_ : axis;
  BITGRAD_CHECK(a >= 0 && a < n_, op, "axis ", axis, " is out of range for shape ", str());
  return a;
}

std::int64_t Shape::numel() const {
  for (int i = 0; i < n_; ++i)
    if (d_[i] == 0) return 0;  // no elements, whatever the other dimensions
  std::int64_t n = 1;
  for (int i = 0; i < n_; ++i) {
    std::int64_t r = 0;
    if (d_[i] < 0 || __builtin_mul_overflow(n, d_[i], &r) || r > kMaxElements)
      throw Error("shape: " + str() + (d_[i] < 0 ? " has a negative dimension" : " has more than 2^56 elements, the most a tensor may hold"));
    n = r;
  }
  return n;
}

void Shape::push_back(std::int64_t v) {
  BITGRAD_CHECK(n_ < kMaxDims, "shape", "at most ", kMaxDims, " dimensions are supported");
  BITGRAD_CHECK(v >= 0, "shape", "dimensions must be >= 0, got ", v);
  d_[n_++] = v;
  (void)numel();
}

Shape Shape::without(int axis) const {
  Shape s;
  for (int i = 0; i < n_; ++i)
    if (i != axis) s.push_back(d_[i]);
  return s;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.n_ != b.n_) return false;
  for (int i = 0; i < a.n_; ++i)
    if (a.d_[i] != b.d_[i]) return false;
  return true;
}

Shape contiguous_strides(const Shape& s) {
  Shape st = s;
  std::int64_t acc = 1;
  for (int i = s.ndim() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  int n = a.ndim() > b.ndim() ? a.ndim() : b.ndim();
  std::int64_t out[kMaxDims];
  for (int i = 0; i < n; ++i) {
    int ia = a.ndim() - n + i, ib = b.ndim() - n + i;
    std::int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    BITGRAD_CHECK(da == db || da == 1 || db == 1, op, "shapes ", a.str(), " and ", b.str(),
                  " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::span<const std::int64_t>(out, n));
}

}  // namespace bitgrad
