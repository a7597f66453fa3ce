// Rounding to bf16 / f16 values kept in f32 or f64 (mixed precision, docs/numerics.md §23-24):
// element by element (integer work on the bit pattern, no arithmetic whose order could differ),
// parallel over contiguous chunks. Rounding to nearest goes through the kernel table (the AVX-512
// path converts f32 with vcvtps2ph, which rounds to nearest even as the reference does);
// stochastic rounding has one implementation for every code path.
#pragma once

#include <cstdint>

#include "bitgrad/half.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::kern {

// y[k] = x[k] rounded to p's format and widened back (exact): to nearest, or, with a stream,
// stochastically with the random word stream.u32(first + k). p = fp32 copies.
template <class T>
void round_to_precision(const T* x, T* y, std::int64_t n, Precision p, const rng::Stream* stochastic, std::uint64_t first);

}  // namespace bitgrad::kern
