// printf into a std::string: the one text-formatting helper of the library (numbers in run
// files, command output). printf's formats are exact and locale-free here ("C" locale).
#pragma once

#include <string>

namespace bitgrad::io {

std::string strprintf(const char* format, ...) __attribute__((format(printf, 1, 2)));
// s as one word of a POSIX shell command line: in single quotes, each ' written '\''
std::string shell_quoted(const std::string& s);

}  // namespace bitgrad::io
