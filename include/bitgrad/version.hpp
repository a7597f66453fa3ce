// Library version and numerics version. The numerics version names the exact set of
// canonical evaluation orders and elementary-function algorithms (docs/numerics.md);
// any change that can move a single bit of any result bumps it, and the golden
// fingerprints in tests/ pin it.
#pragma once

namespace bitgrad {
inline constexpr const char* kVersion = "0.1.0";
inline constexpr int kNumericsVersion = 4;
const char* git_commit();  // short commit of the build, or "unknown"
}  // namespace bitgrad
