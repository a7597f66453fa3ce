// Library version and numerics version. The numerics version names the exact set of
// canonical evaluation orders and elementary-function algorithms (docs/numerics.md);
// any change that can move a single bit of any result bumps it, and the golden
// fingerprints in tests/ pin it. The library version (semantic versioning) is written in
// <bitgrad/version_number.hpp>, which CMakeLists.txt reads into project();
// docs/install.md#versions says how the two relate.
#pragma once

#include "bitgrad/version_number.hpp"

namespace bitgrad {
inline constexpr const char* kVersion = BITGRAD_VERSION_STRING;
inline constexpr int kNumericsVersion = 7;
const char* git_commit();  // short commit of the build, or "unknown"
}  // namespace bitgrad
