// Pooling with options, adaptive and global pooling, upsampling (numerics.md §35, §36):
// gradients (f64 finite differences), determinism on every code path at threads 1-8 (the op
// harness), the original pooling's bits through the general op, known values, errors.
#include <bit>
#include <cmath>
#include <limits>

#include "bitgrad/ops_spatial.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

PoolOptions opts(std::vector<int> k, std::vector<int> s = {}, std::vector<int> p = {}, std::vector<int> d = {}, bool ceil = false,
                 bool include = false) {
  PoolOptions o;
  o.kernel = std::move(k);
  o.stride = std::move(s);
  o.pads = std::move(p);
  o.dilation = std::move(d);
  o.ceil_mode = ceil;
  o.count_include_pad = include;
  return o;
}

std::vector<OpCase> small_cases() {
  return {
      {"max_pool(k=3,s=2,pads=1)", {{2, 2, 7, 6}}, [](V x) { return max_pool(x[0], opts({3, 3}, {2, 2}, {1, 1, 1, 1})); }},
      {"max_pool(k=2x3,asym pads,ceil)", {{1, 3, 6, 7}}, [](V x) { return max_pool(x[0], opts({2, 3}, {2, 2}, {0, 1, 1, 0}, {}, true)); }},
      {"max_pool(k=2,dil=2)", {{2, 2, 7, 7}}, [](V x) { return max_pool(x[0], opts({2, 2}, {1, 1}, {}, {2, 2})); }},
      {"max_pool(1d,k=3,s=2,pads=1,ceil)", {{2, 3, 10}}, [](V x) { return max_pool(x[0], opts({3}, {2}, {1, 1}, {}, true)); }},
      {"avg_pool(k=3,s=2,pads=1,incl)", {{2, 2, 7, 6}}, [](V x) { return avg_pool(x[0], opts({3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, true)); }},
      {"avg_pool(k=3,s=2,pads=1,excl)", {{2, 2, 7, 6}}, [](V x) { return avg_pool(x[0], opts({3, 3}, {2, 2}, {1, 1, 1, 1})); }},
      {"avg_pool(k=2x3,ceil,incl)", {{1, 2, 7, 8}}, [](V x) { return avg_pool(x[0], opts({2, 3}, {2, 2}, {1, 0, 0, 1}, {}, true, true)); }},
      {"avg_pool(1d,k=4,s=3,pads=2)", {{2, 2, 11}}, [](V x) { return avg_pool(x[0], opts({4}, {3}, {2, 2}, {}, false, true)); }},
      {"adaptive_avg_pool2d(3x2)", {{2, 3, 7, 5}}, [](V x) { return adaptive_avg_pool2d(x[0], 3, 2); }},
      {"adaptive_avg_pool2d(4x4 from 3x3)", {{1, 2, 3, 3}}, [](V x) { return adaptive_avg_pool2d(x[0], 4, 4); }},
      {"adaptive_max_pool2d(3x2)", {{2, 3, 7, 5}}, [](V x) { return adaptive_max_pool2d(x[0], 3, 2); }},
      {"adaptive_avg_pool1d(4)", {{2, 3, 9}}, [](V x) { return adaptive_avg_pool1d(x[0], 4); }},
      {"adaptive_max_pool1d(4)", {{2, 3, 9}}, [](V x) { return adaptive_max_pool1d(x[0], 4); }},
      {"global_avg_pool", {{2, 3, 5, 4}}, [](V x) { return global_avg_pool(x[0]); }},
      {"global_avg_pool (1d)", {{2, 3, 7}}, [](V x) { return global_avg_pool(x[0]); }},
      {"global_max_pool", {{2, 3, 2, 3, 4}}, [](V x) { return global_max_pool(x[0]); }},
      {"upsample_nearest2d(x2)", {{2, 2, 3, 4}}, [](V x) { return upsample_nearest2d(x[0], 6, 8); }},
      {"upsample_nearest2d(5x7 from 3x4)", {{1, 2, 3, 4}}, [](V x) { return upsample_nearest2d(x[0], 5, 7); }},
      {"upsample_nearest2d(down 2x3)", {{1, 2, 5, 7}}, [](V x) { return upsample_nearest2d(x[0], 2, 3); }},
      {"upsample_bilinear2d(align)", {{2, 2, 3, 4}}, [](V x) { return upsample_bilinear2d(x[0], 5, 7, true); }},
      {"upsample_bilinear2d(half pixel)", {{2, 2, 3, 4}}, [](V x) { return upsample_bilinear2d(x[0], 5, 9, false); }},
      {"upsample_bilinear2d(scale 2.5)", {{1, 2, 4, 3}}, [](V x) { return upsample_bilinear2d(x[0], 10, 7, false, 2.5, 2.5); }},
      {"upsample_bilinear2d(down)", {{1, 1, 6, 5}}, [](V x) { return upsample_bilinear2d(x[0], 4, 3, false); }},
  };
}

TEST(PoolPaddedOps, GradientsAndDeterminism) { run_all_modes(small_cases()); }

// Big enough for the grains (planes of about 4096 taps per task, at least one plane)
TEST(PoolPaddedOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"max_pool(k=3,s=2,pads=1,ceil)", {{8, 8, 33, 33}}, [](V x) { return max_pool(x[0], opts({3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true)); }},
      {"avg_pool(k=3,s=2,pads=1,incl)", {{8, 8, 33, 33}}, [](V x) { return avg_pool(x[0], opts({3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, true)); }},
      {"adaptive_avg_pool2d(5x5)", {{8, 8, 33, 31}}, [](V x) { return adaptive_avg_pool2d(x[0], 5, 5); }},
      {"adaptive_max_pool2d(5x5)", {{8, 8, 33, 31}}, [](V x) { return adaptive_max_pool2d(x[0], 5, 5); }},
      {"global_avg_pool", {{8, 16, 40, 40}}, [](V x) { return global_avg_pool(x[0]); }},
      {"upsample_nearest2d(x2)", {{8, 8, 32, 32}}, [](V x) { return upsample_nearest2d(x[0], 64, 64); }},
      {"upsample_bilinear2d(x2)", {{8, 8, 32, 32}}, [](V x) { return upsample_bilinear2d(x[0], 64, 64, false); }},
  };
  check_split_determinism(cases);
}

void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  const std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  ASSERT_EQ(va.size(), vb.size()) << what;
  for (std::size_t i = 0; i < va.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(va[i]), std::bit_cast<std::uint32_t>(vb[i])) << what << " element " << i;
}

// With no padding, dilation or ceil mode the general op is the original one, bit for bit,
// forward and backward (the documented orders are the same)
TEST(PoolPaddedOps, WithoutOptionsGivesTheOriginalPoolingsBits) {
  RuntimeGuard guard;
  const auto xv = random_vec<float>(2 * 3 * 9 * 11, 5, -1, 1, true);
  const auto gv = random_vec<float>(2 * 3 * 4 * 5, 6);
  for (bool max : {true, false}) {
    Tensor a = Tensor::from<float>(xv, Shape{2, 3, 9, 11}), b = Tensor::from<float>(xv, Shape{2, 3, 9, 11});
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    Tensor ya = max ? max_pool2d(a, 3, 2) : avg_pool2d(a, 3, 2);
    Tensor yb = max ? max_pool(b, opts({3, 3}, {2, 2})) : avg_pool(b, opts({3, 3}, {2, 2}));
    expect_same_bits(ya, yb, max ? "max y" : "avg y");
    ya.backward(Tensor::from<float>(gv, ya.shape()));
    yb.backward(Tensor::from<float>(gv, yb.shape()));
    expect_same_bits(a.grad(), b.grad(), max ? "max dx" : "avg dx");
  }
}

TEST(PoolPaddedOps, KnownValues) {
  Tensor l = Tensor::from<float>(std::vector<float>{1, 2, 3, 4, 5}, Shape{1, 1, 5});
  // PyTorch's bins of 5 into 3: [0, 2), [1, 4), [3, 5)
  EXPECT_EQ(adaptive_avg_pool1d(l, 3).to_vector<float>(), (std::vector<float>{1.5f, 3, 4.5f}));
  EXPECT_EQ(adaptive_max_pool1d(l, 3).to_vector<float>(), (std::vector<float>{2, 4, 5}));
  // pads 1, k 3, s 2 over 5: windows [-1, 2), [1, 4), [3, 6)
  EXPECT_EQ(avg_pool(l, opts({3}, {2}, {1, 1}, {}, false, true)).to_vector<float>(), (std::vector<float>{1, 3, 3}));
  EXPECT_EQ(avg_pool(l, opts({3}, {2}, {1, 1})).to_vector<float>(), (std::vector<float>{1.5f, 3, 4.5f}));
  EXPECT_EQ(max_pool(l, opts({3}, {2}, {1, 1})).to_vector<float>(), (std::vector<float>{2, 4, 5}));
  // ceil mode over 5, k 2, s 2: a third window [4, 6) holding one tap
  EXPECT_EQ(max_pool(l, opts({2}, {2}, {}, {}, true)).to_vector<float>(), (std::vector<float>{2, 4, 5}));
  EXPECT_EQ(avg_pool(l, opts({2}, {2}, {}, {}, true, true)).to_vector<float>(), (std::vector<float>{1.5f, 3.5f, 5}));
  // ceil mode drops a window that would start in the end padding: 5 + pads 1/1, k 2, s 2 -> 3, not 4
  EXPECT_EQ(max_pool(Tensor::ones(Shape{1, 1, 5}), opts({2}, {2}, {1, 1}, {}, true)).shape(), (Shape{1, 1, 3}));
  // dilation 2: taps 0, 2, 4
  EXPECT_EQ(max_pool(l, opts({3}, {1}, {}, {2})).to_vector<float>(), (std::vector<float>{5}));
  Tensor x = Tensor::from<float>(std::vector<float>{1, 2, 3, 4}, Shape{1, 1, 2, 2});
  EXPECT_EQ(global_avg_pool(x).to_vector<float>(), (std::vector<float>{2.5f}));
  EXPECT_EQ(global_max_pool(x).shape(), (Shape{1, 1, 1, 1}));
  EXPECT_EQ(upsample_nearest2d(x, 4, 4).to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  EXPECT_EQ(upsample_bilinear2d(x, 3, 3, true).to_vector<float>(), (std::vector<float>{1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4}));
  // half pixel, 2 -> 4: sources 0 (clamped), 0.25, 0.75, 1.25 -> i0 = 1, i1 = 1 (the edge)
  EXPECT_EQ(upsample_bilinear2d(Tensor::from<float>(std::vector<float>{0, 4}, Shape{1, 1, 1, 2}), 1, 4, false).to_vector<float>(),
            (std::vector<float>{0, 1, 3, 4}));
}

TEST(PoolPaddedOps, NaNWinsAndTheGradientGoesToTheFirstMaximum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from<float>(std::vector<float>{3, 5, 5, nan, 1, 9}, Shape{1, 1, 6});
  x.set_requires_grad(true);
  Tensor y = adaptive_max_pool1d(x, 2);  // bins [0, 3), [3, 6)
  const std::vector<float> v = y.to_vector<float>();
  EXPECT_EQ(v[0], 5.0f);
  EXPECT_TRUE(std::isnan(v[1]));
  y.backward(Tensor::from<float>(std::vector<float>{10, 20}, y.shape()));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 10, 0, 20, 0, 0}));
}

// 2-d windows with ties, -0 beside +0 and NaNs, padded, strided and dilated: each output the first
// maximum of its window in row-major order of its taps (a NaN wins and stays), the gradient at
// that tap; against the rule written out here, element by element.
TEST(PoolPaddedOps, MaxIsTheFirstMaximumOfEachWindowInRowMajorOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::int64_t H = 9, W = 11;
  std::vector<float> v(static_cast<std::size_t>(2 * H * W));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::uint64_t r = (i * 2654435761u) % 23;
    v[i] = r == 0 ? nan : r < 4 ? (r % 2 ? -0.0f : 0.0f) : static_cast<float>(r % 5);  // few values: many ties
  }
  struct Opt {
    int k, s, p, d, kw;  // kw: the window's width (its height k)
  };
  for (const Opt o : {Opt{3, 2, 1, 1, 3}, Opt{3, 1, 1, 1, 3}, Opt{2, 2, 1, 1, 2}, Opt{3, 2, 2, 2, 3}, Opt{4, 3, 2, 1, 4}, Opt{2, 1, 1, 1, 5},
                      Opt{3, 2, 1, 2, 6}}) {
    Tensor x = Tensor::from<float>(v, Shape{1, 2, H, W});
    x.set_requires_grad(true);
    Tensor y = max_pool(x, opts({o.k, o.kw}, {o.s, o.s}, {o.p, o.p, o.p, o.p}, {o.d, o.d}));
    const std::int64_t OH = y.shape()[2], OW = y.shape()[3];
    const std::vector<float> got = y.to_vector<float>();
    std::vector<float> gy(got.size()), want_dx(v.size(), 0.0f);
    for (std::size_t i = 0; i < gy.size(); ++i) gy[i] = static_cast<float>(i + 1);
    for (std::int64_t q = 0; q < 2; ++q)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          std::int64_t best = -1;
          for (int i = 0; i < o.k; ++i)
            for (int j = 0; j < o.kw; ++j) {
              const std::int64_t ih = oh * o.s - o.p + i * o.d, iw = ow * o.s - o.p + j * o.d;
              if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
              const std::int64_t at = (q * H + ih) * W + iw;
              const float c = v[static_cast<std::size_t>(at)], b = best < 0 ? 0.0f : v[static_cast<std::size_t>(best)];
              if (best < 0 || (b == b && (c != c || c > b))) best = at;
            }
          const std::size_t o_at = static_cast<std::size_t>((q * OH + oh) * OW + ow);
          const float w = v[static_cast<std::size_t>(best)];
          EXPECT_EQ(std::bit_cast<std::uint32_t>(got[o_at]), w == w ? std::bit_cast<std::uint32_t>(w) : 0x7FC00000u)
              << "k" << o.k << "x" << o.kw << " s" << o.s << " p" << o.p << " d" << o.d << " at " << o_at;
          want_dx[static_cast<std::size_t>(best)] += gy[o_at];
        }
    y.backward(Tensor::from<float>(gy, y.shape()));
    EXPECT_EQ(x.grad().to_vector<float>(), want_dx) << "k" << o.k << "x" << o.kw << " s" << o.s << " p" << o.p << " d" << o.d;
  }
}

TEST(PoolPaddedOps, Errors) {
  EXPECT_THROW(max_pool(Tensor::zeros({1, 1, 4, 4}), opts({5, 5})), Error);
  EXPECT_THROW(max_pool(Tensor::zeros({1, 1, 4, 4}), opts({2})), Error);
  EXPECT_THROW(max_pool(Tensor::zeros({1, 1, 4, 4}), opts({2, 2}, {1})), Error);
  EXPECT_THROW(avg_pool(Tensor::zeros({1, 1, 4, 4}), opts({2, 2}, {}, {}, {2, 2})), Error);
  EXPECT_THROW(max_pool(Tensor::zeros({1, 1, 4, 4}), opts({2, 2}, {}, {-1, 0, 0, 0})), Error);
  EXPECT_THROW(adaptive_avg_pool2d(Tensor::zeros({1, 4, 4}), 2, 2), Error);
  EXPECT_THROW(adaptive_avg_pool2d(Tensor::zeros({1, 1, 4, 4}), 0, 2), Error);
  EXPECT_THROW(global_avg_pool(Tensor::zeros({1, 4})), Error);
  EXPECT_THROW(upsample_nearest2d(Tensor::zeros({1, 4, 4}), 8, 8), Error);
  EXPECT_THROW(upsample_bilinear2d(Tensor::zeros({1, 1, 4, 4}), 0, 8, false), Error);
}

}  // namespace
}  // namespace bitgrad::test
