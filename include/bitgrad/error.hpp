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

// A short excerpt of untrusted text (a key, a cell, a file's contents) for an error message: at
// most `max` characters, control and non-ASCII bytes written as \xNN, "..." when cut.
inline std::string printable_excerpt(const std::string& text, std::size_t max = 60) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (const char ch : text) {
    if (out.size() >= max) return out + "...";
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace bitgrad

// BITGRAD_CHECK(cond, "op", "message parts", ...): throws bitgrad::Error("op: message").
#define BITGRAD_CHECK(cond, where, ...)                      \
  do {                                                       \
    if (!(cond)) ::bitgrad::detail::fail(where, __VA_ARGS__); \
  } while (0)
