// Files: atomic writes, safetensors (the public format: 8-byte little-endian header length,
// JSON header, raw little-endian data) with a bitgrad checksum in its metadata, and checkpoint
// directories. Every write goes to a temporary file that is fsynced and renamed into place, so
// an interrupted run never leaves a half-written file where a complete one was.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/tensor.hpp"

namespace bitgrad::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

void write_file_atomic(const std::string& path, const std::string& bytes);
// The whole of a regular file: a FIFO, a device or a directory is refused (reading /dev/zero
// or a pipe would never end), and so is a file larger than max_bytes, before anything is read.
std::string read_file(const std::string& path, std::uint64_t max_bytes = UINT64_MAX);
void make_dirs(const std::string& path);
bool exists(const std::string& path);
// XXH3-128 (hex) of a file's bytes; an error names the file when it cannot be read.
std::string file_hash(const std::string& path);

// Writes tensors in order; metadata gains "bitgrad.checksum": "xxh3-128:<hex>", the XXH3-128
// of every byte of the file (header, metadata, padding, data) with those 32 hex digits read
// as '0'.
std::string safetensors_bytes(const NamedTensors& tensors, Metadata metadata);
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata);
struct SafeTensors {
  NamedTensors tensors;  // in the order of their data
  Metadata metadata;
};
// required: a file without bitgrad's checksum is refused (checkpoints); if_present: files
// written by other tools load, bitgrad's own are still checked.
enum class Checksum { required, if_present };
// Validates the header, dtypes, shapes, offsets (in order, tiling the data with no gap or
// overlap) and the checksum; errors name the file and what is wrong.
SafeTensors load_safetensors(const std::string& path, Checksum check = Checksum::required);
SafeTensors parse_safetensors(const std::string& bytes, const std::string& name, Checksum check = Checksum::required);

}  // namespace bitgrad::io
