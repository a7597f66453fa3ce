// The build's own numerics check (src/kernels/canonical_check.cpp): the canonical computation
// gives one hash on every code path, and it is the one the library expects (the check passes);
// a check that could not fail would show one hash for every input.
#include "bitgrad/bitgrad.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(CanonicalCheck, EveryCodePathGivesTheCanonicalBits) {
  RuntimeGuard g;
  std::uint64_t first = 0;
  for (Isa isa : isas()) {
    set_isa(isa);
    const std::uint64_t h = canonical_bits_hash();
    if (first == 0) first = h;
    EXPECT_EQ(h, first) << isa_name(isa);
    std::printf("%s: canonical bits %016llx\n", isa_name(isa), static_cast<unsigned long long>(h));
  }
  EXPECT_NO_THROW(check_canonical_bits());
  EXPECT_NO_THROW(check_fp_environment());
}

}  // namespace
}  // namespace bitgrad::test
