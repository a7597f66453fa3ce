// Slices' gradients placed by the engine: slices of disjoint ranges that reach a node before
// anything else are placed in one pass (engine.cpp, settle). Every case must give the bits of the
// plain rule, each slice's gradient placed in zeros and added in arrival order, written out here
// with the kernels the engine used for it before.
#include <bit>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/tensor_ops.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

struct Range {
  int axis;
  std::int64_t start, end;
};

// A seed with every kind of value a sum of placed zeros can change: -0 (to +0), NaNs with payloads
// and a signalling one (to the canonical NaN), infinities, subnormals.
template <class T>
Tensor seed_with_specials(const Shape& shape, std::uint64_t seed) {
  std::vector<T> v = random_vec<T>(static_cast<std::size_t>(shape.numel()), seed, -2.0, 2.0, true);
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const U payload = sizeof(T) == 4 ? U(0x7FC01234u) : U(0x7FF8000000001234ull);
  const U signalling = sizeof(T) == 4 ? U(0x7F800001u) : U(0x7FF0000000000001ull);
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] = T(-0.0);
  for (std::size_t i = 3; i < v.size(); i += 29) v[i] = std::bit_cast<T>(payload);
  for (std::size_t i = 5; i < v.size(); i += 31) v[i] = std::bit_cast<T>(signalling);
  for (std::size_t i = 11; i < v.size(); i += 37) v[i] = (i % 2 ? T(1) : T(-1)) * std::numeric_limits<T>::infinity();
  for (std::size_t i = 13; i < v.size(); i += 41) v[i] = std::numeric_limits<T>::denorm_min() * T(i % 5 ? 3 : -3);
  return Tensor::from<T>(v, shape);
}

// x [R, C] (a leaf), y = reshape(x) (a node) unless `at_leaf`; the slices of y taken in `ranges`'
// order; z = their concatenation along axis 1 in reverse (with `dense_too`, also mul(y, 2) made
// before the slices, flattened to [R, C] and concatenated last). z.backward(G) for the seed G.
// Returns x.grad and what the plain rule gives: the contributions to y in arrival order (the
// slices in reverse creation order, then the mul's), each placed in zeros and added in turn.
template <class T>
std::pair<std::vector<T>, std::vector<T>> run(std::int64_t R, std::int64_t C, const std::vector<Range>& ranges, bool at_leaf,
                                              bool dense_too, std::uint64_t seed) {
  Tensor x = Tensor::zeros(Shape{R, C}, dtype_of<T>());
  x.set_requires_grad(true);
  Tensor y = at_leaf ? x : reshape(x, Shape{R, C});
  Tensor w = dense_too ? mul(y, 2.0) : Tensor();
  std::vector<Tensor> parts;
  for (const Range& r : ranges) parts.push_back(slice(y, r.axis, r.start, r.end));
  // concatenation along axis 1 needs equal rows: a slice along axis 0 goes in flattened to [1, n]
  std::vector<Tensor> cat;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) cat.push_back(reshape(*it, Shape{1, it->numel()}));
  if (dense_too) cat.push_back(reshape(w, Shape{1, w.numel()}));
  Tensor z = concat(cat, 1);
  const Tensor G = seed_with_specials<T>(z.shape(), seed);
  z.backward(G);
  // the plain rule: each part's seed (a copy of G's columns: concat and reshape move bits) placed
  const std::vector<T> g = G.to_vector<T>();
  std::vector<Tensor> arrivals;  // in arrival order: the slice made last first
  std::int64_t at = 0;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    const std::int64_t n = it->numel();
    const std::size_t k = static_cast<std::size_t>(it - parts.rbegin());
    const Range& r = ranges[ranges.size() - 1 - k];
    std::vector<T> part(g.begin() + at, g.begin() + at + n);
    at += n;
    arrivals.push_back(kern::place_in_zeros(Tensor::from<T>(part, it->shape()), Shape{R, C}, r.axis, r.start, 1));
  }
  if (dense_too) {
    std::vector<T> gw(g.begin() + at, g.end());
    arrivals.push_back(mul(Tensor::from<T>(gw, Shape{R, C}), 2.0));
  }
  Tensor want = arrivals[0];
  for (std::size_t i = 1; i < arrivals.size(); ++i) want = kern::add_same_shape(want, arrivals[i]);
  return {x.grad().to_vector<T>(), want.to_vector<T>()};
}

template <class T>
void check_all(std::int64_t R, std::int64_t C) {
  const std::int64_t a = C / 3, b = 2 * C / 3;
  struct Case {
    const char* name;
    std::vector<Range> ranges;
    bool at_leaf = false, dense_too = false;
  };
  const std::vector<Case> cases = {
      {"three ranges covering the axis (q, k, v)", {{1, 0, a}, {1, a, b}, {1, b, C}}},
      {"the same, made in another order", {{1, b, C}, {1, 0, a}, {1, a, b}}},
      {"two ranges with gaps", {{1, 1, a}, {1, b, C - 1}}},
      {"one range alone (placed exactly: -0 and payloads kept)", {{1, a, b}}},
      {"overlapping ranges (added as they arrive)", {{1, 0, b}, {1, a, C}, {1, b, C}}},
      {"ranges on two axes", {{1, 0, a}, {0, 0, R / 2}, {1, b, C}}},
      {"slices of a leaf", {{1, 0, a}, {1, a, C}}, true},
      {"slices, then a whole gradient", {{1, 0, a}, {1, a, b}, {1, b, C}}, false, true},
      {"an empty range among them", {{1, 0, a}, {1, a, a}, {1, a, C}}},
  };
  for (const Case& c : cases)
    for (int t : thread_counts()) {
      set_num_threads(t);
      const auto [got, want] = run<T>(R, C, c.ranges, c.at_leaf, c.dense_too, 17 + static_cast<std::uint64_t>(t));
      EXPECT_TRUE(bitwise_equal(got, want)) << c.name << ", [" << R << ", " << C << "], threads " << t;
    }
}

TEST(SliceGradients, PlacedTogetherGiveTheBitsOfPlacingEachAndAdding) {
  RuntimeGuard guard;
  check_all<float>(5, 13);
  check_all<double>(4, 9);
  // rows enough that the one pass is split over the threads (16384 elements a chunk)
  check_all<float>(3001, 19);
}

TEST(SliceGradients, TheTestTellsASumOfZerosFromAPlacement) {
  // the plain rule turns -0 into +0 wherever a second placed slice was added; a placement alone
  // keeps it: the two differ, so the comparisons above can fail
  RuntimeGuard guard;
  const auto [one, one_want] = run<float>(3, 9, {{1, 0, 9}}, false, false, 5);
  const auto [two, two_want] = run<float>(3, 9, {{1, 0, 4}, {1, 4, 9}}, false, false, 5);
  ASSERT_TRUE(bitwise_equal(one, one_want));
  ASSERT_TRUE(bitwise_equal(two, two_want));
  EXPECT_FALSE(bitwise_equal(one, two));
  auto negative_zeros = [](const std::vector<float>& v) {
    int n = 0;
    for (float f : v) n += std::bit_cast<std::uint32_t>(f) == 0x80000000u;
    return n;
  };
  EXPECT_GT(negative_zeros(one), 0);  // kept by a placement alone
  EXPECT_EQ(negative_zeros(two), 0);  // -0 + 0 = +0
}

}  // namespace
}  // namespace bitgrad::test
