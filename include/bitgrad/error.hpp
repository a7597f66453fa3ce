// bitgrad's one exception type. Messages name the op (or file, key) and what was
// expected, e.g. "matmul: inner dimensions differ: a is [2, 3], b is [4, 5]".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace bitgrad {

// `text` with every byte that is not part of a well-formed UTF-8 sequence written as \xNN: a
// message that quotes a hostile name (an ONNX node's, a safetensors key) stays text that a
// terminal, Python's str and JSON take (the well-formed sequences of Unicode 15, table 3-7).
inline std::string valid_utf8(const std::string& text) {
  static const char* hex = "0123456789abcdef";
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::string out;
  out.reserve(n);
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
    if (c < 0x80) len = 1;
    else if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) len = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    bool ok = len > 0 && i + len <= n;
    for (std::size_t k = 1; ok && k < len; ++k) ok = k == 1 ? s[i + 1] >= lo && s[i + 1] <= hi : s[i + k] >= 0x80 && s[i + k] <= 0xbf;
    if (ok) {
      out.append(text, i, len);
      i += len;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    }
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(valid_utf8(what)) {}
};

// Two kinds a caller may want to tell apart (the Python module maps them to RuntimeError and
// FileNotFoundError; every other Error is bad input, ValueError):
// misuse of the autograd engine's state (a freed graph, backward of what needs no gradient, a
// saved tensor modified in place) ...
class StateError : public Error {
 public:
  explicit StateError(const std::string& what) : Error(what) {}
};
// ... and a file or directory the caller named that does not exist.
class NotFoundError : public Error {
 public:
  explicit NotFoundError(const std::string& what) : Error(what) {}
};

namespace detail {
template <class E, class... Args>
[[noreturn]] void fail_as(const char* where, const Args&... args) {
  std::ostringstream os;
  os << where << ": ";
  (os << ... << args);
  throw E(os.str());
}
template <class... Args>
[[noreturn]] void fail(const char* where, const Args&... args) {
  fail_as<Error>(where, args...);
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
// The same for misuse of the autograd engine's state (StateError).
#define BITGRAD_CHECK_STATE(cond, where, ...)                                         \
  do {                                                                                \
    if (!(cond)) ::bitgrad::detail::fail_as<::bitgrad::StateError>(where, __VA_ARGS__); \
  } while (0)
