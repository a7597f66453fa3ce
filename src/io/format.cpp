#include "io/format.hpp"

#include <cstdarg>
#include <cstdio>

namespace bitgrad::io {

std::string strprintf(const char* format, ...) {
  char small[256];
  va_list ap;
  va_start(ap, format);
  const int n = std::vsnprintf(small, sizeof small, format, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof small) return std::string(small, static_cast<std::size_t>(n));
  std::string s(static_cast<std::size_t>(n) + 1, '\0');
  va_start(ap, format);
  std::vsnprintf(s.data(), s.size(), format, ap);
  va_end(ap);
  s.resize(static_cast<std::size_t>(n));
  return s;
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace bitgrad::io
