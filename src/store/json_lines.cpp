#include "store/json_lines.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "bitgrad/error.hpp"
#include "io/format.hpp"

namespace bitgrad::store {
namespace {

void put(const Json& j, const LineFormat& f, const char* number_format, std::string& out) {
  switch (j.type()) {
    case Json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (!first) out += ", ";
        first = false;
        out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
        out += ": ";
        const char* nf = "%.9g";
        for (const auto& [key, fmt] : f.fixed)
          if (key == it.key()) nf = fmt;
        put(*it, f, nf, out);
      }
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < j.size(); ++i) {
        if (i) out += ", ";
        put(j[i], f, "%.9g", out);
      }
      out += ']';
      return;
    }
    case Json::value_t::number_float: {
      const double v = j.get<double>();
      if (v != v) out += "\"NaN\"";  // JSON has no non-finite numbers: strings that read back
      else if (v == HUGE_VAL || v == -HUGE_VAL) out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      else out += io::strprintf(number_format, v);
      return;
    }
    default:
      out += j.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

void flatten_into(const Json& j, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten_into(*it, prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out.emplace_back(prefix, j.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
}

}  // namespace

std::string json_line(const Json& record, const LineFormat& format) {
  std::string s;
  put(record, format, "%.9g", s);
  s += '\n';
  return s;
}

std::optional<double> json_number(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity") return HUGE_VAL;
    if (s == "-Infinity") return -HUGE_VAL;
  }
  return std::nullopt;
}

std::vector<Json> parse_json_lines(const std::string& text, const std::string& who, const std::string& p) {
  std::vector<Json> out;
  std::size_t at = 0;
  int lineno = 0;
  while (at < text.size()) {
    ++lineno;
    const std::size_t nl = text.find('\n', at);
    const std::string where = who + ": " + p + ":" + std::to_string(lineno) + ": ";
    if (nl == std::string::npos) throw Error(where + "the last line is incomplete (a truncated file)");
    try {
      out.push_back(Json::parse(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(nl)));
    } catch (const Json::exception&) {
      throw Error(where + "not a JSON record (a truncated or damaged file)");
    }
    if (!out.back().is_object()) throw Error(where + "expected a JSON object per line");
    at = nl + 1;
  }
  return out;
}

JsonLinesWriter::JsonLinesWriter(const std::string& path, LineFormat format)
    : out_(path, std::ios::app), path_(path), format_(std::move(format)) {
  if (!out_) throw Error("train: cannot write " + path);
}

void JsonLinesWriter::write(const Json& record) { out_ << json_line(record, format_); }

void JsonLinesWriter::flush() {
  out_.flush();
  if (!out_) throw Error("train: cannot write " + path_ + " (" + std::strerror(errno) + ")");
}

std::vector<std::pair<std::string, std::string>> flatten_json(const Json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(j, "", out);
  return out;
}

}  // namespace bitgrad::store
