// What the CPU offers (src/platform/cpu.cpp): code-path names both ways, the order of the paths,
// and the facts a manifest records.
#include <gtest/gtest.h>

#include <string>

#include "bitgrad/error.hpp"
#include "bitgrad/runtime.hpp"

namespace bitgrad {
namespace {

TEST(PlatformCpu, CodePathNamesRoundTripAndAnUnknownOneIsNamed) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  try {
    parse_isa("sse9");
    FAIL() << "parse_isa accepted 'sse9'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'sse9'"), std::string::npos) << what;
    EXPECT_NE(what.find("scalar, avx2 or avx512"), std::string::npos) << what;
  }
}

TEST(PlatformCpu, TheBestPathIsSupportedAndEveryPathBelowItToo) {
  EXPECT_TRUE(cpu_supports(Isa::scalar));
  const Isa best = best_isa();
  EXPECT_TRUE(cpu_supports(best));
  for (int i = 0; i <= static_cast<int>(best); ++i) EXPECT_TRUE(cpu_supports(static_cast<Isa>(i)));
  for (int i = static_cast<int>(best) + 1; i <= static_cast<int>(Isa::avx512); ++i) {
    const Isa isa = static_cast<Isa>(i);
    EXPECT_FALSE(cpu_supports(isa));
    const std::string why = isa_unavailable(isa);
    EXPECT_NE(why.find(isa_name(isa)), std::string::npos) << why;
  }
}

TEST(PlatformCpu, TheProcessHasCpusAndTheCpuAName) {
  EXPECT_GE(available_cpus(), 1);
  EXPECT_FALSE(cpu_model().empty());
}

}  // namespace
}  // namespace bitgrad
