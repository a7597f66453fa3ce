// Shape ops: gradients (f64), determinism (f32), views and errors.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

TEST(ShapeOps, Gradients) {
  Tensor idx = i64_tensor({2, 0, 2, 1, 2}, Shape{5});
  Tensor gidx = i64_tensor({1, 0, 2, 2, 1, 1}, Shape{2, 3});
  std::vector<OpCase> cases = {
      {"reshape(x=[2,6]->[3,4])", {{2, 6}}, [](V x) { return mul(reshape(x[0], Shape{3, 4}), reshape(x[0], Shape{3, 4})); }},
      {"reshape(transposed)", {{3, 4}}, [](V x) { return reshape_infer(transpose(x[0], 0, 1), {-1}); }},
      {"flatten(x=[2,3,4],1,2)", {{2, 3, 4}}, [](V x) { return flatten(x[0], 1, 2); }},
      {"permute(x=[2,3,4],{2,0,1})", {{2, 3, 4}}, [](V x) { return contiguous(permute(x[0], {2, 0, 1})); }},
      {"transpose(x=[3,5])", {{3, 5}}, [](V x) { return mul(transpose(x[0], 0, 1), 2.0); }},
      {"expand(x=[3,1]->[2,3,4])", {{3, 1}}, [](V x) { return mul(expand(x[0], Shape{2, 3, 4}), 1.5); }},
      {"slice(x=[7,3],0,1,6,2)", {{7, 3}}, [](V x) { return slice(x[0], 0, 1, 6, 2); }},
      {"slice(x=[4,9],-1,-5,100)", {{4, 9}}, [](V x) { return slice(x[0], -1, -5, 100); }},
      {"concat([2,3],[4,3],axis=0)", {{2, 3}, {4, 3}}, [](V x) { return concat({x[0], x[1]}, 0); }},
      {"concat(x,[2,2],x,axis=1)", {{2, 3}, {2, 2}}, [](V x) { return concat({x[0], x[1], x[0]}, 1); }},
      {"index_select(x=[3,4],axis=0,repeated)", {{3, 4}}, [](V x) { return index_select(x[0], 0, x[1]); }, -1, 1, {idx}},
      {"index_select(x=[2,3,2],axis=1)", {{2, 3, 2}}, [](V x) { return index_select(x[0], 1, x[1]); }, -1, 1, {idx}},
      {"gather(x=[2,3],axis=1)", {{2, 3}}, [](V x) { return gather(x[0], 1, x[1]); }, -1, 1, {gidx}},
      {"contiguous(x=[3,2])", {{3, 2}}, [](V x) { return contiguous(x[0]); }},
  };
  run_all_modes(cases);
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
