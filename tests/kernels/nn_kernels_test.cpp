// Layer norm, pooling, im2col and the optimizer updates: every fast path equals the scalar
// reference bit for bit on odd shapes at threads 1..8; the reference equals the documented
// orders.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "support/kernel_check.hpp"

namespace bitgrad::test {
namespace {

template <class T>
void append(std::vector<T>& to, const std::vector<T>& v) {
  to.insert(to.end(), v.begin(), v.end());
}

// ---- layer norm -------------------------------------------------------------------------------
template <class T>
void layer_norm_cases() {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1},  {3, 5},    {7, 16},   {5, 17},  {4, 33},  {2, 1023},
                                                          {3, 1025}, {1, 3000}, {129, 10}, {300, 64}, {0, 7}};
  for (auto [R, D] : shapes) {
    const std::size_t n = static_cast<std::size_t>(R * D);
    auto x = random_vec<T>(n, 21, -3, 5, true);
    auto g = random_vec<T>(n, 22, -2, 2, true);
    auto h = random_vec<T>(n, 23, -3, 3, true);
    auto gamma = random_vec<T>(static_cast<std::size_t>(D), 24, -2, 2, true);
    auto beta = random_vec<T>(static_cast<std::size_t>(D), 25);
    auto rstd = random_vec<T>(static_cast<std::size_t>(R), 26, 0.1, 4);
    for (int affine = 0; affine < 3; ++affine) {  // none, gamma, gamma and beta
      const T* pg = affine >= 1 ? gamma.data() : nullptr;
      const T* pb = affine >= 2 ? beta.data() : nullptr;
      std::ostringstream sh;
      sh << "(" << tname(T{}) << ",R=" << R << ",D=" << D << ",affine=" << affine << ")";
      expect_fast_equals_reference<T>("layer_norm_rows" + sh.str(), [&](const kern::Table<T>& tb) {
        std::vector<T> y(n), mean(static_cast<std::size_t>(R)), rs(static_cast<std::size_t>(R));
        tb.layer_norm_rows(x.data(), pg, pb, R, D, T(1e-5), y.data(), mean.data(), rs.data());
        append(y, mean);
        append(y, rs);
        return y;
      });
      expect_fast_equals_reference<T>("layer_norm_grad_rows" + sh.str(), [&](const kern::Table<T>& tb) {
        std::vector<T> dx(n);
        tb.layer_norm_grad_rows(g.data(), h.data(), pg, rstd.data(), R, D, dx.data());
        return dx;
      });
    }
  }
}

// One LSTM step (numerics §34): odd hidden sizes (a partial vector), strided rows of xz and h,
// a wide range (every branch of sigmoid and tanh, their fallbacks) and specials.
template <class T>
void lstm_gates_cases() {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {3, 5}, {7, 17}, {33, 8}, {64, 67}};
  for (auto [N, H] : shapes) {
    const std::int64_t ldx = 4 * H + 3, ldh = H + 2;
    const auto xz = random_vec<T>(static_cast<std::size_t>(N * ldx), 81, -12, 12, true);
    const auto hh = random_vec<T>(static_cast<std::size_t>(N * 4 * H), 82, -12, 12, true);
    const auto c = random_vec<T>(static_cast<std::size_t>(N * H), 83, -3, 3, true);
    const auto b = random_vec<T>(static_cast<std::size_t>(4 * H), 84, -4, 4, true);
    std::ostringstream sh;
    sh << "(N=" << N << ",H=" << H << "," << tname(T{}) << ")";
    expect_fast_equals_reference<T>("lstm_gates" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> out(static_cast<std::size_t>(N * H + N * ldh + 5 * N * H), T(7));
      tb.lstm_gates(xz.data(), ldx, nullptr, hh.data(), c.data(), N, H, out.data(), out.data() + N * H, ldh, out.data() + N * H + N * ldh);
      std::vector<T> no_keep(static_cast<std::size_t>(N * H + N * ldh), T(7));
      tb.lstm_gates(xz.data(), ldx, nullptr, hh.data(), c.data(), N, H, no_keep.data(), no_keep.data() + N * H, ldh, nullptr);
      EXPECT_TRUE(std::equal(no_keep.begin(), no_keep.end(), out.begin(), [](T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0; }));
      // with b: the bits of adding b to xz first (an add op's rounding, NaN canonical)
      std::vector<T> xzb(xz), with_b(static_cast<std::size_t>(N * H + N * ldh), T(7));
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t q = 0; q < 4 * H; ++q) xzb[n * ldx + q] = kern::canon(xz[n * ldx + q] + b[q]);
      tb.lstm_gates(xzb.data(), ldx, nullptr, hh.data(), c.data(), N, H, no_keep.data(), no_keep.data() + N * H, ldh, nullptr);
      tb.lstm_gates(xz.data(), ldx, b.data(), hh.data(), c.data(), N, H, with_b.data(), with_b.data() + N * H, ldh, nullptr);
      EXPECT_TRUE(std::equal(no_keep.begin(), no_keep.end(), with_b.begin(), [](T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0; }));
      out.insert(out.end(), with_b.begin(), with_b.end());
      return out;
    });
  }
}
TEST(NnKernels, LstmGatesF32) { lstm_gates_cases<float>(); }

// Dropout's masks: the reference's element by element (each word from rng::Stream), from any
// first word and for any count, the counter's high word changing inside the run included (block
// 2^32 at u32 word 2^34, u64 word 2^33); f32 words for f64 tensors too (an f32 run's shadow).
template <class T>
void dropout_mask_cases(bool f32_words) {
  const rng::Stream streams[] = {rng::Stream(9, "dropout"), rng::Stream(0xFFFFFFFF00000001ULL, "mask").sub(3)};
  const std::uint64_t cross = f32_words ? (1ULL << 34) : (1ULL << 33);
  for (const rng::Stream& s : streams)
    for (std::uint64_t first : {std::uint64_t(0), std::uint64_t(1), std::uint64_t(3), std::uint64_t(5), cross - 37, cross - 5})
      for (std::int64_t n : {0, 1, 7, 64, 65, 130, 1000})
        for (double p : {0.1, 0.5, 0.9}) {
          std::ostringstream name;
          name << "dropout_mask (" << tname(T{}) << (f32_words ? ", f32 words" : "") << ", first " << first << ", n " << n << ", p " << p << ")";
          expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
            std::vector<T> m(static_cast<std::size_t>(n) + 1, T(7));
            tb.dropout_mask(s, first, n, p, f32_words, static_cast<T>(1.0 / (1.0 - p)), m.data());
            EXPECT_EQ(m.back(), T(7));  // nothing written past n
            return m;
          });
        }
}
TEST(NnKernels, DropoutMaskF32) { dropout_mask_cases<float>(true); }
TEST(NnKernels, DropoutMaskF64) {
  dropout_mask_cases<double>(false);
  dropout_mask_cases<double>(true);
}

// The reference's mask is the definition: element k keeps where the uniform of the stream's word k is >= p
TEST(NnKernels, DropoutMaskReferenceIsTheStreamsUniforms) {
  const rng::Stream s(4, "dropout");
  std::vector<float> m(100);
  kern::table<float>(Isa::scalar).dropout_mask(s, 10, 100, 0.3, true, 2.0f, m.data());
  for (std::int64_t k = 0; k < 100; ++k) EXPECT_EQ(m[static_cast<std::size_t>(k)], s.uniform_f32(10 + static_cast<std::uint64_t>(k)) >= 0.3f ? 2.0f : 0.0f);
  std::vector<double> d(100);
  kern::table<double>(Isa::scalar).dropout_mask(s, 10, 100, 0.3, false, 2.0, d.data());
  for (std::int64_t k = 0; k < 100; ++k) EXPECT_EQ(d[static_cast<std::size_t>(k)], s.uniform_f64(10 + static_cast<std::uint64_t>(k)) >= 0.3 ? 2.0 : 0.0);
}
TEST(NnKernels, LstmGatesF64) { lstm_gates_cases<double>(); }

// The step's backward: gates' gradients into rows ldz apart (the layer's [N, T, 4H] layout),
// odd H (a partial vector), kept values with specials and signed zeros in the seeds.
template <class T>
void lstm_grad_cases() {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {3, 5}, {7, 17}, {33, 8}, {64, 67}};
  for (auto [N, H] : shapes) {
    const std::int64_t ldz = 3 * 4 * H + 1;
    const auto keep = random_vec<T>(static_cast<std::size_t>(N * 5 * H), 91, -1, 1, true);
    const auto c = random_vec<T>(static_cast<std::size_t>(N * H), 92, -3, 3, true);
    auto g = random_vec<T>(static_cast<std::size_t>(N * H), 93, -2, 2, true);
    for (std::size_t i = 0; i < g.size(); i += 5) g[i] = i % 2 ? T(-0.0) : T(0.0);
    std::ostringstream sh;
    sh << "(N=" << N << ",H=" << H << "," << tname(T{}) << ")";
    expect_fast_equals_reference<T>("lstm_cell_grad/lstm_hidden_grad" + sh.str(), [&](const kern::Table<T>& tb) {
      const std::size_t layout = static_cast<std::size_t>(N * ldz), state = static_cast<std::size_t>(N * H);
      std::vector<T> out(layout + 2 * state, T(7));
      tb.lstm_hidden_grad(keep.data(), g.data(), N, H, out.data() + 3 * H, ldz, out.data() + layout);
      tb.lstm_cell_grad(keep.data(), c.data(), g.data(), N, H, out.data(), ldz, out.data() + layout + state);
      std::vector<T> no_prev(layout, T(7));
      tb.lstm_cell_grad(keep.data(), c.data(), g.data(), N, H, no_prev.data(), ldz, nullptr);
      for (std::int64_t r = 0; r < N; ++r)  // the same i, f, g quarters without dL/dc
        EXPECT_TRUE(std::equal(no_prev.begin() + r * ldz, no_prev.begin() + r * ldz + 3 * H, out.begin() + r * ldz,
                               [](T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0; }));
      return out;
    });
  }
}
// One GRU step and its backward: odd H, strided rows of xz, h and the output, specials and
// signed zeros (the seeds' and h - n's).
template <class T>
void gru_cases() {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {3, 5}, {7, 17}, {33, 8}, {64, 67}};
  for (auto [N, H] : shapes) {
    const std::int64_t ldx = 3 * H + 3, ldh = H + 1, ldo = H + 2;
    const auto xz = random_vec<T>(static_cast<std::size_t>(N * ldx), 101, -12, 12, true);
    const auto hh = random_vec<T>(static_cast<std::size_t>(N * 3 * H), 102, -12, 12, true);
    auto h = random_vec<T>(static_cast<std::size_t>(N * ldh), 103, -1, 1, true);
    auto g = random_vec<T>(static_cast<std::size_t>(N * H), 104, -2, 2, true);
    for (std::size_t i = 0; i < g.size(); i += 5) g[i] = i % 2 ? T(-0.0) : T(0.0);
    std::ostringstream sh;
    sh << "(N=" << N << ",H=" << H << "," << tname(T{}) << ")";
    expect_fast_equals_reference<T>("gru_gates/gru_grad" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> out(static_cast<std::size_t>(N * ldo + 3 * N * H), T(7));
      tb.gru_gates(xz.data(), ldx, hh.data(), h.data(), ldh, N, H, out.data(), ldo, out.data() + N * ldo);
      std::vector<T> no_keep(static_cast<std::size_t>(N * ldo), T(7));
      tb.gru_gates(xz.data(), ldx, hh.data(), h.data(), ldh, N, H, no_keep.data(), ldo, nullptr);
      EXPECT_TRUE(std::equal(no_keep.begin(), no_keep.end(), out.begin(), [](T a, T b) { return std::memcmp(&a, &b, sizeof a) == 0; }));
      // the backward from the kept gates, h contiguous; keep's n equal to h in places (h - n = +0)
      std::vector<T> keep(out.begin() + N * ldo, out.end()), hc(static_cast<std::size_t>(N * H));
      for (std::int64_t r = 0; r < N; ++r)
        for (std::int64_t j = 0; j < H; ++j) hc[static_cast<std::size_t>(r * H + j)] = j % 4 == 1 ? keep[static_cast<std::size_t>(r * 3 * H + 2 * H + j)] : h[static_cast<std::size_t>(r * ldh + j)];
      std::vector<T> grads(static_cast<std::size_t>(7 * N * H), T(7));
      tb.gru_grad(keep.data(), hh.data(), hc.data(), g.data(), N, H, grads.data(), grads.data() + 3 * N * H, grads.data() + 6 * N * H);
      out.insert(out.end(), grads.begin(), grads.end());
      return out;
    });
  }
}
TEST(NnKernels, GruF32) { gru_cases<float>(); }
TEST(NnKernels, GruF64) { gru_cases<double>(); }

TEST(NnKernels, LstmGradF32) { lstm_grad_cases<float>(); }
TEST(NnKernels, LstmGradF64) { lstm_grad_cases<double>(); }

// Depthwise convolution: the fast paths equal the reference, and the reference is what the
// grouped conv's GEMM path computes for one channel per group (per sample and channel: im2col,
// the GEMM, col2im; the weight gradient's products stored and summed by the batch rule):
// strides 1 and 2, pads, dilation, kernels 3x3, 5x5, 1x3, batches across blocks of 32.
template <class T>
void dw_cases() {
  struct Case {
    std::int64_t N, C, H, W, KH, KW, sh, sw, pt, pl, pb, pr, dh, dw;
  };
  const Case cases[] = {{2, 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   {33, 2, 6, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
                        {1, 4, 11, 21, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1}, {3, 2, 8, 8, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
                        {2, 3, 1, 19, 1, 3, 1, 2, 0, 1, 0, 0, 1, 1},  {65, 1, 4, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
                        {2, 2, 40, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}};
  for (const Case& c : cases) {
    kern::DwShape s{c.N, c.C, c.H, c.W, c.KH, c.KW, 0, 0, c.sh, c.sw, c.pt, c.pl, c.dh, c.dw};
    s.OH = (c.H + c.pt + c.pb - c.dh * (c.KH - 1) - 1) / c.sh + 1;
    s.OW = (c.W + c.pl + c.pr - c.dw * (c.KW - 1) - 1) / c.sw + 1;
    const std::int64_t X = c.H * c.W, P = s.OH * s.OW, KK = c.KH * c.KW;
    const auto x = random_vec<T>(static_cast<std::size_t>(c.N * c.C * X), 91, -2, 2, true);
    const auto w = random_vec<T>(static_cast<std::size_t>(c.C * KK), 92, -1, 1, true);
    const auto dy = random_vec<T>(static_cast<std::size_t>(c.N * c.C * P), 93, -1, 1, true);
    std::ostringstream sh;
    sh << "(N=" << c.N << ",C=" << c.C << "," << c.H << "x" << c.W << ",k=" << c.KH << "x" << c.KW << ",s=" << c.sh << "," << c.sw
       << ",d=" << c.dh << "," << tname(T{}) << ")";
    auto run = [&](const kern::Table<T>& tb) {
      std::vector<T> out(static_cast<std::size_t>(c.N * c.C * (P + X) + c.C * KK));
      tb.dw_conv(x.data(), w.data(), s, out.data());
      tb.dw_conv_dx(w.data(), dy.data(), s, out.data() + c.N * c.C * P);
      tb.dw_conv_dw(x.data(), dy.data(), s, out.data() + c.N * c.C * (P + X));
      return out;
    };
    expect_fast_equals_reference<T>("depthwise" + sh.str(), run);
    // the GEMM path's definition, on the scalar reference
    ExecContext ref(1, Isa::scalar);
    ExecScope scope(ref);
    const kern::Table<T>& tb = kern::table<T>(Isa::scalar);
    std::vector<T> want(static_cast<std::size_t>(c.N * c.C * (P + X) + c.C * KK));
    std::vector<T> cols(static_cast<std::size_t>(KK * P)), part(static_cast<std::size_t>(c.N * c.C * KK));
    auto im2col = [&](const T* plane) {
      for (std::int64_t kh = 0; kh < c.KH; ++kh)
        for (std::int64_t kw = 0; kw < c.KW; ++kw)
          for (std::int64_t oh = 0; oh < s.OH; ++oh)
            for (std::int64_t ow = 0; ow < s.OW; ++ow) {
              const std::int64_t ih = oh * c.sh - c.pt + kh * c.dh, iw = ow * c.sw - c.pl + kw * c.dw;
              const bool in = ih >= 0 && ih < c.H && iw >= 0 && iw < c.W;
              cols[static_cast<std::size_t>((kh * c.KW + kw) * P + oh * s.OW + ow)] = in ? plane[ih * c.W + iw] : T(0);
            }
    };
    auto gemm = [&](std::int64_t M, std::int64_t N, std::int64_t K, const T* A, std::int64_t rsa, std::int64_t csa, const T* B,
                    std::int64_t rsb, std::int64_t csb, T* C) {
      kern::GemmArgs<T> g;
      g.M = M, g.N = N, g.K = K, g.A = A, g.rsa = rsa, g.csa = csa, g.B = B, g.rsb = rsb, g.csb = csb, g.C = C, g.ldc = N;
      tb.gemm(g);
    };
    for (std::int64_t n = 0; n < c.N; ++n)
      for (std::int64_t ch = 0; ch < c.C; ++ch) {
        const std::int64_t q = n * c.C + ch;
        im2col(x.data() + q * X);
        gemm(1, P, KK, w.data() + ch * KK, KK, 1, cols.data(), P, 1, want.data() + q * P);
        gemm(1, KK, P, dy.data() + q * P, P, 1, cols.data(), 1, P, part.data() + (n * c.C + ch) * KK);
        std::vector<T> dcols(static_cast<std::size_t>(KK * P));
        gemm(KK, P, 1, w.data() + ch * KK, 1, 1, dy.data() + q * P, P, 1, dcols.data());
        T* dx = want.data() + c.N * c.C * P + q * X;
        std::fill(dx, dx + X, T(0));
        for (std::int64_t kh = 0; kh < c.KH; ++kh)
          for (std::int64_t kw = 0; kw < c.KW; ++kw)
            for (std::int64_t oh = 0; oh < s.OH; ++oh)
              for (std::int64_t ow = 0; ow < s.OW; ++ow) {
                const std::int64_t ih = oh * c.sh - c.pt + kh * c.dh, iw = ow * c.sw - c.pl + kw * c.dw;
                if (ih >= 0 && ih < c.H && iw >= 0 && iw < c.W)
                  dx[ih * c.W + iw] = kern::canon(dx[ih * c.W + iw] + dcols[static_cast<std::size_t>((kh * c.KW + kw) * P + oh * s.OW + ow)]);
              }
      }
    tb.sum_cols(part.data(), c.N, c.C * KK, want.data() + c.N * c.C * (P + X));
    EXPECT_TRUE(bitwise_equal(want, run(tb))) << "depthwise" << sh.str() << ": the reference is not the GEMM path's";
  }
}
TEST(NnKernels, DepthwiseConvF32) { dw_cases<float>(); }
TEST(NnKernels, DepthwiseConvF64) { dw_cases<double>(); }

TEST(NnKernels, LayerNormF32) { layer_norm_cases<float>(); }
TEST(NnKernels, LayerNormF64) { layer_norm_cases<double>(); }

// Lanes j of the row rule take j, j+16, j+32; fold h = 8, 4, 2, 1 (numerics.md §4, §15).
float lanes40(const std::vector<float>& t) {
  float l[16] = {};
  for (int i = 0; i < 40; ++i) l[i % 16] = l[i % 16] + t[static_cast<std::size_t>(i)];
  for (int h = 8; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) l[j] = l[j] + l[j + h];
  return l[0];
}

TEST(NnKernels, LayerNormReferenceIsTheDocumentedOrder) {
  auto x = random_vec<float>(40, 31, -3, 5);
  auto gamma = random_vec<float>(40, 32), beta = random_vec<float>(40, 33), g = random_vec<float>(40, 34);
  const float m = lanes40(x) / 40.0f;
  float sq[16] = {};
  for (int i = 0; i < 40; ++i) {
    const float d = x[static_cast<std::size_t>(i)] - m;
    sq[i % 16] = std::fma(d, d, sq[i % 16]);
  }
  for (int h = 8; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) sq[j] = sq[j] + sq[j + h];
  const float rs = 1.0f / std::sqrt(sq[0] / 40.0f + 1e-5f);
  std::vector<float> y(40), mean(1), rstd(1), dx(40);
  const auto& ref = kern::table<float>(Isa::scalar);
  ref.layer_norm_rows(x.data(), gamma.data(), beta.data(), 1, 40, 1e-5f, y.data(), mean.data(), rstd.data());
  EXPECT_EQ(std::bit_cast<std::uint32_t>(m), std::bit_cast<std::uint32_t>(mean[0]));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(rs), std::bit_cast<std::uint32_t>(rstd[0]));
  for (std::size_t j = 0; j < 40; ++j)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(((x[j] - m) * rs) * gamma[j] + beta[j]), std::bit_cast<std::uint32_t>(y[j])) << j;
  // backward: a = rowrule(gx) / D, b = rowrule(fma(gx, xhat)) / D
  std::vector<float> gx(40), xh(40);
  for (std::size_t j = 0; j < 40; ++j) gx[j] = g[j] * gamma[j], xh[j] = (x[j] - m) * rs;
  const float a = lanes40(gx) / 40.0f;
  float dl[16] = {};
  for (int i = 0; i < 40; ++i) dl[i % 16] = std::fma(gx[static_cast<std::size_t>(i)], xh[static_cast<std::size_t>(i)], dl[i % 16]);
  for (int h = 8; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) dl[j] = dl[j] + dl[j + h];
  const float b = dl[0] / 40.0f;
  ref.layer_norm_grad_rows(g.data(), xh.data(), gamma.data(), &rs, 1, 40, dx.data());
  for (std::size_t j = 0; j < 40; ++j)
    EXPECT_EQ(std::bit_cast<std::uint32_t>(rs * ((gx[j] - a) - xh[j] * b)), std::bit_cast<std::uint32_t>(dx[j])) << j;
}

// ---- pooling ----------------------------------------------------------------------------------
// planes, H, W, k, s
const std::int64_t kPools[][5] = {{3, 4, 4, 2, 2}, {5, 7, 9, 2, 2},  {2, 9, 7, 3, 2},  {4, 6, 6, 3, 1},    {1, 5, 5, 5, 1},
                                  {7, 10, 11, 2, 1}, {2, 8, 8, 1, 1}, {3, 12, 13, 4, 3}, {64, 28, 28, 2, 2}, {40, 9, 9, 3, 3},
                                  {3, 6, 41, 2, 2}, {2, 5, 70, 2, 2}};

// Few distinct values (ties), signed zeros and NaNs: the cases where "first maximum" matters.
template <class T>
std::vector<T> pool_input(std::size_t n, std::uint64_t seed) {
  auto u = random_vec<double>(n, seed, 0, 1);
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int q = static_cast<int>(u[i] * 64);
    v[i] = q < 2 ? std::numeric_limits<T>::quiet_NaN() : q < 8 ? T(-0.0) : q < 14 ? T(0) : static_cast<T>(q % 5) - T(1);
  }
  return v;
}

template <class T>
void pool_cases() {
  for (const auto& c : kPools) {
    const kern::PoolShape s{c[0], c[1], c[2], c[3], c[4], (c[1] - c[3]) / c[4] + 1, (c[2] - c[3]) / c[4] + 1};
    const std::size_t nx = static_cast<std::size_t>(s.planes * s.H * s.W), ny = static_cast<std::size_t>(s.planes * s.OH * s.OW);
    const auto xq = pool_input<T>(nx, 41);
    const auto x = random_vec<T>(nx, 42, -2, 2, true);
    const auto g = random_vec<T>(ny, 43, -2, 2, true);
    std::ostringstream sh;
    sh << "(" << tname(T{}) << ",planes=" << s.planes << ",H=" << s.H << ",W=" << s.W << ",k=" << s.k << ",s=" << s.s << ")";
    // the argmax of the reference drives max_pool_grad on every path
    std::vector<std::int64_t> idx(ny);
    std::vector<T> ytmp(ny);
    kern::table<T>(Isa::scalar).max_pool(xq.data(), s, ytmp.data(), idx.data());
    expect_fast_equals_reference<T>("max_pool" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> y(ny);
      std::vector<std::int64_t> ix(ny, -1);
      tb.max_pool(xq.data(), s, y.data(), ix.data());
      for (std::int64_t i : ix) y.push_back(static_cast<T>(i));
      return y;
    });
    expect_fast_equals_reference<T>("max_pool_grad" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> dx(nx, T(-7));
      tb.max_pool_grad(g.data(), idx.data(), s, dx.data());
      return dx;
    });
    expect_fast_equals_reference<T>("avg_pool" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> y(ny);
      tb.avg_pool(x.data(), s, y.data());
      return y;
    });
    expect_fast_equals_reference<T>("avg_pool_grad" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> dx(nx, T(-7));
      tb.avg_pool_grad(g.data(), s, dx.data());
      return dx;
    });
  }
}

TEST(NnKernels, PoolingF32) { pool_cases<float>(); }
TEST(NnKernels, PoolingF64) { pool_cases<double>(); }

TEST(NnKernels, PoolingReferenceIsTheDocumentedOrder) {
  // one 5x5 plane, 3x3 windows at stride 1: the average sums rows of the window left to right
  const kern::PoolShape s{1, 5, 5, 3, 1, 3, 3};
  auto x = random_vec<float>(25, 51, -1, 1);
  auto g = random_vec<float>(9, 52, -1, 1);
  std::vector<float> y(9), dx(25);
  const auto& ref = kern::table<float>(Isa::scalar);
  ref.avg_pool(x.data(), s, y.data());
  ref.avg_pool_grad(g.data(), s, dx.data());
  for (int oh = 0; oh < 3; ++oh)
    for (int ow = 0; ow < 3; ++ow) {
      float acc = 0;
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw) acc = acc + x[static_cast<std::size_t>((oh + kh) * 5 + ow + kw)];
      EXPECT_EQ(std::bit_cast<std::uint32_t>(acc / 9.0f), std::bit_cast<std::uint32_t>(y[static_cast<std::size_t>(oh * 3 + ow)]));
    }
  // the gradient of a pixel: its windows in row-major order, from +0
  for (int ih = 0; ih < 5; ++ih)
    for (int iw = 0; iw < 5; ++iw) {
      float acc = 0;
      for (int oh = 0; oh < 3; ++oh)
        for (int ow = 0; ow < 3; ++ow)
          if (ih - oh >= 0 && ih - oh < 3 && iw - ow >= 0 && iw - ow < 3) acc = acc + g[static_cast<std::size_t>(oh * 3 + ow)] / 9.0f;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(acc), std::bit_cast<std::uint32_t>(dx[static_cast<std::size_t>(ih * 5 + iw)]));
    }
}

// ---- im2col -------------------------------------------------------------------------------------
// C, H, W, KH, KW, s, p
const std::int64_t kConvs[][7] = {{1, 5, 5, 3, 3, 1, 0}, {3, 7, 9, 3, 3, 1, 1}, {2, 8, 7, 5, 5, 1, 2},   {4, 9, 11, 3, 2, 2, 1},
                                  {2, 6, 6, 4, 4, 3, 3}, {1, 28, 28, 5, 5, 1, 2}, {6, 14, 14, 5, 5, 1, 0}, {3, 5, 4, 1, 1, 1, 0},
                                  {2, 5, 5, 3, 3, 2, 4},   {2, 9, 13, 2, 10, 1, 1}, {3, 8, 20, 3, 9, 2, 0},
                                  // stride 2 over rows of more than one vector of outputs (23, 18, 14 wide)
                                  {2, 37, 45, 3, 3, 2, 1}, {3, 32, 35, 7, 7, 2, 3}, {3, 28, 28, 1, 1, 2, 0}};

kern::ConvShape conv_shape(const std::int64_t* c) {
  return {c[0], c[1], c[2], c[3], c[4], (c[1] + 2 * c[6] - c[3]) / c[5] + 1, (c[2] + 2 * c[6] - c[4]) / c[5] + 1, c[5], c[6]};
}

template <class T>
void im2col_cases() {
  for (const auto& c : kConvs) {
    const kern::ConvShape s = conv_shape(c);
    const std::size_t nx = static_cast<std::size_t>(s.C * s.H * s.W), nc = static_cast<std::size_t>(s.C * s.KH * s.KW * s.OH * s.OW);
    const auto x = random_vec<T>(nx, 61, -2, 2, true);
    const auto dc = random_vec<T>(nc, 62, -2, 2, true);
    std::ostringstream sh;
    sh << "(" << tname(T{}) << ",C=" << s.C << ",H=" << s.H << ",W=" << s.W << ",K=" << s.KH << "x" << s.KW << ",s=" << s.s
       << ",p=" << s.p << ")";
    expect_fast_equals_reference<T>("im2col" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> cols(nc, T(-7));
      tb.im2col(x.data(), s, cols.data());
      return cols;
    });
    expect_fast_equals_reference<T>("col2im" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> dx(nx, T(-7));
      tb.col2im(dc.data(), s, dx.data());
      return dx;
    });
    // a sample's columns inside a wider block (rows ld apart, as the convolution's blocks of
    // samples are): the same values, nothing written outside its own columns
    const std::int64_t P = s.OH * s.OW, CKK = s.ckk(), off = 5;
    kern::ConvShape w = s;
    w.ld = 3 * P + 7;
    const std::size_t nw = static_cast<std::size_t>(CKK * w.ld);
    const auto dw = random_vec<T>(nw, 64, -2, 2, true);
    expect_fast_equals_reference<T>("im2col ld" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> cols(nw, T(-7));
      tb.im2col(x.data(), w, cols.data() + off);
      return cols;
    });
    expect_fast_equals_reference<T>("col2im ld" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> dx(nx, T(-7));
      tb.col2im(dw.data() + off, w, dx.data());
      return dx;
    });
    expect_fast_equals_reference<T>("im2row" + sh.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> rows(nc, T(-7));
      tb.im2row(x.data(), w, rows.data());
      return rows;
    });
    auto same_bits = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; };
    std::vector<T> cols(nc), wide(nw, T(-7)), rows(nc);
    const auto& ref = kern::table<T>(Isa::scalar);
    ref.im2col(x.data(), s, cols.data());
    ref.im2col(x.data(), w, wide.data() + off);
    ref.im2row(x.data(), s, rows.data());
    for (std::int64_t r = 0; r < CKK; ++r)
      for (std::int64_t q = 0; q < w.ld; ++q) {
        if (off + r * w.ld + q >= static_cast<std::int64_t>(nw)) break;
        const T got = wide[static_cast<std::size_t>(off + r * w.ld + q)];
        if (q < P) {
          ASSERT_TRUE(same_bits(got, cols[static_cast<std::size_t>(r * P + q)])) << "im2col ld" << sh.str();
          ASSERT_TRUE(same_bits(rows[static_cast<std::size_t>(q * CKK + r)], cols[static_cast<std::size_t>(r * P + q)])) << "im2row" << sh.str();
        } else {
          ASSERT_EQ(got, T(-7)) << "im2col ld wrote outside its columns" << sh.str();
        }
      }
  }
}

TEST(NnKernels, Im2colF32) { im2col_cases<float>(); }
TEST(NnKernels, Im2colF64) { im2col_cases<double>(); }

TEST(NnKernels, Col2imReferenceIsTheDocumentedOrder) {
  // per pixel: its terms in increasing (kh, kw), from +0 (row-major (c, kh, kw, oh, ow) order)
  for (const auto& c : kConvs) {
    const kern::ConvShape s = conv_shape(c);
    const std::int64_t P = s.OH * s.OW;
    const auto dc = random_vec<float>(static_cast<std::size_t>(s.C * s.KH * s.KW * P), 63, -2, 2);
    std::vector<float> dx(static_cast<std::size_t>(s.C * s.H * s.W));
    kern::table<float>(Isa::scalar).col2im(dc.data(), s, dx.data());
    for (std::int64_t ch = 0; ch < s.C; ++ch)
      for (std::int64_t ih = 0; ih < s.H; ++ih)
        for (std::int64_t iw = 0; iw < s.W; ++iw) {
          float acc = 0;
          for (std::int64_t kh = 0; kh < s.KH; ++kh)
            for (std::int64_t kw = 0; kw < s.KW; ++kw) {
              const std::int64_t a = ih + s.p - kh, b = iw + s.p - kw;  // = oh*s, ow*s
              if (a < 0 || b < 0 || a % s.s || b % s.s || a / s.s >= s.OH || b / s.s >= s.OW) continue;
              acc = acc + dc[static_cast<std::size_t>(((ch * s.KH + kh) * s.KW + kw) * P + (a / s.s) * s.OW + b / s.s)];
            }
          EXPECT_EQ(std::bit_cast<std::uint32_t>(acc), std::bit_cast<std::uint32_t>(dx[static_cast<std::size_t>((ch * s.H + ih) * s.W + iw)]))
              << "C=" << s.C << " H=" << s.H << " pixel " << ch << "," << ih << "," << iw;
        }
  }
}

// ---- optimizer updates ----------------------------------------------------------------------------
// Three steps from the same start; p and the buffers after each step are compared.
template <class T>
void update_cases() {
  for (std::int64_t n : {1, 5, 16387, 100003}) {
    const std::size_t un = static_cast<std::size_t>(n);
    const auto p0 = random_vec<T>(un, 71, -2, 2, true);
    const std::vector<std::vector<T>> gs = {random_vec<T>(un, 72, -1, 1, true), random_vec<T>(un, 73, -1, 1, true),
                                            random_vec<T>(un, 74, -1, 1, true)};
    for (int kind = 0; kind < 5; ++kind) {  // plain, plain + decay, momentum, nesterov + decay, decay flag with wd 0
      kern::SgdCoef<T> c{T(0.05), T(0.9), T(0.01), kind == 1 || kind == 3 || kind == 4, kind == 3};
      if (kind == 4) c.wd = T(0);
      const bool momentum = kind >= 2;
      std::ostringstream name;
      name << "sgd_update(" << tname(T{}) << ",n=" << n << ",kind=" << kind << ")";
      expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
        std::vector<T> p = p0, v(un, T(0)), out;
        for (const auto& g : gs) {
          tb.sgd_update(p.data(), g.data(), momentum ? v.data() : nullptr, n, c);
          append(out, p);
          append(out, v);
        }
        return out;
      });
    }
    for (int kind = 0; kind < 3; ++kind) {  // Adam, Adam + decay, AdamW
      const double lr = 0.01, wd = kind ? 0.1 : 0.0;
      kern::AdamCoef<T> c{T(0.9), T(0.999), T(1.0 - 0.9), T(1.0 - 0.999), T(0.1), T(0.04), T(1e-8), T(wd), T(1.0 - lr * wd), kind > 0,
                          kind == 2};
      std::ostringstream name;
      name << "adam_update(" << tname(T{}) << ",n=" << n << ",kind=" << kind << ")";
      expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
        std::vector<T> p = p0, m(un, T(0)), v(un, T(0)), out;
        for (const auto& g : gs) {
          tb.adam_update(p.data(), g.data(), m.data(), v.data(), n, c);
          append(out, p);
          append(out, m);
          append(out, v);
        }
        return out;
      });
    }
  }
}

TEST(NnKernels, OptimizerUpdatesF32) { update_cases<float>(); }
TEST(NnKernels, OptimizerUpdatesF64) { update_cases<double>(); }

}  // namespace
}  // namespace bitgrad::test
