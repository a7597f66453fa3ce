// Sizes by construction: element counts, byte counts and offsets computed with a
// check, so that a hostile shape (a file's, a request's, a Python call's) is an error naming what
// it sized, never a product that wraps around to a small number and indexes out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitgrad {

// The most elements a shape may describe (2^56: 2^59 bytes at 8 bytes each, so every byte count
// and offset of a valid tensor fits in int64 with room to add).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 56;

// a * b for sizes (a, b >= 0); throws Error("WHAT: ...") when the product passes kMaxElements.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what);
// a + b for sizes and offsets (a, b >= 0), the same bound.
std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what);
// n elements of `item` bytes each, as a byte count.
std::size_t checked_bytes(std::int64_t n, std::size_t item, const char* what);

}  // namespace bitgrad
