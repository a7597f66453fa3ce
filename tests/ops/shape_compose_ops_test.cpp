// The composed shape and index ops: gradients (f64 finite differences), determinism on every
// code path and thread count (the op harness), exact values, ONNX's conventions, errors.
#include <cmath>

#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

std::vector<double> vals(const Tensor& t) { return t.cast(DType::f64).to_vector<double>(); }
std::vector<std::int64_t> ints(const Tensor& t) { return t.to_vector<std::int64_t>(); }
Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from<double>(v, s); }

template <class F>
void expect_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ShapeComposeOps, Gradients) {
  std::vector<OpCase> cases = {
      {"squeeze(axes={1,-1})", {{3, 1, 4, 1}}, [](V x) { return mul(squeeze(x[0], {1, -1}), 2.0); }},
      {"squeeze(all)", {{1, 3, 1}}, [](V x) { return squeeze(x[0]); }},
      {"unsqueeze(axes={0,-1})", {{3, 4}}, [](V x) { return unsqueeze(x[0], {0, -1}); }},
      {"stack(axis=1)", {{2, 3}, {2, 3}}, [](V x) { return stack({x[0], x[1], x[0]}, 1); }},
      {"stack(axis=-1)", {{2, 3}, {2, 3}}, [](V x) { return stack({x[0], x[1]}, -1); }},
      {"split(sizes={1,3,2},axis=1)", {{2, 6}}, [](V x) {
         auto p = split(x[0], {1, 3, 2}, 1);
         return concat({mul(p[2], 2.0), p[0], mul(p[1], p[1])}, 1);
       }},
      {"chunk(3,axis=0)", {{7, 2}}, [](V x) {
         auto p = chunk(x[0], 3, 0);
         return concat({mul(p[0], 3.0), p[2], p[1]}, 0);
       }},
      {"tile(repeats={2,1,3})", {{3, 2}}, [](V x) { return tile(x[0], {2, 1, 3}); }},
      {"tile(repeats={2,2})", {{2, 3}}, [](V x) { return mul(tile(x[0], {2, 2}), tile(x[0], {2, 2})); }},
      {"flip(axes={0,2})", {{2, 3, 4}}, [](V x) { return flip(x[0], {0, 2}); }},
      {"pad(constant,{1,0,2,3},value=0.5)", {{2, 3}}, [](V x) { return pad(x[0], {1, 0, 2, 3}, PadMode::constant, 0.5); }},
      {"pad(constant,crop,{-1,2,0,-1})", {{3, 4}}, [](V x) { return pad(x[0], {-1, 2, 0, -1}); }},
      {"pad(reflect,{2,1,1,3})", {{3, 4}}, [](V x) { return pad(x[0], {2, 1, 1, 3}, PadMode::reflect); }},
      {"pad(edge,{0,3,2,2})", {{2, 3}}, [](V x) { return pad(x[0], {0, 3, 2, 2}, PadMode::edge); }},
      {"pad(edge,3d,{1,0,0,0,2,1})", {{2, 3, 2}}, [](V x) { return pad(x[0], {1, 0, 0, 0, 2, 1}, PadMode::edge); }},
      {"tril(k=0)", {{2, 3, 4}}, [](V x) { return tril(x[0]); }},
      {"tril(k=-1)", {{4, 3}}, [](V x) { return tril(x[0], -1); }},
      {"triu(k=1)", {{2, 4, 4}}, [](V x) { return triu(x[0], 1); }},
      {"triu(k=-2)", {{3, 5}}, [](V x) { return triu(x[0], -2); }},
  };
  run_all_modes(cases);
}

// The compositions that reach a threaded kernel: flip and pad's reflect/edge (index_select),
// tile's backward (expand's sum_to), einsum (matmul). The rest copy or mask on one thread.
TEST(ShapeComposeOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"flip(axes={0})", {{2048, 32}}, [](V x) { return flip(x[0], {0}); }},
      {"pad(reflect,{500,0,600,0})", {{1200, 32}}, [](V x) { return pad(x[0], {500, 0, 600, 0}, PadMode::reflect); }},
      {"tile(repeats={256,1})", {{1, 2048}}, [](V x) { return tile(x[0], {256, 1}); }},
      {"einsum(bij,bkj->bik)", {{2, 128, 128}, {2, 160, 128}}, [](V x) { return einsum("bij,bkj->bik", {x[0], x[1]}); }},
  };
  check_split_determinism(cases);
}

TEST(ShapeComposeOps, Values) {
  Tensor x = Tensor::arange(6, DType::f64);
  Tensor m = reshape(x, Shape{2, 3});
  EXPECT_EQ(unsqueeze(m, {1}).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(unsqueeze(m, {0, 3}).shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(squeeze(Tensor::zeros({1, 2, 1})).shape(), (Shape{2}));
  EXPECT_EQ(vals(stack({m, m}, 1)), (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(stack({m, m}, -1).shape(), (Shape{2, 3, 2}));
  auto parts = chunk(Tensor::arange(5, DType::f64), 2);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(vals(parts[1]), (std::vector<double>{3, 4}));
  EXPECT_EQ(chunk(Tensor::arange(6), 4).size(), 3u);  // torch: parts of 2, fewer than asked
  EXPECT_EQ(vals(tile(m, {2, 2})),
            (std::vector<double>{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  EXPECT_EQ(tile(m, {3, 1, 1}).shape(), (Shape{3, 2, 3}));
  EXPECT_EQ(vals(flip(m, {-1})), (std::vector<double>{2, 1, 0, 5, 4, 3}));
  // ONNX Pad, the node test's own example (reflect): [[1,1.2],[2.3,3.4],[4.5,5.7]], pads [0,2,0,0]
  Tensor p = f64({1.0, 1.2, 2.3, 3.4, 4.5, 5.7}, Shape{3, 2});
  EXPECT_EQ(vals(pad(p, {0, 2, 0, 0}, PadMode::reflect)),
            (std::vector<double>{1.0, 1.2, 1.0, 1.2, 2.3, 3.4, 2.3, 3.4, 4.5, 5.7, 4.5, 5.7}));
  EXPECT_EQ(vals(pad(p, {0, 2, 0, 0}, PadMode::edge)),
            (std::vector<double>{1.0, 1.0, 1.0, 1.2, 2.3, 2.3, 2.3, 3.4, 4.5, 4.5, 4.5, 5.7}));
  EXPECT_EQ(vals(pad(p, {0, 2, 0, 0}, PadMode::constant, 0.0)),
            (std::vector<double>{0, 0, 1.0, 1.2, 0, 0, 2.3, 3.4, 0, 0, 4.5, 5.7}));
  EXPECT_EQ(vals(pad(Tensor::arange(4, DType::f64), {3, 2}, PadMode::reflect)),
            (std::vector<double>{3, 2, 1, 0, 1, 2, 3, 2, 1}));
  Tensor sq = reshape(Tensor::arange(9, DType::i64).cast(DType::f64), Shape{3, 3});
  EXPECT_EQ(vals(tril(sq)), (std::vector<double>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  EXPECT_EQ(vals(triu(sq, 1)), (std::vector<double>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  EXPECT_EQ(ints(tril(Tensor::ones({2, 3}, DType::i64), -1)), (std::vector<std::int64_t>{0, 0, 0, 1, 0, 0}));
}

// pad's reflect backward: each element's copies summed in increasing output position, from +0
TEST(ShapeComposeOps, PadReflectBackwardOrder) {
  Tensor x = Tensor::zeros({3}, DType::f32).set_requires_grad(true);
  Tensor y = pad(x, {2, 2}, PadMode::reflect);  // sources 2 1 | 0 1 2 | 1 0
  const float big = 1e8f;
  Tensor g = Tensor::from<float>({1.0f, big, 0, 1.0f, 0, -big, 0}, Shape{7});
  y.backward(g);
  // x[1] gets g[1] + g[3] + g[5] in that order: ((0 + 1e8) + 1) - 1e8 = 0 in f32 (1e8 + 1 rounds to 1e8)
  EXPECT_EQ(x.grad().to_vector<float>()[1], ((0.0f + big) + 1.0f) - big);
}

TEST(ShapeComposeOps, Errors) {
  Tensor x = Tensor::zeros({2, 3});
  expect_error([&] { squeeze(x, {0}); }, "axis 0 of shape [2, 3] has size 2");
  expect_error([&] { unsqueeze(x, {3}); }, "axis 3 is out of range for a result of 3 dimensions");
  expect_error([&] { unsqueeze(x, {0, 0}); }, "appears twice");
  expect_error([&] { stack({x, Tensor::zeros({3, 2})}); }, "tensor 1 has shape");
  expect_error([&] { split(x, {1, 1}, 1); }, "sum to 2");
  expect_error([&] { tile(x, {2}); }, "fewer entries");
  expect_error([&] { flip(x, {2}); }, "flip");
  expect_error([&] { pad(x, {1, 1}); }, "expected 2 x 2");
  expect_error([&] { pad(Tensor::zeros({0, 2}), {1, 0, 0, 0}, PadMode::edge); }, "edge padding of an empty axis 0");
  // reflect past the far edge repeats (numpy's, ONNX's reference)
  EXPECT_EQ(vals(pad(Tensor::arange(3, DType::f64), {5, 4}, PadMode::reflect)),
            (std::vector<double>{1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2}));
  expect_error([&] { tril(Tensor::zeros({3})); }, "at least 2 dimensions");
}

TEST(FactoryOps, Values) {
  // ONNX OneHot: negative indices wrap, out of range gives a row of `off`, axis places depth
  Tensor idx = Tensor::from<std::int64_t>({0, -1, 5, 2}, Shape{4});
  EXPECT_EQ(vals(one_hot(idx, 3, -1, 2.0, 7.0, DType::f32)),
            (std::vector<double>{7, 2, 2, 2, 2, 7, 2, 2, 2, 2, 2, 7}));
  EXPECT_EQ(ints(one_hot(idx, 3, 0)), (std::vector<std::int64_t>{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}));
  EXPECT_EQ(one_hot(Tensor::zeros({2, 5}, DType::i64), 4, 1).shape(), (Shape{2, 4, 5}));
  EXPECT_EQ(vals(one_hot(Tensor::from<double>({1.9, -2.5}, Shape{2}), 3)), (std::vector<double>{0, 1, 0, 0, 1, 0}));
  // ONNX Range: count = max(ceil((limit - start) / delta), 0)
  EXPECT_EQ(ints(arange(10, 6, -3, DType::i64)), (std::vector<std::int64_t>{10, 7}));
  EXPECT_EQ(ints(arange(1, 5, 2, DType::i64)), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(arange(5, 1, 1, DType::i64).numel(), 0);
  EXPECT_EQ(vals(arange(1, 5, 2, DType::f32)), (std::vector<double>{1, 3}));
  EXPECT_EQ(vals(arange(0.5, 1.0, 0.25, DType::f64)), (std::vector<double>{0.5, 0.75}));
  EXPECT_EQ(arange(0, 1, 0.3, DType::f64).numel(), 4);
  EXPECT_EQ(vals(eye(2, 3, 1)), (std::vector<double>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(vals(eye(3, -1, -1)), (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(ints(eye_like(Tensor::zeros({2, 2}), 0, DType::i64)), (std::vector<std::int64_t>{1, 0, 0, 1}));
  expect_error([] { arange(0, 1, 0); }, "delta");
  expect_error([] { arange(0, 1.5, 1, DType::i64); }, "integers");
  expect_error([] { one_hot(Tensor::zeros({2}, DType::i64), 3, 2); }, "axis 2 is out of range");
}

// The random factories are pure functions of (stream, first index, shape, dtype): element k is
// draw first_index + k, so a tensor drawn in two parts equals one drawn whole.
TEST(FactoryOps, RandomKeyedByStreamAndIndex) {
  const rng::Stream s(42, "randn");
  Tensor a = randn(Shape{3, 5}, s, 10);
  Tensor b = randn(Shape{3, 5}, s, 10);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  Tensor tail = randn(Shape{5}, s, 20);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(a.to_vector<float>()[10 + k], tail.to_vector<float>()[k]);
  EXPECT_EQ(a.to_vector<float>()[0], s.normal_f32(10));
  Tensor u = rand(Shape{4}, s, 0, DType::f64);
  EXPECT_EQ(u.to_vector<double>()[3], s.uniform_f64(3));
  EXPECT_EQ(rand_like(u, s).to_vector<double>(), u.to_vector<double>());
  EXPECT_EQ(randn_like(a, s, 10).to_vector<float>(), a.to_vector<float>());
  EXPECT_NE(randn(Shape{4}, rng::Stream(43, "randn")).to_vector<float>(), randn(Shape{4}, s).to_vector<float>());
  expect_error([&] { randn(Shape{2}, s, 0, DType::i64); }, "floating");
}

TEST(ScatterOps, Gradients) {
  Tensor idx = i64_tensor({1, 0, 2, 0, 2, 1}, Shape{2, 3});      // axis 1 of [2, 4]: a permutation per row
  Tensor dup = i64_tensor({1, 1, -1, 0, 3, 3}, Shape{2, 3});     // repeated targets, a negative index
  Tensor nd = i64_tensor({1, 0, -3, 2, 1, 0}, Shape{3, 2});      // rows of [3, 4, 2]
  Tensor nd1 = i64_tensor({2, 0, 2}, Shape{3, 1});              // repeated rows
  Tensor bd = i64_tensor({1, 0, 2, 2}, Shape{2, 2, 1});           // batch_dims 1 of [2, 3, 2]
  std::vector<OpCase> cases = {
      {"scatter(axis=1)", {{2, 4}, {2, 3}}, [](V x) { return scatter(x[0], 1, x[2], x[1]); }, -1, 1, {idx}},
      {"scatter(axis=1) (repeated targets, last wins)", {{2, 4}, {2, 3}}, [](V x) { return scatter(x[0], 1, x[2], x[1]); }, -1, 1,
       {dup}},
      {"scatter_add(axis=1)", {{2, 4}, {2, 3}}, [](V x) { return scatter(x[0], 1, x[2], x[1], ScatterReduction::add); }, -1, 1,
       {dup}},
      {"scatter_add(axis=0)", {{4, 3}, {2, 3}}, [](V x) { return scatter(x[0], 0, x[2], x[1], ScatterReduction::add); }, -1, 1,
       {i64_tensor({3, 0, 3, 3, 1, 0}, Shape{2, 3})}},
      {"gather_nd", {{3, 4, 2}}, [](V x) { return gather_nd(x[0], x[1]); }, -1, 1, {nd}},
      {"gather_nd (repeated rows)", {{3, 4}}, [](V x) { return gather_nd(x[0], x[1]); }, -1, 1, {nd1}},
      {"gather_nd(batch_dims=1)", {{2, 3, 2}}, [](V x) { return gather_nd(x[0], x[1], 1); }, -1, 1, {bd}},
      {"scatter_nd", {{3, 4, 2}, {3, 2}}, [](V x) { return scatter_nd(x[0], x[2], x[1]); }, -1, 1, {nd}},
      {"scatter_nd (repeated rows, last wins)", {{3, 4}, {3, 4}}, [](V x) { return scatter_nd(x[0], x[2], x[1]); }, -1, 1, {nd1}},
      {"scatter_nd(add) (repeated rows)", {{3, 4}, {3, 4}},
       [](V x) { return scatter_nd(x[0], x[2], x[1], ScatterReduction::add); }, -1, 1, {nd1}},
  };
  run_all_modes(cases);
}

TEST(ScatterOps, ValuesAndOrder) {
  // ONNX ScatterElements' example: data 0 [3,3], indices [[1,0,2],[0,2,1]], updates [[1,1.1,1.2],[2,2.1,2.2]]
  Tensor data = Tensor::zeros({3, 3}, DType::f64);
  Tensor ix = i64_tensor({1, 0, 2, 0, 2, 1}, Shape{2, 3});
  Tensor up = f64({1.0, 1.1, 1.2, 2.0, 2.1, 2.2}, Shape{2, 3});
  EXPECT_EQ(vals(scatter(data, 0, ix, up)), (std::vector<double>{2.0, 1.1, 0.0, 1.0, 0.0, 2.2, 0.0, 2.1, 1.2}));
  // the last write wins; add applies the sources in index order onto x
  Tensor row = f64({10, 20}, Shape{1, 2});
  Tensor same = i64_tensor({0, 0, 0}, Shape{1, 3});
  EXPECT_EQ(vals(scatter(row, 1, same, f64({1, 2, 3}, Shape{1, 3}))), (std::vector<double>{3, 20}));
  const float big = 1e8f;
  Tensor rowf = Tensor::from<float>({big, 0}, Shape{1, 2});
  Tensor add = scatter(rowf, 1, same, Tensor::from<float>({1.0f, -big, 1.0f}, Shape{1, 3}), ScatterReduction::add);
  EXPECT_EQ(add.to_vector<float>()[0], ((big + 1.0f) - big) + 1.0f);  // ((1e8 + 1) - 1e8) + 1 = 1 in f32
  // ONNX GatherND examples
  Tensor g = reshape(Tensor::arange(8, DType::i64), Shape{2, 2, 2});
  EXPECT_EQ(ints(gather_nd(g, i64_tensor({0, 1, 1, 0}, Shape{2, 2}))), (std::vector<std::int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(ints(gather_nd(g, i64_tensor({1, 0}, Shape{2, 1}), 1)), (std::vector<std::int64_t>{2, 3, 4, 5}));
  // ONNX ScatterND example (1-d): data [1..8], indices [[4],[3],[1],[7]], updates [9,10,11,12]
  Tensor d1 = Tensor::from<double>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{8});
  EXPECT_EQ(vals(scatter_nd(d1, i64_tensor({4, 3, 1, 7}, Shape{4, 1}), f64({9, 10, 11, 12}, Shape{4}))),
            (std::vector<double>{1, 11, 3, 10, 9, 6, 7, 12}));
  EXPECT_EQ(vals(scatter_nd(d1, i64_tensor({0, 0}, Shape{2, 1}), f64({5, 6}, Shape{2}), ScatterReduction::add))[0], 12.0);
  expect_error([&] { scatter(data, 0, i64_tensor({3}, Shape{1, 1}), f64({1}, Shape{1, 1})); }, "index 3 at position 0 is out of range");
  expect_error([&] { gather_nd(g, i64_tensor({0, 0, 0, 0}, Shape{1, 4})); }, "last dimension is 4");
  expect_error([&] { scatter_nd(d1, i64_tensor({0}, Shape{1, 1}), f64({1, 2}, Shape{2})); }, "expected [1]");
}

TEST(SortOps, Gradients) {
  std::vector<OpCase> cases = {
      {"topk(k=3,axis=-1)", {{3, 7}}, [](V x) { return topk(x[0], 3).values; }},
      {"topk(k=2,axis=0,smallest)", {{5, 3}}, [](V x) { return topk(x[0], 2, 0, false).values; }},
      {"sort(axis=1,descending)", {{2, 5, 3}}, [](V x) { return sort(x[0], 1, true).values; }},
      {"sort(axis=-1)", {{4, 6}}, [](V x) { return sort(x[0]).values; }},
  };
  run_all_modes(cases);
}

TEST(SortOps, TiesAndNaN) {
  const double nan = std::nan("");
  Tensor x = f64({1, 3, nan, 3, -0.0, 0.0, 1}, Shape{7});
  ValuesIndices d = sort(x, 0, true);
  EXPECT_EQ(ints(d.indices), (std::vector<std::int64_t>{2, 1, 3, 0, 6, 4, 5}));  // NaN first, ties by index
  ValuesIndices a = sort(x, 0, false);
  EXPECT_EQ(ints(a.indices), (std::vector<std::int64_t>{4, 5, 0, 6, 1, 3, 2}));  // NaN last, -0 == +0
  ValuesIndices t = topk(x, 3, 0, true);
  EXPECT_EQ(ints(t.indices), (std::vector<std::int64_t>{2, 1, 3}));
  ValuesIndices s = topk(reshape(x, Shape{1, 7}), 2, 1, false);
  EXPECT_EQ(ints(s.indices), (std::vector<std::int64_t>{4, 5}));
  EXPECT_EQ(ints(topk(Tensor::from<std::int64_t>({5, 1, 5, 2}, Shape{4}), 2).values), (std::vector<std::int64_t>{5, 5}));
  expect_error([&] { topk(x, 8); }, "k is 8; expected 0 .. 7");
}

TEST(EinsumOps, Gradients) {
  std::vector<OpCase> cases = {
      {"einsum(ij,jk->ik)", {{3, 4}, {4, 5}}, [](V x) { return einsum("ij,jk->ik", {x[0], x[1]}); }},
      {"einsum(bij,bjk->bik)", {{2, 3, 4}, {2, 4, 5}}, [](V x) { return einsum("bij,bjk->bik", {x[0], x[1]}); }},
      {"einsum(bhqd,bhkd->bhqk)", {{2, 2, 3, 4}, {2, 2, 5, 4}}, [](V x) { return einsum("bhqd,bhkd->bhqk", {x[0], x[1]}); }},
      {"einsum(ij,kj->ki)", {{3, 4}, {5, 4}}, [](V x) { return einsum("ij,kj->ki", {x[0], x[1]}); }},
      {"einsum(i,i)", {{6}, {6}}, [](V x) { return einsum("i,i", {x[0], x[1]}); }},
      {"einsum(i,j->ij)", {{3}, {4}}, [](V x) { return einsum("i,j->ij", {x[0], x[1]}); }},
      {"einsum(ij->ji)", {{3, 4}}, [](V x) { return einsum("ij->ji", {x[0]}); }},
      {"einsum(ij->i)", {{3, 4}}, [](V x) { return einsum("ij->i", {x[0]}); }},
      {"einsum(ijk,jl->ilk)", {{2, 3, 4}, {3, 5}}, [](V x) { return einsum("ijk,jl->ilk", {x[0], x[1]}); }},
      {"einsum(...ij,...kj->...ik)", {{2, 3, 4}, {2, 5, 4}}, [](V x) { return einsum("...ij,...kj->...ik", {x[0], x[1]}); }},
      {"einsum(i...,i)", {{3, 2, 4}, {3}}, [](V x) { return einsum("i...,i", {x[0], x[1]}); }},
  };
  run_all_modes(cases);
}

// einsum's bits are matmul's
TEST(EinsumOps, BitsAreMatmuls) {
  Tensor a = randn(Shape{2, 5, 7}, rng::Stream(1, "a"));
  Tensor b = randn(Shape{2, 7, 3}, rng::Stream(1, "b"));
  EXPECT_EQ(einsum("bij,bjk->bik", {a, b}).to_vector<float>(), matmul(a, b).to_vector<float>());
  Tensor c = randn(Shape{7, 5}, rng::Stream(1, "c"));
  EXPECT_EQ(einsum("ji,bjk->bik", {c, b}).to_vector<float>(), matmul(transpose(c, 0, 1), b).to_vector<float>());
  expect_error([&] { einsum("ii->i", {Tensor::zeros({3, 3})}); }, "appears twice in operand 0 (a diagonal)");
  EXPECT_EQ(einsum("...ij,...jk", {a, b}).to_vector<float>(), matmul(a, b).to_vector<float>());
  EXPECT_EQ(einsum("...ij,jk->...ik", {a, c}).shape(), (Shape{2, 5, 5}));
  expect_error([&] { einsum("...ij,...jk", {a, Tensor::zeros({3, 7, 3})}); }, "has sizes 2 and 3");
  expect_error([&] { einsum("ij,jk,kl->il", {c, c, c}); }, "more than two operands");
  expect_error([&] { einsum("ij,jk->ik", {Tensor::zeros({2, 3}), Tensor::zeros({4, 2})}); }, "index 'j' has sizes 3 and 4");
}

}  // namespace
}  // namespace bitgrad::test
