// Comparisons, logical ops, isnan / isinf, masked_fill and cast (numerics.md §32): exact
// values, broadcasting, NaN, the dtype rules and the errors. They have no order to keep (no
// rounding, or one conversion per element), so there is no fast path to compare.
#include <cmath>
#include <cstdint>
#include <limits>

#include "bitgrad/bitgrad.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::vector<std::uint8_t> mask_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::u8);
  EXPECT_FALSE(t.requires_grad());
  return t.to_vector<std::uint8_t>();
}
using M = std::vector<std::uint8_t>;

TEST(CompareOps, TensorTensorBroadcastingAndNaN) {
  Tensor a = Tensor::from<double>(std::vector<double>{1.0, 2.0, NAN, -0.0, 3.0, 5.0}, Shape{2, 3});
  Tensor b = Tensor::from<double>(std::vector<double>{2.0, 2.0, NAN}, Shape{3});
  a.set_requires_grad(true);
  EXPECT_EQ(mask_of(eq(a, b)), (M{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(mask_of(ne(a, b)), (M{1, 0, 1, 1, 1, 1}));  // NaN is unequal to everything
  EXPECT_EQ(mask_of(lt(a, b)), (M{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(mask_of(le(a, b)), (M{1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(mask_of(gt(a, b)), (M{0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(mask_of(ge(a, b)), (M{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(mask_of(eq(Tensor::from<double>(std::vector<double>{-0.0}, Shape{1}), Tensor::from<double>(std::vector<double>{0.0}, Shape{1}))),
            (M{1}));
  // [3, 1] against [2]: [3, 2]
  Tensor c = Tensor::from<std::int64_t>(std::vector<std::int64_t>{1, 2, 3}, Shape{3, 1});
  Tensor d = Tensor::from<std::int64_t>(std::vector<std::int64_t>{2, 3}, Shape{2});
  Tensor r = lt(c, d);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_EQ(mask_of(r), (M{1, 1, 0, 1, 0, 0}));
  EXPECT_THROW(eq(a, Tensor::zeros({3}, DType::f32)), Error);  // dtypes differ
  EXPECT_THROW(eq(a, Tensor::zeros({4}, DType::f64)), Error);  // shapes
}

TEST(CompareOps, WithANumber) {
  // a float tensor's number is rounded to its dtype first: 0.1f == 0.1 (as in PyTorch)
  Tensor f = Tensor::from<float>(std::vector<float>{0.1f, 0.2f, NAN}, Shape{3});
  EXPECT_EQ(mask_of(eq(f, 0.1)), (M{1, 0, 0}));
  EXPECT_EQ(mask_of(ge(f, 0.1)), (M{1, 1, 0}));
  EXPECT_EQ(mask_of(ne(f, 0.1)), (M{0, 1, 1}));
  // integers compare with the number itself
  Tensor i = Tensor::from<std::int64_t>(std::vector<std::int64_t>{2, 3}, Shape{2});
  EXPECT_EQ(mask_of(lt(i, 2.5)), (M{1, 0}));
  EXPECT_EQ(mask_of(eq(i, 2.0)), (M{1, 0}));
  Tensor u = Tensor::from<std::uint8_t>(std::vector<std::uint8_t>{0, 1, 255}, Shape{3});
  EXPECT_EQ(mask_of(gt(u, 0.5)), (M{0, 1, 1}));
}

TEST(CompareOps, LogicalAndFloatTests) {
  Tensor a = Tensor::from<std::uint8_t>(std::vector<std::uint8_t>{0, 1, 0, 2}, Shape{2, 2});
  Tensor b = Tensor::from<double>(std::vector<double>{NAN, 0.0}, Shape{2});  // NaN is nonzero: true
  EXPECT_EQ(mask_of(logical_and(a, b)), (M{0, 0, 0, 0}));
  EXPECT_EQ(mask_of(logical_or(a, b)), (M{1, 1, 1, 1}));
  EXPECT_EQ(mask_of(logical_xor(a, b)), (M{1, 1, 1, 1}));
  Tensor c = Tensor::from<std::uint8_t>(std::vector<std::uint8_t>{1, 1}, Shape{2});
  EXPECT_EQ(mask_of(logical_and(a, c)), (M{0, 1, 0, 1}));
  EXPECT_EQ(mask_of(logical_xor(a, c)), (M{1, 0, 1, 0}));
  EXPECT_EQ(mask_of(logical_not(a)), (M{1, 0, 1, 0}));
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = Tensor::from<double>(std::vector<double>{inf, -inf, NAN, 1.0}, Shape{4});
  EXPECT_EQ(mask_of(isnan(x)), (M{0, 0, 1, 0}));
  EXPECT_EQ(mask_of(isinf(x)), (M{1, 1, 0, 0}));
  EXPECT_EQ(mask_of(isinf(x, true, false)), (M{1, 0, 0, 0}));
  EXPECT_EQ(mask_of(isinf(x, false, true)), (M{0, 1, 0, 0}));
  EXPECT_EQ(mask_of(isnan(Tensor::zeros({2}, DType::i64))), (M{0, 0}));
  EXPECT_THROW(isnan(Tensor::zeros({2}, DType::bf16)), Error);
}

TEST(CompareOps, MaskedFill) {
  Tensor x = Tensor::from<float>(std::vector<float>{1, 2, 3, 4, 5, 6}, Shape{2, 3});
  x.set_requires_grad(true);
  Tensor mask = gt(Tensor::from<float>(std::vector<float>{0, 1, 0}, Shape{3}), 0.5);
  Tensor y = masked_fill(x, mask, -1e9);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, -1e9f, 3, 4, -1e9f, 6}));
  sum(y).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 0, 1, 1, 0, 1}));  // +0 where filled
  EXPECT_THROW(masked_fill(x, Tensor::zeros({3, 3}, DType::u8), 0.0), Error);
}

TEST(CompareOps, WhereOnIntegers) {  // ONNX's Where on int64: values, no gradient
  Tensor c = Tensor::from<std::uint8_t>(std::vector<std::uint8_t>{1, 0, 1}, Shape{3});
  Tensor a = Tensor::from<std::int64_t>(std::vector<std::int64_t>{1, 2, 3}, Shape{3});
  Tensor b = Tensor::from<std::int64_t>(std::vector<std::int64_t>{-7}, Shape{1});
  Tensor y = where(c, a, b);
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, -7, 3}));
  EXPECT_THROW(where(c, a, Tensor::zeros({3}, DType::f32)), Error);
}

// where's walk picks a loop per inner stride (0, 1 or other) of the condition and both values:
// every combination of a full operand, one broadcast along the last axis (stride 0) and a
// transposed view (stride 4) against the element-by-element definition
TEST(CompareOps, WhereOnEveryInnerStride) {
  const Shape s{3, 4, 4};
  auto full = [&](std::uint64_t seed) { return Tensor::from<float>(random_vec<float>(48, seed, -2, 2), s); };
  auto operand = [&](int kind, std::uint64_t seed) -> Tensor {
    if (kind == 0) return full(seed);
    if (kind == 1) return Tensor::from<float>(random_vec<float>(12, seed, -2, 2), Shape{3, 4, 1});
    return transpose(full(seed), 1, 2);  // inner stride 4
  };
  for (int kc = 0; kc < 3; ++kc)
    for (int ka = 0; ka < 3; ++ka)
      for (int kb = 0; kb < 3; ++kb) {
        const Tensor c = gt(operand(kc, 1), 0.0), a = operand(ka, 2), b = operand(kb, 3);
        const Tensor y = where(c, a, b);
        const Tensor ce = contiguous(expand(c, s)), ae = contiguous(expand(a, s)), be = contiguous(expand(b, s));
        const auto vc = ce.to_vector<std::uint8_t>();
        const auto va = ae.to_vector<float>(), vb = be.to_vector<float>();
        const auto vy = contiguous(expand(y, s)).to_vector<float>();  // all three broadcast: y is [3, 4, 1]
        std::vector<float> want(48);
        for (std::size_t i = 0; i < 48; ++i) want[i] = vc[i] ? va[i] : vb[i];
        EXPECT_EQ(vy, want) << "condition " << kc << ", a " << ka << ", b " << kb;
      }
}

TEST(CastOps, EveryPairAndItsRules) {
  const DType all[] = {DType::f32, DType::f64, DType::i64, DType::u8, DType::bf16, DType::f16};
  Tensor small = Tensor::from<double>(std::vector<double>{0.0, 1.0, 2.0, 100.0}, Shape{4});
  for (DType from : all)
    for (DType to : all) {
      Tensor y = cast(cast(small, from), to);
      EXPECT_EQ(y.dtype(), to);
      EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0.0, 1.0, 2.0, 100.0})) << dtype_name(from) << " -> " << dtype_name(to);
    }
  // truncation toward zero
  Tensor f = Tensor::from<double>(std::vector<double>{-2.7, -0.5, 0.9, 2.7}, Shape{4});
  EXPECT_EQ(cast(f, DType::i64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{-2, 0, 0, 2}));
  EXPECT_EQ(cast(Tensor::from<float>(std::vector<float>{0.9f, 254.9f}, Shape{2}), DType::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{0, 254}));
  // NaN, infinities and out-of-range values name the element
  for (double bad : {double(NAN), double(INFINITY), -double(INFINITY), 1e19}) {
    try {
      cast(Tensor::from<double>(std::vector<double>{1.0, bad}, Shape{2}), DType::i64);
      FAIL() << "expected an error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cast: element 1 is"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(cast(Tensor::from<double>(std::vector<double>{-1.0}, Shape{1}), DType::u8), Error);
  EXPECT_THROW(cast(Tensor::from<double>(std::vector<double>{256.0}, Shape{1}), DType::u8), Error);
  // i64 -> u8 keeps the low 8 bits; i64 -> f32 rounds once (2^53 + 1 would round twice through f64)
  EXPECT_EQ(cast(Tensor::from<std::int64_t>(std::vector<std::int64_t>{-1, 256, 300}, Shape{3}), DType::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{255, 0, 44}));
  const std::int64_t big = (std::int64_t(1) << 54) + (std::int64_t(1) << 30) + 1;  // just above a tie of f32
  EXPECT_EQ(cast(Tensor::from<std::int64_t>(std::vector<std::int64_t>{big}, Shape{1}), DType::f32).to_vector<float>()[0],
            static_cast<float>(big));
  // the gradient: f64 -> f32 -> loss, back to f64
  Tensor x = Tensor::from<double>(std::vector<double>{0.1, 0.2}, Shape{2});
  x.set_requires_grad(true);
  sum(mul(cast(x, DType::f32), 3.0)).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f64);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3.0, 3.0}));
  EXPECT_FALSE(cast(x, DType::i64).requires_grad());
}

}  // namespace
}  // namespace bitgrad::test
