// The kernel table of each code path. The scalar reference is the default; a fast path
// replaces it where the CPU has the instructions (BLIS-style: reference installed,
// overridden).
#include "bitgrad/error.hpp"
#include "kernels/reference.hpp"

namespace bitgrad::kern {

const Table<float>& table_f32(Isa isa) {
  switch (isa) {
    case Isa::scalar: return ref::table_f32();
    case Isa::avx2: return avx2::table_f32();
    case Isa::avx512: return avx512::table_f32();
  }
  return ref::table_f32();
}

const Table<double>& table_f64(Isa isa) {
  switch (isa) {
    case Isa::scalar: return ref::table_f64();
    case Isa::avx2: return avx2::table_f64();
    case Isa::avx512: return avx512::table_f64();
  }
  return ref::table_f64();
}

}  // namespace bitgrad::kern
