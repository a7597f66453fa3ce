// The fuzzed readers (libFuzzer entry points in fuzz_*.cpp, and the replay of the corpora and
// past findings in regressions_test.cpp). Each feeds untrusted bytes to one of bitgrad's
// readers: bitgrad::Error is the expected answer to bad input; any other exception, a crash,
// a hang or a sanitizer report is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bitgrad::fuzz {

void safetensors(const std::uint8_t* data, std::size_t size);  // a checkpoint file
void idx(const std::uint8_t* data, std::size_t size);          // a gzipped IDX image file
void config(const std::uint8_t* data, std::size_t size);       // a TOML configuration
void csv(const std::uint8_t* data, std::size_t size);          // a CSV dataset
void records(const std::uint8_t* data, std::size_t size);      // metrics/trace .jsonl, manifest.json
void serve_request(const std::uint8_t* data, std::size_t size);  // a `bitgrad serve` request body
void http_head(const std::uint8_t* data, std::size_t size);      // the head of an HTTP request
void onnx_model(const std::uint8_t* data, std::size_t size);     // a model the bytes choose, loaded and trained a step
void onnx(const std::uint8_t* data, std::size_t size);         // an ONNX model: the protobuf reader and the importer

struct Target {
  const char* name;
  void (*run)(const std::uint8_t*, std::size_t);
};
const std::vector<Target>& targets();

}  // namespace bitgrad::fuzz
