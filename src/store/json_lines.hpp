// The JSON of run files: records as `{"key": value, ...}` lines (metrics.jsonl, trace.jsonl,
// ops.jsonl), read back with errors naming file:line, and the dotted flattening diff compares
// manifests with. Records are nlohmann JSON values.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bitgrad::store {

using Json = nlohmann::ordered_json;

// One record as a line of a .jsonl file (with its newline): ", " and ": " separators, integers
// as they are, floating-point numbers to 9 significant digits (the round trip of a float) or in
// the printf format `fixed` names for their key; NaN and infinities, which JSON lacks, as the
// strings "NaN", "Infinity" and "-Infinity" (json_number reads either form back).
struct LineFormat {
  std::vector<std::pair<std::string, const char*>> fixed;  // key, printf format of its number
};
std::string json_line(const Json& record, const LineFormat& format = {});
// A number of a record: a JSON number or one of the strings above; nullopt for anything else.
std::optional<double> json_number(const Json& v);
// The records of a .jsonl text, one JSON object per line; errors start "WHO: PATH:LINE: ".
std::vector<Json> parse_json_lines(const std::string& text, const std::string& who, const std::string& path);

// Appends records to one .jsonl file of a run directory.
class JsonLinesWriter {
 public:
  JsonLinesWriter(const std::string& path, LineFormat format = {});
  void write(const Json& record);
  void flush();  // throws Error when the file cannot be written

 private:
  std::ofstream out_;
  std::string path_;
  LineFormat format_;
};

// Objects flattened to dotted keys in document order; arrays and scalars as compact JSON
// (`bitgrad diff` compares manifests with it).
std::vector<std::pair<std::string, std::string>> flatten_json(const Json& j);

}  // namespace bitgrad::store
