// kern::contiguous: a strided tensor's copy with its rows (or, for a view whose unit-stride
// dimension is not the last, its tiles) split over the threads has the bytes of the tensor
// layer's serial copy, for every element size, view and thread count.
#include <cstring>
#include <sstream>
#include <vector>

#include "bitgrad/bitgrad.hpp"
#include "kernels/tensor_ops.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

// the bytes of a contiguous tensor
std::string bytes_of(const Tensor& t) {
  EXPECT_TRUE(t.is_contiguous());
  return std::string(static_cast<const char*>(t.storage()->data()) + t.offset() * static_cast<std::int64_t>(dtype_size(t.dtype())),
                     static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
}

// a [6, 37, 129] tensor of `dtype` whose bytes are all distinct-ish, NaN payloads included
Tensor filled(DType dtype) {
  Tensor t = Tensor::empty(Shape{6, 37, 129}, dtype);
  auto* p = static_cast<unsigned char*>(t.storage()->data());
  const std::size_t n = static_cast<std::size_t>(t.numel()) * dtype_size(dtype);
  rng::Stream s(7, "contiguous-test");
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(s.u64(i));
  return t;
}

TEST(TensorOps, ParallelContiguousCopiesTheBytesOfTheSerialCopy) {
  RuntimeGuard guard;
  for (DType dt : {DType::u8, DType::bf16, DType::f32, DType::f64}) {
    const Tensor t = filled(dt);
    const std::pair<const char*, Tensor> views[] = {
        {"permute(0,2,1)", permute(t, {0, 2, 1})},
        {"permute(2,0,1)", permute(t, {2, 0, 1})},
        {"transpose(0,1)", transpose(t, 0, 1)},
        {"slice of the last axis", slice(t, 2, 3, 120)},
        {"slice of the first axis (an offset)", permute(slice(t, 0, 1, 5), {1, 0, 2})},
        {"broadcast (stride 0)", expand(slice(t, 1, 0, 1), Shape{6, 40, 129})},
        {"2-d transpose", transpose(reshape(t, Shape{222, 129}), 0, 1)},
        {"permute(1,2,0), attention's k^T", permute(reshape(t, Shape{37, 6, 129}), {1, 2, 0})},
        {"a transposed plane under a broadcast", permute(expand(slice(reshape(t, Shape{222, 129}), 0, 0, 40), Shape{3, 40, 129}), {0, 2, 1})},
    };
    for (const auto& [name, v] : views) {
      ASSERT_FALSE(v.is_contiguous()) << name;
      const std::string want = bytes_of(v.contiguous_copy());
      std::vector<Tensor> kept;  // alive, so that no copy lands in the memory of an earlier one
      for (int threads : thread_counts()) {
        set_num_threads(threads);
        const Tensor got = kept.emplace_back(kern::contiguous(v));
        EXPECT_EQ(got.shape(), v.shape()) << name;
        EXPECT_TRUE(bytes_of(got) == want) << dtype_name(dt) << " " << name << " threads=" << threads;
      }
    }
  }
}

// A slice's gradient in one pass: the bytes of zeros with the values copied into the slice's
// places (the tensor layer's serial copy), for every axis, step, element size and thread count.
TEST(TensorOps, PlaceInZerosIsZerosWithTheSliceCopiedIn) {
  RuntimeGuard guard;
  for (DType dt : {DType::u8, DType::bf16, DType::f32, DType::f64}) {
    const Tensor t = filled(dt);  // [6, 37, 129]
    struct Case {
      int axis;
      std::int64_t start, step, len;
    };
    for (const Case c : {Case{2, 3, 1, 100}, Case{2, 0, 1, 129}, Case{2, 5, 3, 40}, Case{1, 2, 1, 30}, Case{1, 1, 4, 9}, Case{0, 1, 2, 3},
                         Case{2, 129, 1, 0}}) {
      const Tensor g = slice(t, c.axis, 0, c.len);  // a [.., len, ..] source (a view: copied first)
      Tensor want = Tensor::zeros(t.shape(), dt);
      Shape sh = want.shape(), st = want.strides();
      sh[c.axis] = c.len;
      const std::int64_t off = c.start * st[c.axis];
      st[c.axis] *= c.step;
      Tensor::view_of(want, sh, st, off).copy_from(g);
      std::vector<Tensor> kept;
      for (int threads : thread_counts()) {
        set_num_threads(threads);
        const Tensor got = kept.emplace_back(kern::place_in_zeros(g, t.shape(), c.axis, c.start, c.step));
        EXPECT_TRUE(bytes_of(got) == bytes_of(want)) << dtype_name(dt) << " axis " << c.axis << " start " << c.start << " step " << c.step
                                                     << " threads=" << threads;
      }
    }
  }
}

}  // namespace
}  // namespace bitgrad::test
