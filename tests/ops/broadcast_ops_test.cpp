// Broadcasts over middle axes: [N, C, H, W] op [1, C, 1, 1] and other
// patterns that no single row/col kernel call covers run as repeated calls; the bits must be
// those of the same op on expanded copies, on every code path and thread count.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

Tensor filled(const Shape& s, std::uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::f32);
  rng::Stream(seed, "bcast").fill_normal(t.mutable_data<float>(), t.numel(), 0, 0.0f, 1.0f);
  return t;
}

TEST(BroadcastOps, RepeatedPatternsEqualExpandedCopies) {
  const std::vector<std::pair<Shape, Shape>> pairs = {
      {{64, 16, 28, 28}, {1, 16, 1, 1}}, {{5, 3, 4, 2}, {3, 1, 1}},     {{5, 3, 4, 2}, {5, 1, 4, 1}},
      {{4, 3, 5, 2, 3}, {4, 1, 5, 1, 3}}, {{7, 1, 3, 9}, {1, 1, 3, 1}}, {{6, 5, 7}, {6, 1, 7}}};
  for (const auto& [big, small] : pairs) {
    Tensor a = filled(big, 1), b = filled(small, 2);
    Tensor be = expand(b, big).contiguous_copy();
    std::vector<Tensor> want;
    {
      ExecContext ref(1, Isa::scalar);
      ExecScope s(ref);
      want = {add(a, be), sub(be, a), mul(a, be), div(be, a), maximum(a, be)};
    }
    const std::vector<Isa> absent = for_each_context(true, [&](Device, Isa isa, int t) {
      const std::vector<Tensor> got = {add(a, b), sub(b, a), mul(a, b), div(b, a), maximum(a, b)};
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_EQ(fingerprint(got[i]).hex(), fingerprint(want[i]).hex())
            << big.str() << " op " << i << " " << small.str() << " isa=" << isa_name(isa) << " threads=" << t;
    });
    BITGRAD_SAY_COMPARED(absent, "broadcast");
  }
}

TEST(BroadcastOps, GradientsAndDeterminism) {
  std::vector<OpCase> cases = {
      {"mul (middle axis)", {{3, 4, 2, 3}, {1, 4, 1, 1}}, [](V x) { return mul(x[0], x[1]); }},
      {"sub (middle axis, small left)", {{1, 4, 1, 1}, {3, 4, 2, 3}}, [](V x) { return sub(x[0], x[1]); }},
      {"add (alternating axes)", {{3, 4, 2, 3}, {3, 1, 2, 1}}, [](V x) { return add(x[0], x[1]); }},
  };
  run_all_modes(cases);
  check_split_determinism({{"mul (middle axis)", {{64, 16, 28, 28}, {1, 16, 1, 1}}, [](V x) { return mul(x[0], x[1]); }}});
}

}  // namespace
}  // namespace bitgrad::test
