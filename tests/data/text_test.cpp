// Text corpora: which files a directory contributes and in what order, the sorted vocabulary,
// the split, the windows, and the errors (not UTF-8, empty, missing, too short).
#include <unistd.h>

#include <fstream>

#include "bitgrad/data.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::string make_dir(const std::string& name) {
  const std::string d = fresh_dir(name);
  if (std::system(("mkdir -p '" + d + "'").c_str()) != 0) ADD_FAILURE() << "cannot create " << d;
  return d;
}
void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

TEST(Text, ADirectoryIsItsRegularTextFilesInNameOrder) {
  const std::string d = make_dir("text_dir");
  write(d + "/b", "bb\n");
  write(d + "/a", "aa\n");
  write(d + "/a.dat", std::string("\x00\x01\xff", 3));  // a fortune index: skipped
  write(d + "/.hidden", "hh\n");
  ASSERT_EQ(::symlink("a", (d + "/a.u8").c_str()), 0);  // a link to a file already read
  const auto files = data::text_files(d);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0], d + "/a");
  EXPECT_EQ(files[1], d + "/b");
  auto c = data::load_text(d, false, 0.0);
  EXPECT_EQ(c->decode(std::vector<std::int64_t>(c->tokens.begin(), c->tokens.end())), "aa\nbb\n");
  EXPECT_EQ(c->symbols, (std::vector<std::uint32_t>{'\n', 'a', 'b'})) << "sorted code points";
}

TEST(Text, CharactersOrBytesSplitAndWindows) {
  const std::string d = make_dir("text_chars");
  write(d + "/t", "h\xc3\xa9llo w\xc3\xb6rld!");  // é and ö: 12 characters, 14 bytes
  auto chars = data::load_text(d + "/t", false, 0.25);
  auto bytes = data::load_text(d + "/t", true, 0.25);
  EXPECT_EQ(chars->tokens.size(), 12u);
  EXPECT_EQ(bytes->tokens.size(), 14u);
  EXPECT_EQ(chars->train_tokens, 12 - 3);  // the last floor(12 * 0.25) for validation
  EXPECT_EQ(bytes->train_tokens, 14 - 3);
  EXPECT_EQ(chars->decode(chars->encode("w\xc3\xb6rld", "t")), "w\xc3\xb6rld");
  EXPECT_EQ(bytes->decode(bytes->encode("w\xc3\xb6rld", "t")), "w\xc3\xb6rld");
  // windows: x = tokens [p, p + 4), labels the next ones
  auto tr = data::text_windows(chars, 4, true);
  EXPECT_EQ(tr->size(), 9 - 4);
  EXPECT_EQ(tr->num_classes(), chars->vocab_size());
  std::vector<float> x(4);
  std::vector<std::int64_t> y(4);
  tr->get(2, x.data(), y.data(), nullptr);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(x[static_cast<std::size_t>(k)], static_cast<float>(chars->tokens[static_cast<std::size_t>(2 + k)]));
    EXPECT_EQ(y[static_cast<std::size_t>(k)], chars->tokens[static_cast<std::size_t>(3 + k)]);
  }
  EXPECT_THROW_MSG(data::text_windows(chars, 3, false), "shorter than one window");  // 3 tokens: (3 - 1) / 3 = no window
  EXPECT_EQ(data::text_windows(chars, 2, false)->size(), 1);
}

TEST(Text, ErrorsNameTheFileAndWhatIsWrong) {
  const std::string d = make_dir("text_errors");
  write(d + "/bad", "line one\nline \xc3\x28 two\n");
  EXPECT_THROW_MSG(data::load_text(d + "/bad", false, 0.1), "bad: line 2 (byte 14): 0xc3 is not UTF-8");
  write(d + "/empty", "");
  EXPECT_THROW_MSG(data::load_text(d + "/empty", false, 0.1), "is empty; a corpus needs text");
  EXPECT_THROW_MSG(data::load_text(d + "/missing", false, 0.1), "does not exist; set [data] path");
  EXPECT_THROW_MSG(data::load_text("/usr/share/games/fortunes-not-there", false, 0.1), "does not exist");
  const std::string e = make_dir("text_only_dat");
  write(e + "/x.dat", "index");
  EXPECT_THROW_MSG(data::text_files(e), "holds no text files");
  write(d + "/short", "abc");
  auto c = data::load_text(d + "/short", false, 0.0);
  EXPECT_THROW_MSG(data::text_windows(c, 3, true), "block_size 3 is larger than the training part of the corpus");
  EXPECT_THROW_MSG(c->encode("abd", "--prompt"), "--prompt: character 3 ('d') is not in the vocabulary");
}

}  // namespace
}  // namespace bitgrad::test
