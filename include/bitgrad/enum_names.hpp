// Enum <-> name through one constexpr table per enum, {value, name} in the order errors list
// the names: the one place an enum's spellings are written (configuration files, run files,
// the CLI, error messages).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace bitgrad {

template <class E>
struct EnumName {
  E value;
  const char* name;
};

// The name of v ("?" when the table lacks it: a value cast from an out-of-range integer).
template <class E, std::size_t N>
constexpr const char* enum_name(const EnumName<E> (&table)[N], E v) {
  for (const auto& n : table)
    if (n.value == v) return n.name;
  return "?";
}

// The value spelled `name`, or nothing.
template <class E, std::size_t N>
constexpr std::optional<E> enum_from_name(const EnumName<E> (&table)[N], std::string_view name) {
  for (const auto& n : table)
    if (name == n.name) return n.value;
  return std::nullopt;
}

// "a, b or c" (or with another last separator: ", " for "a, b, c"), for errors.
template <class E, std::size_t N>
std::string enum_names_list(const EnumName<E> (&table)[N], const char* last_separator = " or ") {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += (i == 0 ? "" : i + 1 == N ? last_separator : ", ") + std::string(table[i].name);
  return s;
}

}  // namespace bitgrad
