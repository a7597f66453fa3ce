// Element types. f32 and f64 are differentiable; i64 holds indices and labels; u8 holds
// booleans (masks, comparison results); bf16 and f16 are storage only (Tensor::cast to and
// from them rounds as bitgrad/half.hpp says; the ops compute in f32 or f64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace bitgrad {

enum class DType : std::uint8_t { f32, f64, i64, u8, bf16, f16 };

// The 16-bit storage formats as their bit patterns.
struct bf16_t {
  std::uint16_t bits;
};
struct f16_t {
  std::uint16_t bits;
};

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i64: return 8;
    case DType::u8: return 1;
    case DType::bf16: return 2;
    case DType::f16: return 2;
  }
  return 0;
}
constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
const char* dtype_name(DType t);

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() { return DType::f32; }
template <>
constexpr DType dtype_of<double>() { return DType::f64; }
template <>
constexpr DType dtype_of<std::int64_t>() { return DType::i64; }
template <>
constexpr DType dtype_of<std::uint8_t>() { return DType::u8; }
template <>
constexpr DType dtype_of<bf16_t>() { return DType::bf16; }
template <>
constexpr DType dtype_of<f16_t>() { return DType::f16; }

}  // namespace bitgrad
