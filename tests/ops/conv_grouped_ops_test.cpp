// conv (stride, pads, dilation per axis, groups, 1-d) and conv_transpose against a direct
// transcription of docs/numerics.md §37 (loops, no im2col, no GEMM), bit for bit on every code
// path and thread count; gradients (f64 finite differences) and determinism through the op
// harness; errors.
#include <bit>
#include <cmath>

#include "kernels/reference.hpp"
#include "bitgrad/ops_spatial.hpp"
#include "support/dot_order.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;
using Vec = std::vector<float>;

// A conv in its own orientation: input [N, C, H, W] -> output [N, OC, OH, OW]
struct Geo {
  std::int64_t N, C, H, W, OC, G, KH, KW;
  int sh, sw, pt, pl, pb, pr, dh, dw;
  std::int64_t OH() const { return (H + pt + pb - (dh * (KH - 1) + 1)) / sh + 1; }
  std::int64_t OW() const { return (W + pl + pr - (dw * (KW - 1) + 1)) / sw + 1; }
  std::int64_t Cg() const { return C / G; }
  std::int64_t OCg() const { return OC / G; }
  std::size_t xn() const { return static_cast<std::size_t>(N * C * H * W); }
  std::size_t wn() const { return static_cast<std::size_t>(OC * Cg() * KH * KW); }
  std::size_t yn() const { return static_cast<std::size_t>(N * OC * OH() * OW()); }
  // x_pad[n, c, ih, iw] of output (oh, ow) and tap (kh, kw): the input offset, or -1 in the padding
  std::int64_t at(std::int64_t n, std::int64_t c, std::int64_t oh, std::int64_t ow, std::int64_t kh, std::int64_t kw) const {
    const std::int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
    return (ih < 0 || ih >= H || iw < 0 || iw >= W) ? -1 : ((n * C + c) * H + ih) * W + iw;
  }
  std::size_t wi(std::int64_t o, std::int64_t c, std::int64_t kh, std::int64_t kw) const {
    return static_cast<std::size_t>(((o * Cg() + c) * KH + kh) * KW + kw);
  }
  std::size_t yi(std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow) const {
    return static_cast<std::size_t>(((n * OC + o) * OH() + oh) * OW() + ow);
  }
};

// y: the dot order (numerics §5) per output over its group's (c, kh, kw) (no bias)
Vec fwd(const Geo& g, const Vec& x, const Vec& w) {
  Vec y(g.yn());
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.OC; ++o)
      for (std::int64_t oh = 0; oh < g.OH(); ++oh)
        for (std::int64_t ow = 0; ow < g.OW(); ++ow) {
          DotOrder<float> acc;
          for (std::int64_t c = 0; c < g.Cg(); ++c)
            for (std::int64_t kh = 0; kh < g.KH; ++kh)
              for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                const std::int64_t a = g.at(n, (o / g.OCg()) * g.Cg() + c, oh, ow, kh, kw);
                acc.add(a < 0 ? 0.0f : x[static_cast<std::size_t>(a)], w[g.wi(o, c, kh, kw)]);
              }
          y[g.yi(n, o, oh, ow)] = acc.total();
        }
  return y;
}
// dx: for each (c, kh, kw, oh, ow) in row-major order, the dot order over the group's oc of w dy,
// added into its pixel from +0
Vec input_grad(const Geo& g, const Vec& w, const Vec& dy) {
  Vec dx(g.xn(), 0.0f);
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t c = 0; c < g.C; ++c)
      for (std::int64_t kh = 0; kh < g.KH; ++kh)
        for (std::int64_t kw = 0; kw < g.KW; ++kw)
          for (std::int64_t oh = 0; oh < g.OH(); ++oh)
            for (std::int64_t ow = 0; ow < g.OW(); ++ow) {
              const std::int64_t grp = c / g.Cg();
              DotOrder<float> dot;
              for (std::int64_t o = grp * g.OCg(); o < (grp + 1) * g.OCg(); ++o) dot.add(w[g.wi(o, c % g.Cg(), kh, kw)], dy[g.yi(n, o, oh, ow)]);
              const float acc = dot.total();
              const std::int64_t a = g.at(n, c, oh, ow, kh, kw);
              if (a >= 0) dx[static_cast<std::size_t>(a)] = dx[static_cast<std::size_t>(a)] + acc;
            }
  return dx;
}
// dw: per sample the dot order over (oh, ow) of dy x, then the batch rule over the samples
Vec weight_grad(const Geo& g, const Vec& x, const Vec& dy) {
  const std::size_t WN = g.wn();
  Vec part(static_cast<std::size_t>(g.N) * WN);
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.OC; ++o)
      for (std::int64_t c = 0; c < g.Cg(); ++c)
        for (std::int64_t kh = 0; kh < g.KH; ++kh)
          for (std::int64_t kw = 0; kw < g.KW; ++kw) {
            DotOrder<float> acc;
            for (std::int64_t oh = 0; oh < g.OH(); ++oh)
              for (std::int64_t ow = 0; ow < g.OW(); ++ow) {
                const std::int64_t a = g.at(n, (o / g.OCg()) * g.Cg() + c, oh, ow, kh, kw);
                acc.add(dy[g.yi(n, o, oh, ow)], a < 0 ? 0.0f : x[static_cast<std::size_t>(a)]);
              }
            part[static_cast<std::size_t>(n) * WN + g.wi(o, c, kh, kw)] = acc.total();
          }
  Vec dw(WN);
  kern::ref::table_f32().sum_cols(part.data(), g.N, static_cast<std::int64_t>(WN), dw.data());
  return dw;
}
// db of a gradient [N, C, P]: per sample the row rule, then the batch rule
Vec bias_grad(const Vec& dy, std::int64_t N, std::int64_t C) {
  const std::int64_t P = static_cast<std::int64_t>(dy.size()) / (N * C);
  Vec per(static_cast<std::size_t>(N * C)), db(static_cast<std::size_t>(C));
  kern::ref::table_f32().sum_rows(dy.data(), N * C, P, per.data());
  kern::ref::table_f32().sum_cols(per.data(), N, C, db.data());
  return db;
}
void expect_bits(const Vec& want, const Tensor& got, const std::string& what) {
  const Vec v = got.to_vector<float>();
  ASSERT_EQ(want.size(), v.size()) << what;
  for (std::size_t i = 0; i < v.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(want[i]), std::bit_cast<std::uint32_t>(v[i])) << what << " element " << i << ": " << want[i]
                                                                                          << " vs " << v[i];
}

// + b[channel] per element of [N, C, P], one rounding
Vec add_bias(Vec y, const Vec& b, std::int64_t N, std::int64_t C) {
  const std::size_t P = y.size() / static_cast<std::size_t>(N * C);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = y[i] + b[(i / P) % static_cast<std::size_t>(C)];
  return y;
}

ConvOptions options_of(const Geo& g, bool one_d, std::vector<int> out_pad = {}) {
  ConvOptions o;
  if (one_d) {
    o.stride = {g.sw};
    o.pads = {g.pl, g.pr};
    o.dilation = {g.dw};
  } else {
    o.stride = {g.sh, g.sw};
    o.pads = {g.pt, g.pl, g.pb, g.pr};
    o.dilation = {g.dh, g.dw};
  }
  o.groups = static_cast<int>(g.G);
  o.output_padding = std::move(out_pad);
  return o;
}

Shape xs(const Geo& g, bool one_d) { return one_d ? Shape{g.N, g.C, g.W} : Shape{g.N, g.C, g.H, g.W}; }
Shape ws(const Geo& g, bool one_d) { return one_d ? Shape{g.OC, g.Cg(), g.KW} : Shape{g.OC, g.Cg(), g.KH, g.KW}; }
Shape ys(const Geo& g, bool one_d) { return one_d ? Shape{g.N, g.OC, g.OW()} : Shape{g.N, g.OC, g.OH(), g.OW()}; }

const std::vector<Geo>& geos() {
  static const std::vector<Geo> g = {
      //  N  C  H  W  OC G KH KW sh sw pt pl pb pr dh dw
      {2, 4, 7, 8, 6, 2, 3, 2, 2, 1, 1, 0, 2, 1, 1, 2},   // groups 2, asymmetric pads, per-axis stride and dilation
      {3, 4, 6, 6, 8, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // depthwise, multiplier 2
      // depthwise, multiplier 1: the dw_conv kernels (stride 1; vertical stride 2 and dilation,
      // the input gradient pulled; horizontal stride 2, pushed; 33 samples: two blocks of the batch rule)
      {2, 3, 7, 6, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 4, 9, 7, 4, 4, 3, 3, 2, 1, 1, 2, 1, 0, 2, 1},
      {33, 2, 6, 9, 2, 2, 5, 3, 1, 2, 2, 1, 2, 1, 1, 1},
      {2, 3, 9, 10, 4, 1, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2},  // dilation 2, stride 2, groups 1
      {2, 2, 5, 5, 3, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // the plain case (runs conv2d)
      {1, 6, 1, 13, 6, 3, 1, 4, 1, 2, 0, 3, 0, 1, 1, 2},  // 1-d (H = 1): groups 3, stride 2, dilation 2, pads 3/1
  };
  return g;
}

TEST(ConvGroupedSpec, ConvMatchesTheDirectDefinitionBitwise) {
  RuntimeGuard guard;
  for (const Geo& g : geos()) {
    const bool one_d = g.H == 1 && g.KH == 1;
    const Vec xv = random_vec<float>(g.xn(), 1), wv = random_vec<float>(g.wn(), 2);
    const Vec bv = random_vec<float>(static_cast<std::size_t>(g.OC), 3), dyv = random_vec<float>(g.yn(), 4);
    const Vec y = add_bias(fwd(g, xv, wv), bv, g.N, g.OC), dx = input_grad(g, wv, dyv), dw = weight_grad(g, xv, dyv),
              db = bias_grad(dyv, g.N, g.OC);
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int t : thread_counts()) {
        set_num_threads(t);
        SCOPED_TRACE("conv C=" + std::to_string(g.C) + " G=" + std::to_string(g.G) + " isa=" + isa_name(isa) +
                     " threads=" + std::to_string(t));
        Tensor x = Tensor::from<float>(xv, xs(g, one_d)), w = Tensor::from<float>(wv, ws(g, one_d)), b = Tensor::from<float>(bv, Shape{g.OC});
        for (Tensor* p : {&x, &w, &b}) p->set_requires_grad(true);
        Tensor out = conv(x, w, b, options_of(g, one_d));
        ASSERT_EQ(out.shape(), ys(g, one_d));
        expect_bits(y, out, "y");
        out.backward(Tensor::from<float>(dyv, out.shape()));
        expect_bits(dx, x.grad(), "dx");
        expect_bits(dw, w.grad(), "dw");
        expect_bits(db, b.grad(), "db");
      }
    }
  }
}

// conv_transpose with the geometry g read the other way: its input is the conv's output
// [N, OC, OH, OW] and its output the conv's input [N, C, H, W]; weight [OC, C / G, KH, KW]
// (conv_transpose's [C_in, C_out / groups, ...]). output_padding recovers H and W.
TEST(ConvGroupedSpec, ConvTransposeIsTheAdjointBitwise) {
  RuntimeGuard guard;
  for (const Geo& g : geos()) {
    const bool one_d = g.H == 1 && g.KH == 1;
    const int oph = static_cast<int>((g.H + g.pt + g.pb - (g.dh * (g.KH - 1) + 1)) % g.sh);
    const int opw = static_cast<int>((g.W + g.pl + g.pr - (g.dw * (g.KW - 1) + 1)) % g.sw);
    if (oph >= std::max(g.sh, g.dh) || opw >= std::max(g.sw, g.dw)) continue;
    const Vec tx = random_vec<float>(g.yn(), 5), wv = random_vec<float>(g.wn(), 6);
    const Vec bv = random_vec<float>(static_cast<std::size_t>(g.C), 7), gv = random_vec<float>(g.xn(), 8);
    const Vec y = add_bias(input_grad(g, wv, tx), bv, g.N, g.C), dx = fwd(g, gv, wv), dw = weight_grad(g, gv, tx),
              db = bias_grad(gv, g.N, g.C);
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int t : thread_counts()) {
        set_num_threads(t);
        SCOPED_TRACE("conv_transpose C=" + std::to_string(g.C) + " G=" + std::to_string(g.G) + " isa=" + isa_name(isa) +
                     " threads=" + std::to_string(t));
        Tensor x = Tensor::from<float>(tx, ys(g, one_d)), w = Tensor::from<float>(wv, ws(g, one_d)), b = Tensor::from<float>(bv, Shape{g.C});
        for (Tensor* p : {&x, &w, &b}) p->set_requires_grad(true);
        Tensor out = conv_transpose(x, w, b, options_of(g, one_d, one_d ? std::vector<int>{opw} : std::vector<int>{oph, opw}));
        ASSERT_EQ(out.shape(), xs(g, one_d));
        expect_bits(y, out, "y");
        out.backward(Tensor::from<float>(gv, out.shape()));
        expect_bits(dx, x.grad(), "dx");
        expect_bits(dw, w.grad(), "dw");
        expect_bits(db, b.grad(), "db");
      }
    }
  }
}

ConvOptions co(std::vector<int> s, std::vector<int> p, std::vector<int> d, int groups, std::vector<int> op = {}) {
  ConvOptions o;
  o.stride = std::move(s);
  o.pads = std::move(p);
  o.dilation = std::move(d);
  o.groups = groups;
  o.output_padding = std::move(op);
  return o;
}

TEST(ConvGroupedOps, GradientsAndDeterminism) {
  std::vector<OpCase> cases = {
      {"conv(groups=2,asym pads,dil)", {{2, 4, 6, 7}, {4, 2, 3, 2}, {4}},
       [](V x) { return conv(x[0], x[1], x[2], co({2, 1}, {1, 0, 2, 1}, {1, 2}, 2)); }},
      {"conv(depthwise)", {{2, 3, 5, 5}, {6, 1, 3, 3}}, [](V x) { return conv(x[0], x[1], Tensor(), co({1, 1}, {1, 1, 1, 1}, {}, 3)); }},
      {"conv(depthwise, multiplier 1)", {{2, 3, 5, 6}, {3, 1, 3, 3}, {3}},
       [](V x) { return conv(x[0], x[1], x[2], co({2, 1}, {1, 1, 0, 1}, {1, 1}, 3)); }},
      {"conv_transpose(depthwise)", {{2, 3, 4, 4}, {3, 1, 3, 3}}, [](V x) { return conv_transpose(x[0], x[1], Tensor(), co({1, 1}, {1, 1, 1, 1}, {}, 3)); }},
      {"conv(1d,stride=2,dil=2)", {{2, 4, 11}, {3, 4, 3}, {3}}, [](V x) { return conv(x[0], x[1], x[2], co({2}, {2, 1}, {2}, 1)); }},
      {"conv_transpose(stride=2,outpad=1)", {{2, 3, 4, 3}, {3, 2, 3, 3}, {2}},
       [](V x) { return conv_transpose(x[0], x[1], x[2], co({2, 2}, {1, 1, 1, 1}, {}, 1, {1, 1})); }},
      {"conv_transpose(groups=2,dil,asym)", {{2, 4, 3, 4}, {4, 1, 2, 3}},
       [](V x) { return conv_transpose(x[0], x[1], Tensor(), co({1, 2}, {0, 1, 1, 0}, {2, 1}, 2)); }},
      {"conv_transpose(1d)", {{2, 2, 5}, {2, 3, 4}, {3}}, [](V x) { return conv_transpose(x[0], x[1], x[2], co({3}, {1, 2}, {1}, 1)); }},
  };
  run_all_modes(cases);
}

TEST(ConvGroupedOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"conv(groups=2,asym pads,dil)", {{16, 4, 12, 12}, {6, 2, 3, 3}, {6}},
       [](V x) { return conv(x[0], x[1], x[2], co({2, 1}, {1, 0, 2, 1}, {1, 2}, 2)); }},
      {"conv_transpose(stride=2)", {{16, 4, 6, 6}, {4, 3, 3, 3}, {3}},
       [](V x) { return conv_transpose(x[0], x[1], x[2], co({2, 2}, {1, 1, 1, 1}, {}, 1, {1, 1})); }},
      {"conv(depthwise)", {{16, 5, 11, 19}, {5, 1, 3, 3}, {5}}, [](V x) { return conv(x[0], x[1], x[2], co({1, 1}, {1, 1, 1, 1}, {}, 5)); }},
  };
  check_split_determinism(cases);
}

// T5: the weight and bias gradients of 64 samples are those of two micro-batches of 32 added
// (the batch rule's tree over two blocks), for conv and conv_transpose alike
TEST(ConvGroupedOps, MicroBatchesCombineToTheWholeBatch) {
  RuntimeGuard guard;
  const ConvOptions o = co({2, 1}, {1, 0, 2, 1}, {1, 2}, 2, {});
  const ConvOptions t = co({2, 2}, {1, 1, 1, 1}, {}, 2, {1, 1});
  for (bool transpose : {false, true}) {
    const Shape xs = transpose ? Shape{64, 4, 5, 4} : Shape{64, 4, 9, 8};
    const Shape ws = transpose ? Shape{4, 3, 3, 3} : Shape{6, 2, 3, 2};
    const std::int64_t oc = 6;  // the output channels of both
    const auto xv = random_vec<float>(static_cast<std::size_t>(xs.numel()), 11), wv = random_vec<float>(static_cast<std::size_t>(ws.numel()), 12);
    auto grads = [&](std::int64_t n0, std::int64_t n1) {
      Tensor x = slice(Tensor::from<float>(xv, xs), 0, n0, n1).contiguous_copy();
      Tensor w = Tensor::from<float>(wv, ws), b = Tensor::zeros(Shape{oc});
      w.set_requires_grad(true);
      b.set_requires_grad(true);
      Tensor y = transpose ? conv_transpose(x, w, b, t) : conv(x, w, b, o);
      y.backward(Tensor::ones(y.shape()));
      return std::make_pair(w.grad(), b.grad());
    };
    const auto whole = grads(0, 64), a = grads(0, 32), c = grads(32, 64);
    const auto dw = (a.first + c.first).to_vector<float>(), db = (a.second + c.second).to_vector<float>();
    EXPECT_EQ(whole.first.to_vector<float>(), dw) << (transpose ? "conv_transpose" : "conv") << " dw";
    EXPECT_EQ(whole.second.to_vector<float>(), db) << (transpose ? "conv_transpose" : "conv") << " db";
  }
}

// T5 for the depthwise kernels (one channel per group): 64 samples = two micro-batches of 32
TEST(ConvGroupedOps, DepthwiseMicroBatchesCombineToTheWholeBatch) {
  RuntimeGuard guard;
  const Shape xs{64, 4, 9, 8}, ws{4, 1, 3, 3};
  const auto xv = random_vec<float>(static_cast<std::size_t>(xs.numel()), 13), wv = random_vec<float>(static_cast<std::size_t>(ws.numel()), 14);
  auto grad = [&](std::int64_t n0, std::int64_t n1) {
    Tensor x = slice(Tensor::from<float>(xv, xs), 0, n0, n1).contiguous_copy();
    Tensor w = Tensor::from<float>(wv, ws);
    w.set_requires_grad(true);
    Tensor y = conv(x, w, Tensor(), co({1, 1}, {1, 1, 1, 1}, {}, 4));
    y.backward(Tensor::ones(y.shape()));
    return w.grad();
  };
  EXPECT_EQ(grad(0, 64).to_vector<float>(), (grad(0, 32) + grad(32, 64)).to_vector<float>());
}

TEST(ConvGroupedOps, Errors) {
  EXPECT_THROW(conv(Tensor::zeros({1, 4, 5, 5}), Tensor::zeros({3, 2, 3, 3}), Tensor(), co({}, {}, {}, 2)), Error);  // 3 % 2
  EXPECT_THROW(conv(Tensor::zeros({1, 4, 5, 5}), Tensor::zeros({4, 4, 3, 3}), Tensor(), co({}, {}, {}, 2)), Error);  // C/g = 2
  EXPECT_THROW(conv(Tensor::zeros({1, 1, 5, 5}), Tensor::zeros({1, 1, 3, 3}), Tensor(), co({}, {}, {3, 3}, 1)), Error);  // span 7 > 5
  EXPECT_THROW(conv(Tensor::zeros({1, 1, 5, 5}), Tensor::zeros({1, 1, 3, 3}), Tensor(), co({1}, {}, {}, 1)), Error);
  EXPECT_THROW(conv(Tensor::zeros({1, 1, 5, 5}), Tensor::zeros({1, 1, 3, 3}), Tensor(), co({}, {}, {}, 1, {1, 1})), Error);
  EXPECT_THROW(conv_transpose(Tensor::zeros({1, 2, 3, 3}), Tensor::zeros({2, 1, 3, 3}), Tensor(), co({2, 2}, {}, {}, 1, {2, 2})), Error);
  EXPECT_THROW(conv_transpose(Tensor::zeros({1, 3, 3, 3}), Tensor::zeros({2, 1, 3, 3}), Tensor(), co({}, {}, {}, 1)), Error);
}

}  // namespace
}  // namespace bitgrad::test
