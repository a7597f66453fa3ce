// safetensors reading and writing. The header is JSON: {"name": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ..., "__metadata__": {...}}, padded with spaces to 8 bytes.
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/io.hpp"

namespace bitgrad::io {
namespace {

const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
  }
  return "?";
}

// The whole-file checksum: XXH3-128 of every byte of the file with the 32 hex digits of the
// checksum itself read as '0' (so the header, the metadata, the padding and the data are all
// covered). Stored as "xxh3-128:<hex>"; a value without the prefix is an older file's, whose
// checksum covered the tensor data only.
constexpr const char* kChecksumKey = "bitgrad.checksum";
constexpr const char* kChecksumPrefix = "xxh3-128:";
constexpr std::size_t kHexDigits = 32;

std::string file_checksum(const std::string& file) {
  const XXH128_hash_t h = XXH3_128bits(file.data(), file.size());
  return Digest128{h.high64, h.low64}.hex();
}

// Where the checksum's hex digits sit in the file: the one place that holds
// "bitgrad.checksum":"xxh3-128:<value>" (the writer's JSON has no spaces), or npos.
std::size_t checksum_at(const std::string& file, std::size_t header_end, const std::string& value) {
  const std::string needle = std::string("\"") + kChecksumKey + "\":\"" + value + "\"";
  const std::size_t at = file.find(needle, 8);
  if (at == std::string::npos || at + needle.size() > header_end) return std::string::npos;
  if (file.find(needle, at + 1) < header_end) return std::string::npos;
  return at + needle.size() - 1 - kHexDigits;
}

}  // namespace

std::string safetensors_bytes(const NamedTensors& tensors, Metadata metadata) {
  nlohmann::ordered_json header;
  std::string data;
  for (const auto& [name, t] : tensors) {
    BITGRAD_CHECK(!name.empty() && name != "__metadata__", "safetensors", "invalid tensor name '", name, "'");
    Tensor c = t.contiguous_copy();
    const std::size_t bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
    const std::size_t begin = data.size();
    data.append(static_cast<const char*>(c.storage()->data()), bytes);
    header[name] = {{"dtype", st_dtype(c.dtype())}, {"shape", c.shape().vec()}, {"data_offsets", {begin, begin + bytes}}};
  }
  const std::string zeros = std::string(kChecksumPrefix) + std::string(kHexDigits, '0');
  metadata[kChecksumKey] = zeros;
  header["__metadata__"] = metadata;
  std::string h;
  try {
    h = header.dump();
  } catch (const nlohmann::json::exception&) {
    throw Error("safetensors: a tensor name or a metadata value is not valid UTF-8");
  }
  while (h.size() % 8) h += ' ';
  std::string out(8, '\0');
  const std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  out += data;
  const std::size_t at = checksum_at(out, 8 + h.size(), zeros);
  BITGRAD_CHECK(at != std::string::npos, "safetensors", "metadata must not hold another '", kChecksumKey, "'");
  const std::string sum = file_checksum(out);
  out.replace(at, kHexDigits, sum);
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

SafeTensors parse_safetensors(const std::string& bytes, const std::string& name, Checksum check) {
  auto bad = [&](const std::string& why) -> Error { return Error("safetensors: " + name + ": " + why); };
  if (bytes.size() < 8) throw bad("file is too short to hold a header (" + std::to_string(bytes.size()) + " bytes; truncated?)");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (n > bytes.size() - 8) throw bad("header length " + std::to_string(n) + " runs past the end of the file (truncated?)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header is not valid JSON (") + e.what() + ")");
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const std::size_t base = 8 + n;
  const std::size_t data_size = bytes.size() - base;
  SafeTensors out;
  std::vector<std::pair<std::pair<std::uint64_t, std::uint64_t>, std::pair<std::string, Tensor>>> found;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw bad("metadata value '" + printable_excerpt(m.key()) + "' is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const auto& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw bad("entry '" + printable_excerpt(it.key()) + "' needs dtype, shape and data_offsets");
    const std::string dt = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
    DType d;
    if (dt == "F32") d = DType::f32;
    else if (dt == "F64") d = DType::f64;
    else if (dt == "I64") d = DType::i64;
    else if (dt == "U8") d = DType::u8;
    else if (dt == "BF16") d = DType::bf16;
    else if (dt == "F16") d = DType::f16;
    else throw bad("entry '" + printable_excerpt(it.key()) + "' has unsupported dtype '" + printable_excerpt(dt) + "' (F32, F64, I64, U8, BF16, F16)");
    std::vector<std::int64_t> dims;
    try {
      dims = e["shape"].get<std::vector<std::int64_t>>();
    } catch (...) {
      throw bad("entry '" + printable_excerpt(it.key()) + "' has a malformed shape");
    }
    Shape s(dims);
    std::vector<std::uint64_t> off;
    try {
      off = e["data_offsets"].get<std::vector<std::uint64_t>>();
    } catch (...) {
      throw bad("entry '" + printable_excerpt(it.key()) + "' has malformed data_offsets");
    }
    if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
      throw bad("entry '" + printable_excerpt(it.key()) + "' points outside the data (" + std::to_string(data_size) + " bytes; truncated?)");
    if (off[1] - off[0] != static_cast<std::uint64_t>(s.numel()) * dtype_size(d))
      throw bad("entry '" + printable_excerpt(it.key()) + "' has " + std::to_string(off[1] - off[0]) + " bytes for shape " + s.str());
    found.push_back({{off[0], off[1]}, {it.key(), Tensor::empty(s, d)}});
  }
  // The entries must tile the data in order, with no gap and no overlap (the safetensors
  // format forbids both: a bias inside a weight would load as wrong weights).
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::uint64_t end = 0;
  for (const auto& f : found) {
    if (f.first.first != end)
      throw bad("entry '" + printable_excerpt(f.second.first) + "' starts at byte " + std::to_string(f.first.first) + " of the data, expected " +
                std::to_string(end) + (f.first.first < end ? " (it overlaps the entry before it)" : " (a gap before it)"));
    end = f.first.second;
  }
  if (end != data_size)
    throw bad("the entries cover " + std::to_string(end) + " of the " + std::to_string(data_size) + " data bytes (the rest belongs to no tensor)");
  if (check == Checksum::required || out.metadata.count(kChecksumKey)) {
    auto c = out.metadata.find(kChecksumKey);
    if (c == out.metadata.end()) throw bad("has no '" + std::string(kChecksumKey) + "' in its metadata: not written by bitgrad, or damaged");
    const std::string& v = c->second;
    if (v.rfind(kChecksumPrefix, 0) != 0)
      throw bad("its checksum covers the tensor data only (written by a bitgrad before numerics 3); this build needs the whole-file checksum");
    const std::size_t at = checksum_at(bytes, base, v);
    if (v.size() != std::string(kChecksumPrefix).size() + kHexDigits || at == std::string::npos)
      throw bad("the checksum entry is damaged ('" + printable_excerpt(v) + "')");
    std::string zeroed = bytes;
    zeroed.replace(at, kHexDigits, std::string(kHexDigits, '0'));
    const std::string got = file_checksum(zeroed);
    if (got != v.substr(v.size() - kHexDigits))
      throw bad("checksum mismatch (stored " + v.substr(v.size() - kHexDigits) + ", computed " + got + "): the file is corrupt");
  }
  for (auto& f : found) {
    Tensor& t = f.second.second;
    if (f.first.second > f.first.first) std::memcpy(t.storage()->data(), bytes.data() + base + f.first.first, f.first.second - f.first.first);
    out.tensors.push_back(std::move(f.second));
  }
  return out;
}

SafeTensors load_safetensors(const std::string& path, Checksum check) { return parse_safetensors(read_file(path), path, check); }

}  // namespace bitgrad::io
