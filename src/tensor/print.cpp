// Debug printing, NumPy style, summarised beyond 6 entries per dimension:
//   tensor([[1.5, -2], [0.25, 3]], f32, shape=[2, 2], requires_grad)
#include <cstdio>
#include <ostream>
#include <string>

#include "bitgrad/half.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad {
namespace {

std::string fmt_value(const Tensor& c, std::int64_t i) {
  char buf[48];
  switch (c.dtype()) {
    case DType::f32: std::snprintf(buf, sizeof buf, "%.7g", static_cast<double>(c.data<float>()[i])); break;
    case DType::f64: std::snprintf(buf, sizeof buf, "%.16g", c.data<double>()[i]); break;
    case DType::i64: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(c.data<std::int64_t>()[i])); break;
    case DType::u8: std::snprintf(buf, sizeof buf, "%u", static_cast<unsigned>(c.data<std::uint8_t>()[i])); break;
    case DType::bf16: std::snprintf(buf, sizeof buf, "%.4g", half::bf16_value(c.data<bf16_t>()[i].bits)); break;
    case DType::f16: std::snprintf(buf, sizeof buf, "%.5g", half::f16_value(c.data<f16_t>()[i].bits)); break;
  }
  return buf;
}

void emit(const Tensor& c, int dim, std::int64_t base, std::string& out) {
  const Shape& s = c.shape();
  if (dim == s.ndim()) {
    out += fmt_value(c, base);
    return;
  }
  const std::int64_t n = s[dim];
  const std::int64_t stride = c.strides()[dim];
  out += "[";
  for (std::int64_t i = 0; i < n; ++i) {
    if (n > 6 && i == 3) {
      out += "..., ";
      i = n - 3;
    }
    emit(c, dim + 1, base + i * stride, out);
    if (i + 1 < n) out += ", ";
  }
  out += "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  Tensor c = contiguous_copy();
  std::string out = "tensor(";
  emit(c, 0, 0, out);
  out += ", ";
  out += dtype_name(dtype());
  out += ", shape=" + shape().str();
  if (requires_grad()) out += ", requires_grad";
  if (!label().empty()) out += ", label=" + label();
  out += ")";
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace bitgrad
