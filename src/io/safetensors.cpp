// safetensors reading and writing. The header is JSON: {"name": {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]}, ..., "__metadata__": {...}}, padded with spaces to 8 bytes.
#include <xxhash.h>

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
  }
  return "?";
}

std::string checksum(const char* data, std::size_t n) {
  const XXH128_hash_t h = XXH3_128bits(data, n);
  return Digest128{h.high64, h.low64}.hex();
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
  metadata["bitgrad.checksum"] = checksum(data.data(), data.size());
  header["__metadata__"] = metadata;
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::string out(8, '\0');
  const std::uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h + data;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  write_file_atomic(path, safetensors_bytes(tensors, metadata));
}

SafeTensors parse_safetensors(const std::string& bytes, const std::string& name) {
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
  std::vector<std::pair<std::size_t, std::pair<std::string, Tensor>>> found;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) throw bad("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw bad("metadata value '" + m.key() + "' is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const auto& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw bad("entry '" + it.key() + "' needs dtype, shape and data_offsets");
    const std::string dt = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
    DType d;
    if (dt == "F32") d = DType::f32;
    else if (dt == "F64") d = DType::f64;
    else if (dt == "I64") d = DType::i64;
    else if (dt == "U8") d = DType::u8;
    else throw bad("entry '" + it.key() + "' has unsupported dtype '" + dt + "' (F32, F64, I64, U8)");
    std::vector<std::int64_t> dims;
    try {
      dims = e["shape"].get<std::vector<std::int64_t>>();
    } catch (...) {
      throw bad("entry '" + it.key() + "' has a malformed shape");
    }
    Shape s(dims);
    std::vector<std::uint64_t> off;
    try {
      off = e["data_offsets"].get<std::vector<std::uint64_t>>();
    } catch (...) {
      throw bad("entry '" + it.key() + "' has malformed data_offsets");
    }
    if (off.size() != 2 || off[0] > off[1] || off[1] > data_size)
      throw bad("entry '" + it.key() + "' points outside the data (" + std::to_string(data_size) + " bytes; truncated?)");
    if (off[1] - off[0] != static_cast<std::uint64_t>(s.numel()) * dtype_size(d))
      throw bad("entry '" + it.key() + "' has " + std::to_string(off[1] - off[0]) + " bytes for shape " + s.str());
    Tensor t = Tensor::empty(s, d);
    if (off[1] > off[0]) std::memcpy(t.storage()->data(), bytes.data() + base + off[0], off[1] - off[0]);
    found.push_back({off[0], {it.key(), t}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& f : found) out.tensors.push_back(std::move(f.second));
  if (auto c = out.metadata.find("bitgrad.checksum"); c != out.metadata.end()) {
    const std::string got = checksum(bytes.data() + base, data_size);
    if (got != c->second) throw bad("checksum mismatch (stored " + c->second + ", computed " + got + "): the file is corrupt");
  }
  return out;
}

SafeTensors load_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

}  // namespace bitgrad::io
