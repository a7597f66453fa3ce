// bitgrad's one exception type. Messages name the op (or file, key) and what was
// expected, e.g. "matmul: inner dimensions differ: a is [2, 3], b is [4, 5]".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace bitgrad {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
[[noreturn]] void fail(const char* where, const Args&... args) {
  std::ostringstream os;
  os << where << ": ";
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace bitgrad

// BITGRAD_CHECK(cond, "op", "message parts", ...): throws bitgrad::Error("op: message").
#define BITGRAD_CHECK(cond, where, ...)                      \
  do {                                                       \
    if (!(cond)) ::bitgrad::detail::fail(where, __VA_ARGS__); \
  } while (0)
