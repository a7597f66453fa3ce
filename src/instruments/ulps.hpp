// Distances between floating-point values in units in the last place: the difference of two
// ordered integers of their bits (adjacent floats are 1 apart, +0 and -0 are 0 apart).
#pragma once

#include <cstdint>
#include <cstring>

namespace bitgrad::instruments {

inline std::int64_t ordered(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? -static_cast<std::int64_t>(u & 0x7fffffffu) : static_cast<std::int64_t>(u);
}
inline std::int64_t ordered(double f) {
  std::uint64_t u;
  std::memcpy(&u, &f, 8);
  return (u & 0x8000000000000000ull) ? -static_cast<std::int64_t>(u & 0x7fffffffffffffffull) : static_cast<std::int64_t>(u);
}

// |ordered(a) - ordered(b)|, saturated: far apart values of opposite signs (near infinity, NaNs)
// would overflow a signed difference
template <class T>
std::int64_t ulp_distance(T a, T b) {
  const std::int64_t x = ordered(a), y = ordered(b);
  const std::uint64_t d = x >= y ? static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y) : static_cast<std::uint64_t>(y) - static_cast<std::uint64_t>(x);
  return d > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(d);
}

}  // namespace bitgrad::instruments
