// Reading files: only regular files, never more than the caller allows; error excerpts.
#include <sys/stat.h>
#include <unistd.h>

#include "bitgrad/io.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(Files, OnlyRegularFilesAreRead) {
  EXPECT_THROW_MSG(io::read_file("/dev/zero"), "/dev/zero is a character device, not a regular file");
  EXPECT_THROW_MSG(io::read_file("/dev/urandom"), "is a character device");
  EXPECT_THROW_MSG(io::read_file(::testing::TempDir()), "is a directory");
  const std::string fifo = ::testing::TempDir() + "/bitgrad_fifo_" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THROW_MSG(io::read_file(fifo), "is a FIFO, not a regular file");  // and the open does not block
  ::unlink(fifo.c_str());
  const std::string f = ::testing::TempDir() + "/bitgrad_sized_" + std::to_string(::getpid());
  io::write_file_atomic(f, std::string(100, 'a'));
  EXPECT_EQ(io::read_file(f, 100).size(), 100u);
  EXPECT_THROW_MSG(io::read_file(f, 99), "is 100 bytes, more than the 99 such a file may have");
  EXPECT_THROW_MSG(io::read_file(f + ".missing"), "cannot open");
}

TEST(Files, OnlyRegularFilesAreReplaced) {
  // an atomic write to /dev/full reported "No such file or directory" (the temporary's
  // errno, overwritten); a device, FIFO or directory is refused by name before anything is made
  EXPECT_THROW_MSG(io::write_file_atomic("/dev/full", "x"), "cannot write /dev/full: it is a character device");
  EXPECT_THROW_MSG(io::write_file_atomic(::testing::TempDir(), "x"), "it is a directory");
  struct stat st {};
  EXPECT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device is still a device";
}

TEST(Files, ErrorExcerptsAreShortAndPrintable) {
  EXPECT_EQ(printable_excerpt("abc"), "abc");
  EXPECT_EQ(printable_excerpt(std::string("a\x01\xff", 3)), "a\\x01\\xff");
  EXPECT_EQ(printable_excerpt(std::string(100, 'x'), 10), "xxxxxxxxxx...");
}

// Every error message is well-formed UTF-8: a hostile name's stray bytes written as \xNN, valid
// sequences (two to four bytes) kept, overlong forms, surrogates and truncated ones escaped.
TEST(Files, ErrorMessagesAreWellFormedUtf8) {
  EXPECT_EQ(valid_utf8("plain\n"), "plain\n");
  EXPECT_EQ(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");
  EXPECT_EQ(valid_utf8(std::string("a\xff\xfe", 3)), "a\\xff\\xfe");
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\\xc0\\xaf");              // overlong '/'
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(valid_utf8("\xe2\x82"), "\\xe2\\x82");            // cut short
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  try {
    detail::fail("onnx", "node '", std::string("n\x80m", 3), "' is bad");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "onnx: node 'n\\x80m' is bad");
  }
}

}  // namespace
}  // namespace bitgrad::test
