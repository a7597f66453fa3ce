#include "bitgrad/dtype.hpp"

namespace bitgrad {
const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}
}  // namespace bitgrad
