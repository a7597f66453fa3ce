// The golden fingerprint of numerics version 4 (the same as versions 1-3: the selftest is a 2-d
// MLP, which the version-2 change to samples of several rows cannot reach). If this test
// fails, a canonical order or an elementary function changed: bump kNumericsVersion,
// document the change in docs/numerics.md and update both constants below together.
#include "bitgrad/bitgrad.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

constexpr int kPinnedNumerics = 4;
constexpr const char* kPinnedFingerprint = "c05186ac5a6ae60f37c578add34da46f";

TEST(GoldenFingerprint, SelftestGradientsArePinned) {
  ASSERT_EQ(kNumericsVersion, kPinnedNumerics) << "numerics version changed: re-pin the fingerprint below";
  RuntimeGuard guard;
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_EQ(run_selftest().fingerprint.hex(), kPinnedFingerprint) << "isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

TEST(Fingerprint, ShapeDtypeAndValuesAllCount) {
  Tensor a = Tensor::from<float>(std::vector<float>{1, 2, 3, 4}, Shape{4});
  Tensor b = Tensor::from<float>(std::vector<float>{1, 2, 3, 4}, Shape{2, 2});
  Tensor c = Tensor::from<double>(std::vector<double>{1, 2, 3, 4}, Shape{4});
  Tensor d = Tensor::from<float>(std::vector<float>{1, 2, 3, 5}, Shape{4});
  EXPECT_NE(fingerprint(a), fingerprint(b));
  EXPECT_NE(fingerprint(a), fingerprint(c));
  EXPECT_NE(fingerprint(a), fingerprint(d));
  EXPECT_EQ(fingerprint(a), fingerprint(a.contiguous_copy()));
  EXPECT_EQ(fingerprint(a).hex().size(), 32u);
  Tensor z = Tensor::from<float>(std::vector<float>{0.0f}, Shape{1}), nz = Tensor::from<float>(std::vector<float>{-0.0f}, Shape{1});
  EXPECT_NE(fingerprint(z), fingerprint(nz)) << "bits, not values: -0 and +0 differ";
}

}  // namespace
}  // namespace bitgrad::test
