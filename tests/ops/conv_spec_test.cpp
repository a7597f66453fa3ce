// conv2d against a direct transcription of docs/numerics.md §14 (no im2col, no GEMM): the
// output, the input gradient and the weight and bias gradients must match bit for bit, on
// strides, paddings and shapes that leave partial rows, on every code path and thread count.
#include <cmath>

#include "kernels/reference.hpp"
#include "support/dot_order.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

struct SpecGeo {
  std::int64_t N, C, H, W, OC, KH, KW;
  int s, p;
};

struct Spec {
  std::vector<float> y, dx, dw, db;
};

// The spec, loop by loop. dy is the upstream gradient [N, OC, OH, OW].
Spec direct(const SpecGeo& g, const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
            const std::vector<float>& dy) {
  const std::int64_t OH = (g.H + 2 * g.p - g.KH) / g.s + 1, OW = (g.W + 2 * g.p - g.KW) / g.s + 1, P = OH * OW;
  const std::int64_t CKK = g.C * g.KH * g.KW;
  auto xpad = [&](std::int64_t n, std::int64_t c, std::int64_t ih, std::int64_t iw) {
    return (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) ? 0.0f : x[static_cast<std::size_t>(((n * g.C + c) * g.H + ih) * g.W + iw)];
  };
  Spec s;
  s.y.resize(static_cast<std::size_t>(g.N * g.OC * P));
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.OC; ++o)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          DotOrder<float> acc;
          for (std::int64_t c = 0; c < g.C; ++c)
            for (std::int64_t kh = 0; kh < g.KH; ++kh)
              for (std::int64_t kw = 0; kw < g.KW; ++kw)
                acc.add(xpad(n, c, oh * g.s + kh - g.p, ow * g.s + kw - g.p), w[static_cast<std::size_t>(((o * g.C + c) * g.KH + kh) * g.KW + kw)]);
          s.y[static_cast<std::size_t>((n * g.OC + o) * P + oh * OW + ow)] = acc.total() + b[static_cast<std::size_t>(o)];
        }
  // weight and bias gradients: per sample, then the batch rule over the samples
  std::vector<float> pw(static_cast<std::size_t>(g.N * g.OC * CKK)), pb(static_cast<std::size_t>(g.N * g.OC));
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.OC; ++o) {
      for (std::int64_t c = 0; c < g.C; ++c)
        for (std::int64_t kh = 0; kh < g.KH; ++kh)
          for (std::int64_t kw = 0; kw < g.KW; ++kw) {
            DotOrder<float> acc;
            for (std::int64_t oh = 0; oh < OH; ++oh)
              for (std::int64_t ow = 0; ow < OW; ++ow)
                acc.add(dy[static_cast<std::size_t>((n * g.OC + o) * P + oh * OW + ow)], xpad(n, c, oh * g.s + kh - g.p, ow * g.s + kw - g.p));
            pw[static_cast<std::size_t>((n * g.OC + o) * CKK + (c * g.KH + kh) * g.KW + kw)] = acc.total();
          }
    }
  const auto& ref = kern::ref::table_f32();
  ref.sum_rows(dy.data(), g.N * g.OC, P, pb.data());
  s.dw.resize(static_cast<std::size_t>(g.OC * CKK));
  s.db.resize(static_cast<std::size_t>(g.OC));
  ref.sum_cols(pw.data(), g.N, g.OC * CKK, s.dw.data());
  ref.sum_cols(pb.data(), g.N, g.OC, s.db.data());
  // input gradient: dcols = w^T dy (the dot order over oc), then col2im in row-major (c, kh, kw, oh, ow)
  s.dx.assign(x.size(), 0.0f);
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t c = 0; c < g.C; ++c)
      for (std::int64_t kh = 0; kh < g.KH; ++kh)
        for (std::int64_t kw = 0; kw < g.KW; ++kw)
          for (std::int64_t oh = 0; oh < OH; ++oh)
            for (std::int64_t ow = 0; ow < OW; ++ow) {
              DotOrder<float> dot;
              for (std::int64_t o = 0; o < g.OC; ++o)
                dot.add(w[static_cast<std::size_t>(((o * g.C + c) * g.KH + kh) * g.KW + kw)], dy[static_cast<std::size_t>((n * g.OC + o) * P + oh * OW + ow)]);
              const float acc = dot.total();
              const std::int64_t ih = oh * g.s + kh - g.p, iw = ow * g.s + kw - g.p;
              if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
              float& d = s.dx[static_cast<std::size_t>(((n * g.C + c) * g.H + ih) * g.W + iw)];
              d = d + acc;
            }
  return s;
}

void expect_spec_bits(const std::vector<float>& want, const Tensor& got, const std::string& what) {
  const std::vector<float> v = got.to_vector<float>();
  ASSERT_EQ(want.size(), v.size()) << what;
  for (std::size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(want[i]), std::bit_cast<std::uint32_t>(v[i]))
        << what << " element " << i << ": " << want[i] << " vs " << v[i];
}

TEST(ConvSpec, MatchesTheDirectDefinitionBitwise) {
  RuntimeGuard guard;
  const std::vector<SpecGeo> geos = {
      {3, 1, 28, 28, 6, 5, 5, 1, 2},   // LeNet's first layer
      {2, 6, 14, 14, 16, 5, 5, 1, 0},  // and its second
      {2, 3, 7, 9, 4, 3, 3, 2, 1},     // stride 2, padding 1, odd sizes
      {1, 2, 11, 6, 3, 3, 2, 3, 2},    // stride 3 and padding 2: whole padded rows and columns
      {5, 2, 5, 5, 7, 1, 1, 1, 0},     // 1x1
      {2, 1, 4, 4, 2, 4, 4, 1, 3},     // padding wider than the kernel reach
      {11, 3, 20, 20, 4, 5, 5, 1, 2},  // several blocks of samples (4, 4, then a short one of 3)
      // taps that read only padding at every output position (ConvGeom::live_taps), which the
      // backward does not compute: a 1x1 image under 3x3 with padding 1 (one live tap of nine),
      // 2x2 at stride 2 (four), a one-row image (the middle row of taps), none live at all
      {3, 37, 1, 1, 5, 3, 3, 1, 1},
      {2, 3, 2, 2, 5, 3, 3, 2, 1},
      {2, 2, 1, 6, 3, 3, 3, 1, 1},
      {2, 2, 1, 1, 3, 3, 3, 10, 3},
  };
  for (const SpecGeo& g : geos) {
    const std::string name = "x=[" + std::to_string(g.N) + "," + std::to_string(g.C) + "," + std::to_string(g.H) + "," +
                             std::to_string(g.W) + "] w=[" + std::to_string(g.OC) + "," + std::to_string(g.C) + "," +
                             std::to_string(g.KH) + "," + std::to_string(g.KW) + "] s=" + std::to_string(g.s) +
                             " p=" + std::to_string(g.p);
    const auto xv = random_vec<float>(static_cast<std::size_t>(g.N * g.C * g.H * g.W), 1);
    const auto wv = random_vec<float>(static_cast<std::size_t>(g.OC * g.C * g.KH * g.KW), 2);
    const auto bv = random_vec<float>(static_cast<std::size_t>(g.OC), 3);
    const std::int64_t OH = (g.H + 2 * g.p - g.KH) / g.s + 1, OW = (g.W + 2 * g.p - g.KW) / g.s + 1;
    const auto dyv = random_vec<float>(static_cast<std::size_t>(g.N * g.OC * OH * OW), 4);
    const Spec want = direct(g, xv, wv, bv, dyv);
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int t : thread_counts()) {
        set_num_threads(t);
        SCOPED_TRACE(name + " isa=" + isa_name(isa) + " threads=" + std::to_string(t));
        Tensor x = Tensor::from<float>(xv, Shape{g.N, g.C, g.H, g.W});
        Tensor w = Tensor::from<float>(wv, Shape{g.OC, g.C, g.KH, g.KW});
        Tensor b = Tensor::from<float>(bv, Shape{g.OC});
        for (Tensor* p : {&x, &w, &b}) p->set_requires_grad(true);
        Tensor y = conv2d(x, w, b, g.s, g.p);
        expect_spec_bits(want.y, y, "y");
        y.backward(Tensor::from<float>(dyv, y.shape()));
        expect_spec_bits(want.dx, x.grad(), "dx");
        expect_spec_bits(want.dw, w.grad(), "dw");
        expect_spec_bits(want.db, b.grad(), "db");
      }
    }
  }
}

// A dead tap's weight gradient is each sample's chain of dy * (+0): NaN (canonical) for an output
// channel whose dy holds an infinity or a NaN, +0 for the others; the live taps as the spec says.
TEST(ConvSpec, DeadTapsWeightGradientFollowsNonFiniteGradients) {
  RuntimeGuard guard;
  const SpecGeo g{4, 3, 1, 1, 4, 3, 3, 1, 1};
  const auto xv = random_vec<float>(static_cast<std::size_t>(g.N * g.C), 1);
  const auto wv = random_vec<float>(static_cast<std::size_t>(g.OC * g.C * 9), 2);
  const auto bv = random_vec<float>(static_cast<std::size_t>(g.OC), 3);
  auto dyv = random_vec<float>(static_cast<std::size_t>(g.N * g.OC), 4);
  dyv[1 * 4 + 1] = INFINITY;  // sample 1, channel 1
  dyv[3 * 4 + 2] = NAN;       // sample 3, channel 2
  const Spec want = direct(g, xv, wv, bv, dyv);
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      SCOPED_TRACE(std::string("isa=") + isa_name(isa) + " threads=" + std::to_string(t));
      Tensor x = Tensor::from<float>(xv, Shape{g.N, g.C, 1, 1});
      Tensor w = Tensor::from<float>(wv, Shape{g.OC, g.C, 3, 3});
      Tensor b = Tensor::from<float>(bv, Shape{g.OC});
      for (Tensor* p : {&x, &w, &b}) p->set_requires_grad(true);
      Tensor y = conv2d(x, w, b, g.s, g.p);
      y.backward(Tensor::from<float>(dyv, y.shape()));
      const std::vector<float> dw = w.grad().to_vector<float>();
      for (std::size_t i = 0; i < dw.size(); ++i) {
        const std::int64_t o = static_cast<std::int64_t>(i) / (g.C * 9), tap = static_cast<std::int64_t>(i) % 9;
        if (tap == 4) {  // the live tap: as the spec says (an infinity times x, or a NaN)
          if (std::isnan(want.dw[i])) ASSERT_EQ(std::bit_cast<std::uint32_t>(dw[i]), 0x7FC00000u) << "dw element " << i;
          else ASSERT_EQ(std::bit_cast<std::uint32_t>(dw[i]), std::bit_cast<std::uint32_t>(want.dw[i])) << "dw element " << i;
        } else {  // dead: NaN for channels 1 and 2, +0 elsewhere
          ASSERT_EQ(std::bit_cast<std::uint32_t>(dw[i]), (o == 1 || o == 2) ? 0x7FC00000u : 0u) << "dw element " << i;
        }
      }
    }
  }
}

TEST(ConvSpec, AnEmptyBatchGivesEmptyResults) {
  RuntimeGuard guard;
  Tensor x = Tensor::zeros(Shape{0, 2, 6, 6}, DType::f32);
  Tensor w = Tensor::ones(Shape{3, 2, 3, 3}, DType::f32);
  Tensor b = Tensor::ones(Shape{3}, DType::f32);
  for (Tensor* p : {&x, &w, &b}) p->set_requires_grad(true);
  Tensor y = conv2d(x, w, b, 1, 1);
  EXPECT_EQ(y.shape(), (Shape{0, 3, 6, 6}));
  sum(y).backward();
  EXPECT_EQ(x.grad().shape(), x.shape());
  EXPECT_EQ(w.grad().shape(), w.shape());
  for (float v : w.grad().to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace bitgrad::test
