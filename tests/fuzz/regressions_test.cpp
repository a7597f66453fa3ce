// The fuzzed readers on their seed corpora (real files) and on every input a fuzzing run has
// found (tests/fuzz/regressions/<target>/): each must be answered with bitgrad::Error or read,
// never with another exception (ASan/UBSan watch the rest in CI).
#include <dirent.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bitgrad/io.hpp"
#include "fuzz/targets.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(FuzzRegressions, EveryCorpusAndFindingIsReadOrRefusedWithAnError) {
  std::size_t inputs = 0;
  for (const fuzz::Target& t : fuzz::targets()) {
    std::size_t here = 0;
    for (const char* kind : {"corpus", "regressions"}) {
      for (const std::string& f : files_in(std::string(BITGRAD_SOURCE_DIR) + "/tests/fuzz/" + kind + "/" + t.name)) {
        const std::string b = io::read_file(f);
        EXPECT_NO_THROW(t.run(reinterpret_cast<const std::uint8_t*>(b.data()), b.size())) << f;
        ++here;
      }
    }
    EXPECT_GT(here, 0u) << "no seed corpus for " << t.name;
    inputs += here;
  }
  RecordProperty("inputs", static_cast<int>(inputs));
}

}  // namespace
}  // namespace bitgrad::test
