#include "bitgrad/dtype.hpp"

#include "bitgrad/enum_names.hpp"
#include "bitgrad/error.hpp"
#include "bitgrad/half.hpp"

namespace bitgrad {
namespace {
constexpr EnumName<DType> kDTypes[] = {{DType::f32, "f32"}, {DType::f64, "f64"}, {DType::i64, "i64"},
                                       {DType::u8, "u8"},   {DType::bf16, "bf16"}, {DType::f16, "f16"}};
constexpr EnumName<Precision> kPrecisions[] = {{Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}};
}  // namespace

const char* dtype_name(DType t) { return enum_name(kDTypes, t); }

Precision parse_precision(const std::string& name) {
  if (auto p = enum_from_name(kPrecisions, name)) return *p;
  throw Error("precision: unknown precision '" + name + "'; expected " + enum_names_list(kPrecisions));
}
const char* precision_name(Precision p) { return enum_name(kPrecisions, p); }
}  // namespace bitgrad
