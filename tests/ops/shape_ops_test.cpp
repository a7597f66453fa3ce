// Shape ops: gradients (f64), determinism (f32), views and errors.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(ShapeOps, Gradients) {
  Tensor idx = i64_tensor({2, 0, 2, 1, 2}, Shape{5});
  Tensor gidx = i64_tensor({1, 0, 2, 2, 1, 1}, Shape{2, 3});
  std::vector<OpCase> cases = {
      {"reshape(to=[3,4])", {{2, 6}}, [](V x) { return mul(reshape(x[0], Shape{3, 4}), reshape(x[0], Shape{3, 4})); }},
      {"reshape(to={-1}) (of a transposed view)", {{3, 4}}, [](V x) { return reshape_infer(transpose(x[0], 0, 1), {-1}); }},
      {"flatten(start=1,end=2)", {{2, 3, 4}}, [](V x) { return flatten(x[0], 1, 2); }},
      {"permute(dims={2,0,1})", {{2, 3, 4}}, [](V x) { return contiguous(permute(x[0], {2, 0, 1})); }},
      {"transpose(0,1)", {{3, 5}}, [](V x) { return mul(transpose(x[0], 0, 1), 2.0); }},
      {"expand(to=[2,3,4])", {{3, 1}}, [](V x) { return mul(expand(x[0], Shape{2, 3, 4}), 1.5); }},
      {"slice(axis=0,start=1,end=6,step=2)", {{7, 3}}, [](V x) { return slice(x[0], 0, 1, 6, 2); }},
      {"slice(axis=-1,start=-5,end=100)", {{4, 9}}, [](V x) { return slice(x[0], -1, -5, 100); }},
      {"concat(axis=0)", {{2, 3}, {4, 3}}, [](V x) { return concat({x[0], x[1]}, 0); }},
      {"concat(axis=1) (of x0, x1, x0)", {{2, 3}, {2, 2}}, [](V x) { return concat({x[0], x[1], x[0]}, 1); }},
      {"index_select(axis=0) (repeated indices)", {{3, 4}}, [](V x) { return index_select(x[0], 0, x[1]); }, -1, 1, {idx}},
      {"index_select(axis=1)", {{2, 3, 2}}, [](V x) { return index_select(x[0], 1, x[1]); }, -1, 1, {idx}},
      {"gather(axis=1)", {{2, 3}}, [](V x) { return gather(x[0], 1, x[1]); }, -1, 1, {gidx}},
      {"contiguous", {{3, 2}}, [](V x) { return contiguous(x[0]); }},
  };
  run_all_modes(cases);
}

// Only the shape ops with a threaded kernel: views and copies (reshape, permute, slice, concat,
// contiguous) and gather run on one thread. index_select splits over rows of at least 4096
// elements; expand's backward is the batch rule over 2^16 elements per column group.
TEST(ShapeOps, DeterminismSplitOverThreads) {
  std::vector<std::int64_t> iv(2048);
  rng::Stream st(8, "indices");
  for (std::size_t i = 0; i < iv.size(); ++i) iv[i] = st.u32(i) % 500;
  Tensor idx = i64_tensor(iv, Shape{2048});
  std::vector<OpCase> cases = {
      {"index_select(axis=0)", {{500, 32}}, [](V x) { return index_select(x[0], 0, x[1]); }, -1, 1, {idx}},
      {"index_select(axis=1)", {{4, 500, 8}}, [](V x) { return index_select(x[0], 1, x[1]); }, -1, 1, {idx}},
      {"expand(to=[256,2048])", {{1, 2048}}, [](V x) { return expand(x[0], Shape{256, 2048}); }},
  };
  check_split_determinism(cases);
}

TEST(ShapeOps, ViewsShareStorage) {
  Tensor x = Tensor::arange(12).cast(DType::f32);
  Tensor r = reshape(x, Shape{3, 4});
  EXPECT_EQ(r.storage().get(), x.storage().get());
  Tensor t = transpose(r, 0, 1);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector<float>()[1], 4.0f);
  Tensor s = slice(r, 1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
}

TEST(ShapeOps, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(reshape(x, Shape{4}), Error);
  EXPECT_THROW(permute(x, {0, 0}), Error);
  EXPECT_THROW(expand(x, Shape{4, 3}), Error);
  EXPECT_THROW(concat({x, Tensor::zeros({2, 4})}, 0), Error);
  try {
    index_select(x, 0, i64_tensor({0, 5}, Shape{2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 5 at position 1 is out of range for axis 0 of size 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(slice(x, 2, 0, 1), Error);
}

}  // namespace
}  // namespace bitgrad::test
