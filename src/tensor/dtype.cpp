#include "bitgrad/dtype.hpp"

namespace bitgrad {
const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
  }
  return "?";
}
}  // namespace bitgrad

#include "bitgrad/error.hpp"
#include "bitgrad/half.hpp"

namespace bitgrad {
Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "fp16") return Precision::fp16;
  throw Error("precision: unknown precision '" + name + "'; expected fp32, bf16 or fp16");
}
const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}
}  // namespace bitgrad
