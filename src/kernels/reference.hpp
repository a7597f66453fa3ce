// Tables of the scalar reference kernels and of the SIMD fast paths (internal).
#pragma once

#include "kernels/kernels.hpp"

namespace bitgrad::kern {
namespace ref {
const Table<float>& table_f32();
const Table<double>& table_f64();
// fills in the layer and optimizer kernels (reference_nn.cpp)
template <class T>
void add_nn_kernels(Table<T>& tb);
}  // namespace ref
namespace avx2 {
const Table<float>& table_f32();
const Table<double>& table_f64();
}  // namespace avx2
namespace avx512 {
const Table<float>& table_f32();
const Table<double>& table_f64();
}  // namespace avx512
}  // namespace bitgrad::kern
