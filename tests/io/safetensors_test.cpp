// safetensors: the public layout, round trips, checksums and damaged files.
#include <nlohmann/json.hpp>

#include "bitgrad/io.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(Safetensors, LayoutIsThePublicFormat) {
  io::NamedTensors t = {{"w", Tensor::from<float>(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3})},
                        {"i", Tensor::from<std::int64_t>(std::vector<std::int64_t>{7}, Shape{1})}};
  const std::string bytes = io::safetensors_bytes(t, {{"note", "hi"}});
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ((8 + n) % 8, 0u) << "header padded to 8 bytes";
  auto h = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["w"]["dtype"], "F32");
  EXPECT_EQ(h["w"]["shape"], nlohmann::json::array({2, 3}));
  EXPECT_EQ(h["w"]["data_offsets"], nlohmann::json::array({0, 24}));
  EXPECT_EQ(h["i"]["dtype"], "I64");
  EXPECT_EQ(h["i"]["data_offsets"], nlohmann::json::array({24, 32}));
  EXPECT_EQ(h["__metadata__"]["note"], "hi");
  EXPECT_EQ(bytes.size(), 8 + n + 32);
  float first;
  std::memcpy(&first, bytes.data() + 8 + n, 4);
  EXPECT_EQ(first, 1.0f) << "little-endian raw data";
}

TEST(Safetensors, RoundTripAndDamage) {
  const std::string path = ::testing::TempDir() + "/bitgrad_test.safetensors";
  auto v = random_vec<double>(33, 1);
  io::save_safetensors(path, {{"a", Tensor::from<double>(v, Shape{3, 11})}}, {{"k", "v"}});
  io::SafeTensors st = io::load_safetensors(path);
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors[0].first, "a");
  EXPECT_EQ(st.tensors[0].second.to_vector<double>(), v);
  EXPECT_EQ(st.metadata.at("k"), "v");
  EXPECT_FALSE(io::exists(path + ".tmp." + std::to_string(::getpid()))) << "no temporary file left";

  std::string bytes = io::read_file(path);
  std::string flipped = bytes;
  flipped[flipped.size() - 5] ^= 0x10;
  try {
    io::parse_safetensors(flipped, "f");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  for (std::size_t cut : {std::size_t(3), std::size_t(20), bytes.size() - 1}) {
    try {
      io::parse_safetensors(bytes.substr(0, cut), "f");
      FAIL() << "cut at " << cut;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(io::load_safetensors(path + ".missing"), Error);
}

// A safetensors file from a header and data, as another tool (or a hand) would write it.
std::string craft(const nlohmann::json& header, const std::string& data) {
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string error_of(const std::string& bytes, io::Checksum c = io::Checksum::required) {
  try {
    io::parse_safetensors(bytes, "f", c);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, TheChecksumCoversHeaderAndMetadata) {
  const io::NamedTensors t = {{"w", Tensor::from<float>(std::vector<float>{1, 2, 3, 4}, Shape{4})}};
  const std::string bytes = io::safetensors_bytes(t, {{"index", "20"}, {"epoch", "3"}});
  ASSERT_EQ(error_of(bytes), "");
  // one bit of the metadata: "20" -> "21" still parses, and resumed at another place before
  const std::size_t at = bytes.find("\"index\":\"20\"");
  ASSERT_NE(at, std::string::npos);
  std::string flipped = bytes;
  flipped[at + 10] ^= 0x01;
  EXPECT_NE(error_of(flipped).find("checksum mismatch"), std::string::npos) << error_of(flipped);
  // one bit of a shape, of the checksum itself
  for (const std::string& what : {std::string("[4]"), std::string("xxh3-128:")}) {
    std::string b = bytes;
    const std::size_t w = b.find(what, 8);
    ASSERT_NE(w, std::string::npos) << what;
    b[w + what.size() + (what == "xxh3-128:" ? 3 : -1)] ^= 0x04;
    EXPECT_NE(error_of(b), "") << "a flipped bit after '" << what << "' was accepted";
  }
}

TEST(Safetensors, AChecksumIsRequiredUnlessTheCallerSaysOtherwise) {
  const nlohmann::json h = {{"w", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}};
  const std::string foreign = craft(h, std::string(8, '\0'));
  EXPECT_NE(error_of(foreign).find("has no 'bitgrad.checksum'"), std::string::npos) << error_of(foreign);
  EXPECT_EQ(error_of(foreign, io::Checksum::if_present), "") << "another tool's file loads when asked";
  // removing the key from a bitgrad file does not make it unchecked
  const std::string bytes = io::safetensors_bytes({{"w", Tensor::from<float>(std::vector<float>{1, 2}, Shape{2})}}, {});
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  nlohmann::json hj = nlohmann::json::parse(bytes.substr(8, n));
  hj["__metadata__"].erase("bitgrad.checksum");
  EXPECT_NE(error_of(craft(hj, bytes.substr(8 + n))).find("has no 'bitgrad.checksum'"), std::string::npos);
  // an older file's data-only checksum is named as such
  hj["__metadata__"]["bitgrad.checksum"] = std::string(32, 'a');
  EXPECT_NE(error_of(craft(hj, bytes.substr(8 + n))).find("covers the tensor data only"), std::string::npos);
}

TEST(Safetensors, OffsetsMustTileTheDataInOrder) {
  auto entry = [](std::int64_t n, std::uint64_t b, std::uint64_t e) {
    return nlohmann::json{{"dtype", "F32"}, {"shape", {n}}, {"data_offsets", {b, e}}};
  };
  const std::string data(24, '\1');
  // a bias inside the weight
  std::string e = error_of(craft({{"w", entry(6, 0, 24)}, {"b", entry(2, 8, 16)}}, data), io::Checksum::if_present);
  EXPECT_NE(e.find("overlaps"), std::string::npos) << e;
  // a gap, and bytes that belong to no tensor
  e = error_of(craft({{"w", entry(2, 0, 8)}, {"b", entry(2, 16, 24)}}, data), io::Checksum::if_present);
  EXPECT_NE(e.find("a gap"), std::string::npos) << e;
  e = error_of(craft({{"w", entry(2, 0, 8)}}, data), io::Checksum::if_present);
  EXPECT_NE(e.find("belongs to no tensor"), std::string::npos) << e;
  // entries listed out of data order are fine when they tile (the format does not order keys)
  EXPECT_EQ(error_of(craft({{"z", entry(4, 0, 16)}, {"a", entry(2, 16, 24)}}, data), io::Checksum::if_present), "");
}

}  // namespace
}  // namespace bitgrad::test
