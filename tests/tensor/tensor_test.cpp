// Tensor, Shape and Storage.
#include <cmath>
#include <cstdint>

#include "bitgrad/checked.hpp"
#include "support/op_harness.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(Shape, BasicsAndBroadcasting) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.ndim(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.at(-1), 4);
  EXPECT_EQ(s.str(), "[2, 3, 4]");
  EXPECT_EQ(contiguous_strides(s), (Shape{12, 4, 1}));
  EXPECT_EQ(broadcast_shapes(Shape{3, 1}, Shape{2, 1, 4}, "t"), (Shape{2, 3, 4}));
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_THROW(broadcast_shapes(Shape{3}, Shape{4}, "t"), Error);
  EXPECT_THROW((Shape{1, 2, 3, 4, 5, 6, 7, 8, 9}), Error);
  EXPECT_THROW((Shape{2, -1}), Error);
  EXPECT_THROW(s.at(3), Error);
}

TEST(Shape, ElementCountsAreCheckedNeverWrapped) {
  // [2^32, 2^32] had numel() 0 and [2^62 + 1, 4] numel() 4 (the product wrapped), so a
  // reshape of 4 values to it passed and reads ran past the storage
  const std::int64_t big = std::int64_t{1} << 32;
  EXPECT_THROW_MSG((Shape{big, big}), "has more than 2^56 elements");
  EXPECT_THROW_MSG((Shape{(std::int64_t{1} << 62) + 1, 4}), "has more than 2^56 elements");
  EXPECT_EQ((Shape{std::int64_t{1} << 60, 0}).numel(), 0);  // no elements, whatever the other dimensions
  Shape s{std::int64_t{1} << 30};
  EXPECT_THROW(s.push_back(std::int64_t{1} << 30), Error);
  EXPECT_THROW_MSG(reshape_infer(Tensor::ones(Shape{4}), {(std::int64_t{1} << 62) + 1, 4}), "reshape");
  EXPECT_THROW_MSG(reshape_infer(Tensor::ones(Shape{4}), {-1, big, big}), "reshape");
  EXPECT_EQ(checked_mul(3, 4, "t"), 12);
  EXPECT_THROW_MSG(checked_mul(big, big, "a test"), "a test: 4294967296 x 4294967296 is more than 2^56");
  EXPECT_THROW(checked_add(kMaxElements, 1, "t"), Error);
  // 2^56 elements is a shape, but not 2^58 bytes of storage: refused before any allocation
  EXPECT_THROW_MSG(Tensor::zeros(Shape{std::int64_t{1} << 28, std::int64_t{1} << 28}), "tensor:");
}

TEST(Tensor, FactoriesAndAccess) {
  Tensor z = Tensor::zeros({2, 3});
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(z.data<float>()) % 64, 0u) << "storage is 64-byte aligned";
  EXPECT_EQ(Tensor::full({2}, 2.5, DType::f64).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(Tensor::arange(4, DType::i64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Tensor::scalar(3.0).item(), 3.0);
  EXPECT_THROW(z.data<double>(), Error) << "dtype checked";
  EXPECT_THROW(z.item(), Error);
  EXPECT_THROW(Tensor::from<float>(std::vector<float>{1, 2}, Shape{3}), Error);
  EXPECT_THROW(Tensor().shape(), Error);
}

TEST(Tensor, CastCopyFill) {
  Tensor x = Tensor::from<double>(std::vector<double>{1.5, -2.25, 3}, Shape{3});
  EXPECT_EQ(x.cast(DType::f32).to_vector<float>(), (std::vector<float>{1.5f, -2.25f, 3.0f}));
  EXPECT_EQ(x.cast(DType::i64).to_vector<std::int64_t>(), (std::vector<std::int64_t>{1, -2, 3}));
  // a float with no integer (NaN, infinities, out of range) is refused, never undefined behaviour
  for (double bad : {std::nan(""), 1.0 / 0.0, 0x1p63, -0x1p64})
    EXPECT_THROW(Tensor::from<double>(std::vector<double>{0.0, bad}, Shape{2}).cast(DType::i64), Error) << bad;
  for (double bad : {256.0, -1.0, std::nan("")})
    EXPECT_THROW(Tensor::from<double>(std::vector<double>{bad}, Shape{1}).cast(DType::u8), Error) << bad;
  EXPECT_EQ(Tensor::from<double>(std::vector<double>{-0x1p63, 255.9, -0.9}, Shape{3}).cast(DType::i64).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{INT64_MIN, 255, 0}));
  EXPECT_EQ(Tensor::from<double>(std::vector<double>{255.9, -0.9}, Shape{2}).cast(DType::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{255, 0}));
  EXPECT_EQ(Tensor::from<std::int64_t>(std::vector<std::int64_t>{300, -1}, Shape{2}).cast(DType::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{44, 255}));  // integers: the low 8 bits
  Tensor y = Tensor::zeros({3}, DType::f64);
  y.copy_from(x);
  EXPECT_EQ(y.to_vector<double>(), x.to_vector<double>());
  const auto v0 = y.storage()->version();
  y.fill_(7);
  EXPECT_GT(y.storage()->version(), v0) << "in-place writes bump the version";
  EXPECT_THROW(y.copy_from(Tensor::zeros({4}, DType::f64)), Error);
}

// contiguous_copy of views: offset rows, a 2-d transpose across several 32 x 32 tiles (odd
// sizes), a 3-d permutation, each element where the view puts it.
TEST(Tensor, ContiguousCopyOfViews) {
  std::vector<float> v(70 * 45 + 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  const Tensor base = Tensor::from<float>(v, Shape{static_cast<std::int64_t>(v.size())});
  const Tensor t = Tensor::view_of(base, Shape{45, 70}, Shape{1, 45}, 3);  // [70, 45] at offset 3, transposed
  const std::vector<float> c = t.contiguous_copy().to_vector<float>();
  for (std::int64_t r = 0; r < 45; ++r)
    for (std::int64_t k = 0; k < 70; ++k) ASSERT_EQ(c[static_cast<std::size_t>(r * 70 + k)], v[static_cast<std::size_t>(3 + r + k * 45)]);
  const Tensor rows = Tensor::view_of(base, Shape{4, 45}, Shape{45, 1}, 3 + 45);  // contiguous, offset
  EXPECT_EQ(rows.contiguous_copy().to_vector<float>(), std::vector<float>(v.begin() + 48, v.begin() + 48 + 180));
  const Tensor p3 = Tensor::view_of(base, Shape{5, 9, 7}, Shape{1, 35, 5}, 0);  // [9, 7, 5] permuted
  const std::vector<float> c3 = p3.contiguous_copy().to_vector<float>();
  for (std::int64_t a = 0; a < 5; ++a)
    for (std::int64_t b = 0; b < 9; ++b)
      for (std::int64_t k = 0; k < 7; ++k) ASSERT_EQ(c3[static_cast<std::size_t>((a * 9 + b) * 7 + k)], v[static_cast<std::size_t>(a + b * 35 + k * 5)]);
}

TEST(Tensor, Printing) {
  Tensor x = Tensor::from<float>(std::vector<float>{1.5f, -2.0f, 0.25f, 3.0f}, Shape{2, 2});
  EXPECT_EQ(x.str(), "tensor([[1.5, -2], [0.25, 3]], f32, shape=[2, 2])");
  x.set_requires_grad(true);
  EXPECT_NE(x.str().find("requires_grad"), std::string::npos);
  Tensor big = Tensor::arange(20, DType::i64);
  EXPECT_EQ(big.str(), "tensor([0, 1, 2, ..., 17, 18, 19], i64, shape=[20])");
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}

TEST(Storage, PoolReusesBuffersAndTracksPeak) {
  memory::reset_peak();
  const std::size_t base = memory::bytes_in_use();
  const void* p1;
  {
    Tensor a = Tensor::empty({1000});
    p1 = a.data<float>();
    EXPECT_GE(memory::bytes_in_use(), base + 4000);
  }
  Tensor b = Tensor::empty({1000});
  EXPECT_EQ(b.data<float>(), p1) << "a freed buffer of the same class is reused";
  EXPECT_GE(memory::peak_bytes_in_use(), base + 4000);
}

}  // namespace
}  // namespace bitgrad::test
