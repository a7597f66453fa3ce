// Reading the files of a run directory (manifest.json, *.jsonl, audit.json, ...) for the
// instruments that compare and report runs. Damaged files are errors naming the file and line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace bitgrad::repro {

using ordered_json = nlohmann::ordered_json;

// `who` prefixes error messages ("diff", "report").
ordered_json read_json_file(const std::string& path, const std::string& who);
// JSON lines: a last line without its newline (a run killed mid-write) or a line that does not
// parse is an error naming path:line.
std::vector<ordered_json> read_json_lines(const std::string& path, const std::string& who);
// The manifest of a run directory; "DIR is not a run directory" when it has none.
ordered_json read_manifest(const std::string& dir, const std::string& who);
// Objects flattened to dotted keys in document order; arrays and scalars as compact JSON.
std::vector<std::pair<std::string, std::string>> flatten_json(const ordered_json& j);

}  // namespace bitgrad::repro
