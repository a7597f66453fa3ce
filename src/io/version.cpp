#include "bitgrad/version.hpp"

#ifndef BITGRAD_GIT_COMMIT
#define BITGRAD_GIT_COMMIT "unknown"
#endif

namespace bitgrad {
const char* git_commit() { return BITGRAD_GIT_COMMIT; }
}  // namespace bitgrad
