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

}  // namespace
}  // namespace bitgrad::test
