// NaN results are canonical (numerics.md §1; hole 6 of issue #7). Which NaN an x86 add, multiply
// or fma passes on when two operands are NaN follows the operand order, which the compiler
// chooses, so a NaN's sign and payload could depend on the build. Every kernel runs here on
// inputs with NaNs at fixed places, once with one set of NaN bits (signs, payloads, quiet and
// signalling) and once with another: both give the same output bits, every NaN in the output
// is the canonical quiet NaN, and every code path at every thread count agrees. Copies
// (im2col, index_select, gather) move a NaN's bits unchanged instead.
#include <cstdint>
#include <functional>
#include <sstream>

#include "kernels/index.hpp"
#include "support/kernel_check.hpp"

namespace bitgrad::test {
namespace {

using kern::ActGrad;
using kern::Bcast;
using kern::Binary;
using kern::Unary;

template <class T>
using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <class T>
bool is_canonical(T v) {
  return std::bit_cast<Bits<T>>(v) == std::bit_cast<Bits<T>>(kern::canonical_nan<T>());
}

// A NaN with a random sign, a random non-zero payload, quiet or signalling.
template <class T>
T nan_bits(std::uint64_t payload_seed, std::uint64_t at) {
  using U = Bits<T>;
  constexpr int kMant = sizeof(T) == 4 ? 23 : 52;
  const std::uint64_t r = rng::Stream(payload_seed, "nan").u64(at);
  U mant = static_cast<U>(r & ((std::uint64_t(1) << kMant) - 1));
  if (mant == 0 || mant == (U(1) << (kMant - 1))) mant |= 5;  // never the canonical payload
  const U exp = static_cast<U>(((U(1) << (sizeof(T) * 8 - 1 - kMant)) - 1)) << kMant;
  const U sign = static_cast<U>((r >> 63) & 1) << (sizeof(T) * 8 - 1);
  return std::bit_cast<T>(static_cast<U>(sign | exp | mant));
}

// Random values in [lo, hi) with NaNs at the places chosen by `stream` (about one in `every`),
// their bits drawn from `payload_seed`: the places never depend on the payloads.
template <class T>
std::vector<T> with_nans(std::size_t n, std::uint64_t stream, std::uint64_t payload_seed, double lo = -2, double hi = 2,
                         std::uint64_t every = 9) {
  std::vector<T> v = random_vec<T>(n, stream, lo, hi, true);
  rng::Stream places(stream, "nan-places");
  for (std::size_t i = 0; i < n; ++i)
    if (places.u64(i) % every == 0) v[i] = nan_bits<T>(payload_seed * 1000003 + stream, i);
  return v;
}

template <class T>
std::string bits_at(const std::vector<T>& v, std::size_t i) {
  std::ostringstream o;
  o << "0x" << std::hex << std::bit_cast<Bits<T>>(v[i]);
  return o.str();
}

template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " vs " << b.size();
  const std::int64_t i = first_bit_difference(a.data(), b.data(), a.size());
  if (i < 0) return ::testing::AssertionSuccess();
  const auto k = static_cast<std::size_t>(i);
  return ::testing::AssertionFailure() << "element " << i << ": " << bits_at(a, k) << " vs " << bits_at(b, k);
}

// run(table, payload_seed) -> the kernel's outputs for the inputs made with those NaN bits.
// The scalar reference with payloads 1 is the answer; payloads 2 and every fast path at every
// thread count must give its bits. With `moves`, the kernel copies: payloads 1 and 2 differ.
template <class T>
void expect_canonical_nans(const std::string& name, const std::function<std::vector<T>(const kern::Table<T>&, std::uint64_t)>& run) {
  RuntimeGuard guard;
  set_num_threads(1);
  const auto& ref = kern::table<T>(Isa::scalar);
  const std::vector<T> want = run(ref, 1);
  std::size_t nans = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] != want[i]) {
      ++nans;
      EXPECT_TRUE(is_canonical(want[i])) << name << ": element " << i << " is the NaN " << bits_at(want, i);
    }
  }
  EXPECT_GT(nans, 0u) << name << ": no NaN reached the output, the case tests nothing";
  EXPECT_TRUE(same_bits(want, run(ref, 2))) << name << " scalar, other NaN payloads";
  for (Isa isa : fast_isas())
    for (int t : thread_counts()) {
      set_num_threads(t);
      for (std::uint64_t pl : {1, 2})
        EXPECT_TRUE(same_bits(want, run(kern::table<T>(isa), pl))) << name << " isa=" << isa_name(isa) << " threads=" << t
                                                                   << " payloads=" << pl;
    }
  // the order perturbation: other orders, the same NaNs (its finite values differ by design)
  kern::set_perturbation(true, 7);
  kern::perturb_step(0);
  const std::vector<T> p1 = run(kern::active<T>(), 1);
  kern::perturb_step(0);
  const std::vector<T> p2 = run(kern::active<T>(), 2);
  kern::set_perturbation(false);
  EXPECT_TRUE(same_bits(p1, p2)) << name << " perturbed, other NaN payloads";
  for (std::size_t i = 0; i < p1.size(); ++i) {
    if (p1[i] != p1[i]) {
      EXPECT_TRUE(is_canonical(p1[i])) << name << " perturbed: element " << i << " is " << bits_at(p1, i);
    }
  }
}

template <class T>
std::string label(const char* kernel, const std::string& detail = "") {
  return std::string(kernel) + "(" + tname(T{}) + (detail.empty() ? "" : "," + detail) + ")";
}

template <class T>
void append_nan_cases(std::vector<T>& to, const std::vector<T>& v) {
  to.insert(to.end(), v.begin(), v.end());
}

// ---- elementwise ----------------------------------------------------------------------------
template <class T>
void elementwise_cases() {
  const std::int64_t n = 133;
  for (int u = 0; u < kern::op_count<Unary>; ++u)
    expect_canonical_nans<T>(label<T>("unary", kern::op_name(static_cast<Unary>(u))), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto x = with_nans<T>(n, 10 + static_cast<std::uint64_t>(u), pl);
      std::vector<T> y(static_cast<std::size_t>(n));
      tb.unary(static_cast<Unary>(u), x.data(), y.data(), n);
      return y;
    });
  const std::int64_t outer = 5, inner = 37;
  for (int o = 0; o < kern::op_count<Binary>; ++o)
    for (int b = 0; b <= static_cast<int>(Bcast::rcol); ++b) {
      const Bcast bc = static_cast<Bcast>(b);
      const std::size_t nb = bc == Bcast::same ? outer * inner : bc == Bcast::row || bc == Bcast::rrow ? inner : outer;
      expect_canonical_nans<T>(label<T>("binary", std::string(kern::op_name(static_cast<Binary>(o))) + "," + std::to_string(b)),
                               [&](const kern::Table<T>& tb, std::uint64_t pl) {
                                 // the same places in a and b: both operands NaN at once
                                 auto a = with_nans<T>(static_cast<std::size_t>(outer * inner), 20, pl, 0.5, 2, 4);
                                 auto bb = with_nans<T>(nb, 20, pl + 7, 0.5, 2, 4);
                                 std::vector<T> y(static_cast<std::size_t>(outer * inner));
                                 tb.binary(static_cast<Binary>(o), bc, a.data(), bb.data(), y.data(), outer, inner);
                                 return y;
                               });
    }
  for (int a = 0; a < kern::op_count<ActGrad>; ++a)
    expect_canonical_nans<T>(label<T>("act_grad", kern::op_name(static_cast<ActGrad>(a))), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto v = with_nans<T>(static_cast<std::size_t>(n), 30, pl, -3, 3, 4);  // other places than g's
      auto g = with_nans<T>(static_cast<std::size_t>(n), 31, pl, -3, 3, 4);
      std::vector<T> y(static_cast<std::size_t>(n));
      tb.act_grad(static_cast<ActGrad>(a), v.data(), g.data(), y.data(), n);
      return y;
    });
  // activations with parameters, at their defaults: forward and backward
  for (int a = 0; a < kern::op_count<kern::UnaryP>; ++a) {
    const kern::UnaryP op = static_cast<kern::UnaryP>(a);
    expect_canonical_nans<T>(label<T>("unary_p", kern::op_name(op)), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto x = with_nans<T>(static_cast<std::size_t>(n), 34, pl, -3, 3, 4);
      std::vector<T> y(static_cast<std::size_t>(n));
      tb.unary_p(op, x.data(), y.data(), n, kern::info(op).a, kern::info(op).b);
      return y;
    });
    expect_canonical_nans<T>(label<T>("act_grad_p", kern::op_name(op)), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto v = with_nans<T>(static_cast<std::size_t>(n), 35, pl, -3, 3, 4);
      auto g = with_nans<T>(static_cast<std::size_t>(n), 36, pl, -3, 3, 4);
      std::vector<T> y(static_cast<std::size_t>(n));
      tb.act_grad_p(op, v.data(), g.data(), y.data(), n, kern::info(op).a, kern::info(op).b);
      return y;
    });
  }
  // GELU keeping erf: the forward's y, then the backward from the kept e (e itself is internal)
  expect_canonical_nans<T>(label<T>("gelu_keep", "y,gx"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
    auto v = with_nans<T>(static_cast<std::size_t>(n), 32, pl, -3, 3, 4);
    auto g = with_nans<T>(static_cast<std::size_t>(n), 33, pl, -3, 3, 4);
    std::vector<T> y(static_cast<std::size_t>(n)), gx(static_cast<std::size_t>(n));
    std::vector<double> e(static_cast<std::size_t>(n));
    tb.gelu_keep(v.data(), y.data(), e.data(), n);
    tb.gelu_grad_kept(v.data(), e.data(), g.data(), gx.data(), n);
    y.insert(y.end(), gx.begin(), gx.end());
    return y;
  });
}
TEST(NanPayloads, ElementwiseF32) { elementwise_cases<float>(); }
TEST(NanPayloads, ElementwiseF64) { elementwise_cases<double>(); }

// ---- GEMM: every tile path (full, partial, transposed, several chunks of k, split-K) ----------
template <class T>
void gemm_cases() {
  struct Shape {
    std::int64_t M, N, K;
  };
  for (Shape s : {Shape{13, 37, 70}, Shape{40, 3, 65}, Shape{3, 5, 4096 + 40}, Shape{2, 9, 0}, Shape{1, 40, 20000}})
    for (bool bias : {false, true}) {
      if (s.K == 0 && !bias) continue;  // +0 everywhere: no NaN can reach C
      std::ostringstream d;
      d << s.M << "x" << s.N << "x" << s.K << (bias ? ",bias" : "");
      expect_canonical_nans<T>(label<T>("gemm", d.str()), [&](const kern::Table<T>& tb, std::uint64_t pl) {
        // sparse NaNs in A and B (rows/columns meeting two NaNs), NaNs in the bias
        auto A = with_nans<T>(static_cast<std::size_t>(s.M * s.K), 40, pl, -1, 1, 97);
        auto B = with_nans<T>(static_cast<std::size_t>(s.K * s.N), 41, pl, -1, 1, 97);
        auto bv = with_nans<T>(static_cast<std::size_t>(s.N), 42, pl, -1, 1, 2);
        std::vector<T> C(static_cast<std::size_t>(s.M * s.N));
        kern::GemmArgs<T> g;
        g.M = s.M, g.N = s.N, g.K = s.K;
        g.A = A.data(), g.rsa = s.K, g.csa = 1;
        g.B = B.data(), g.rsb = s.N, g.csb = 1;
        g.C = C.data(), g.ldc = s.N;
        g.bias = bias ? bv.data() : nullptr;
        tb.gemm(g);
        return C;
      });
    }
}
TEST(NanPayloads, GemmF32) { gemm_cases<float>(); }
TEST(NanPayloads, GemmF64) { gemm_cases<double>(); }

// ---- rows and columns: the row rule, the batch rule, softmax family, losses, layer norm ---------
template <class T>
void nan_row_cases() {
  const std::int64_t R = 9, L = 41;  // rows with no NaN, one, and several
  const std::size_t n = static_cast<std::size_t>(R * L);
  auto rows = [&](std::uint64_t s, std::uint64_t pl) { return with_nans<T>(n, s, pl, -3, 3, 60); };
  expect_canonical_nans<T>(label<T>("sum_rows"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
    auto x = rows(50, pl);
    std::vector<T> y(static_cast<std::size_t>(R));
    tb.sum_rows(x.data(), R, L, y.data());
    return y;
  });
  for (bool two : {false, true})
    expect_canonical_nans<T>(label<T>("sumsq_rows", two ? "a-b" : "a"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto a = rows(51, pl), b = rows(52, pl);
      std::vector<T> y(static_cast<std::size_t>(R));
      tb.sumsq_rows(a.data(), two ? b.data() : nullptr, R, L, y.data());
      return y;
    });
  expect_canonical_nans<T>(label<T>("sum_cols"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
    auto x = with_nans<T>(static_cast<std::size_t>(70 * 37), 53, pl, -3, 3, 200);
    std::vector<T> y(37);
    tb.sum_cols(x.data(), 70, 37, y.data());
    return y;
  });
  using RowsFn = void (*kern::Table<T>::*)(const T*, std::int64_t, std::int64_t, T*);
  for (auto [nm, fn] : {std::pair<const char*, RowsFn>{"softmax_rows", &kern::Table<T>::softmax_rows},
                        std::pair<const char*, RowsFn>{"log_softmax_rows", &kern::Table<T>::log_softmax_rows}})
    expect_canonical_nans<T>(label<T>(nm), [&, fn = fn](const kern::Table<T>& tb, std::uint64_t pl) {
      auto x = rows(54, pl);
      std::vector<T> y(n);
      (tb.*fn)(x.data(), R, L, y.data());
      return y;
    });
  using Rows2Fn = void (*kern::Table<T>::*)(const T*, const T*, std::int64_t, std::int64_t, T*);
  for (auto [nm, fn] : {std::pair<const char*, Rows2Fn>{"softmax_grad_rows", &kern::Table<T>::softmax_grad_rows},
                        std::pair<const char*, Rows2Fn>{"log_softmax_grad_rows", &kern::Table<T>::log_softmax_grad_rows}})
    expect_canonical_nans<T>(label<T>(nm), [&, fn = fn](const kern::Table<T>& tb, std::uint64_t pl) {
      auto y = rows(55, pl), g = rows(56, pl);
      std::vector<T> gx(n);
      (tb.*fn)(y.data(), g.data(), R, L, gx.data());
      return gx;
    });
  std::vector<std::int64_t> t(static_cast<std::size_t>(R));
  for (std::int64_t r = 0; r < R; ++r) t[static_cast<std::size_t>(r)] = (r * 7) % L;
  expect_canonical_nans<T>(label<T>("xent_rows"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
    auto x = rows(57, pl);
    std::vector<T> loss(static_cast<std::size_t>(R));
    tb.xent_rows(x.data(), t.data(), R, L, loss.data());
    return loss;
  });
  expect_canonical_nans<T>(label<T>("xent_grad_rows"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
    auto x = rows(58, pl);
    std::vector<T> gx(n);
    tb.xent_grad_rows(x.data(), t.data(), R, L, T(0.25), gx.data());
    return gx;
  });
  for (int affine = 0; affine < 3; ++affine) {
    expect_canonical_nans<T>(label<T>("layer_norm_rows", std::to_string(affine)), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto x = rows(59, pl);
      auto gamma = with_nans<T>(static_cast<std::size_t>(L), 60, pl, -2, 2, 13);
      auto beta = with_nans<T>(static_cast<std::size_t>(L), 61, pl, -2, 2, 13);
      std::vector<T> y(n), mean(static_cast<std::size_t>(R)), rs(static_cast<std::size_t>(R));
      tb.layer_norm_rows(x.data(), affine >= 1 ? gamma.data() : nullptr, affine >= 2 ? beta.data() : nullptr, R, L, T(1e-5),
                         y.data(), mean.data(), rs.data());
      append_nan_cases(y, mean);
      append_nan_cases(y, rs);
      return y;
    });
    expect_canonical_nans<T>(label<T>("layer_norm_grad_rows", std::to_string(affine)),
                             [&](const kern::Table<T>& tb, std::uint64_t pl) {
                               auto g = rows(62, pl), h = rows(63, pl);
                               auto gamma = with_nans<T>(static_cast<std::size_t>(L), 64, pl, -2, 2, 13);
                               auto rstd = with_nans<T>(static_cast<std::size_t>(R), 65, pl, 0.5, 2, 5);
                               std::vector<T> dx(n);
                               tb.layer_norm_grad_rows(g.data(), h.data(), affine >= 1 ? gamma.data() : nullptr, rstd.data(), R, L,
                                                       dx.data());
                               return dx;
                             });
  }
}
TEST(NanPayloads, RowsF32) { nan_row_cases<float>(); }
TEST(NanPayloads, RowsF64) { nan_row_cases<double>(); }

// ---- pooling, im2col / col2im -----------------------------------------------------------------
template <class T>
void conv_pool_cases() {
  for (std::int64_t k : {2, 3}) {
    const kern::PoolShape s{3, 9, 9, k, 2, (9 - k) / 2 + 1, (9 - k) / 2 + 1};
    const std::size_t in = static_cast<std::size_t>(s.planes * s.H * s.W), out = static_cast<std::size_t>(s.planes * s.OH * s.OW);
    std::vector<std::int64_t> idx(out);
    for (std::size_t o = 0; o < out; ++o) {  // a valid argmax map: some pixels get several windows
      const std::int64_t q = static_cast<std::int64_t>(o) / (s.OH * s.OW), w = static_cast<std::int64_t>(o) % (s.OH * s.OW);
      idx[o] = (w / s.OW * s.s + (q % k)) * s.W + (w % s.OW) * s.s + ((w + q) % k);
    }
    const std::string d = "k=" + std::to_string(k);
    expect_canonical_nans<T>(label<T>("max_pool", d), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto x = with_nans<T>(in, 70, pl, -2, 2, 7);
      std::vector<T> y(out);
      std::vector<std::int64_t> ix(out);
      tb.max_pool(x.data(), s, y.data(), ix.data());
      for (std::size_t o = 0; o < out; ++o) y.push_back(static_cast<T>(ix[o]));
      return y;
    });
    expect_canonical_nans<T>(label<T>("max_pool_grad", d), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto g = with_nans<T>(out, 71, pl, -2, 2, 3);
      std::vector<T> dx(in);
      tb.max_pool_grad(g.data(), idx.data(), s, dx.data());
      return dx;
    });
    expect_canonical_nans<T>(label<T>("avg_pool", d), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto x = with_nans<T>(in, 72, pl, -2, 2, 7);
      std::vector<T> y(out);
      tb.avg_pool(x.data(), s, y.data());
      return y;
    });
    expect_canonical_nans<T>(label<T>("avg_pool_grad", d), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto g = with_nans<T>(out, 73, pl, -2, 2, 3);
      std::vector<T> dx(in);
      tb.avg_pool_grad(g.data(), s, dx.data());
      return dx;
    });
  }
  const kern::ConvShape c{2, 7, 6, 3, 3, 4, 3, 2, 1};  // stride 2, padding 1
  const std::size_t pix = static_cast<std::size_t>(c.C * c.H * c.W), cols = static_cast<std::size_t>(c.C * c.KH * c.KW * c.OH * c.OW);
  expect_canonical_nans<T>(label<T>("col2im"), [&](const kern::Table<T>& tb, std::uint64_t pl) {
    auto dc = with_nans<T>(cols, 74, pl, -2, 2, 5);
    std::vector<T> dx(pix);
    tb.col2im(dc.data(), c, dx.data());
    return dx;
  });
  // im2col and im2row copy: each element holds its pixel's bits, NaN or not, on every path
  const auto x1 = with_nans<T>(pix, 75, 1), x2 = with_nans<T>(pix, 75, 2);
  RuntimeGuard guard;
  for (Isa isa : isas())
    for (int t : thread_counts()) {
      set_num_threads(t);
      for (const auto* x : {&x1, &x2}) {
        std::vector<T> got(cols), want(cols);
        kern::table<T>(isa).im2col(x->data(), c, got.data());
        std::size_t at = 0;
        for (std::int64_t ch = 0; ch < c.C; ++ch)
          for (std::int64_t kh = 0; kh < c.KH; ++kh)
            for (std::int64_t kw = 0; kw < c.KW; ++kw)
              for (std::int64_t oh = 0; oh < c.OH; ++oh)
                for (std::int64_t ow = 0; ow < c.OW; ++ow, ++at) {
                  const std::int64_t ih = oh * c.s + kh - c.p, iw = ow * c.s + kw - c.p;
                  want[at] = ih >= 0 && ih < c.H && iw >= 0 && iw < c.W ? (*x)[static_cast<std::size_t>((ch * c.H + ih) * c.W + iw)] : T(0);
                }
        EXPECT_TRUE(same_bits(want, got)) << label<T>("im2col") << " isa=" << isa_name(isa) << " threads=" << t;
        // im2row: the same elements transposed, bits and all
        const std::int64_t P = c.OH * c.OW, CKK = c.C * c.KH * c.KW;
        std::vector<T> rows(cols), want_rows(cols);
        kern::table<T>(isa).im2row(x->data(), c, rows.data());
        for (std::int64_t r = 0; r < CKK; ++r)
          for (std::int64_t q = 0; q < P; ++q) want_rows[static_cast<std::size_t>(q * CKK + r)] = want[static_cast<std::size_t>(r * P + q)];
        EXPECT_TRUE(same_bits(want_rows, rows)) << label<T>("im2row") << " isa=" << isa_name(isa) << " threads=" << t;
      }
    }
}
TEST(NanPayloads, ConvAndPoolF32) { conv_pool_cases<float>(); }
TEST(NanPayloads, ConvAndPoolF64) { conv_pool_cases<double>(); }

// ---- optimizer updates: parameters and state ---------------------------------------------------
template <class T>
void nan_update_cases() {
  const std::int64_t n = 101;
  const std::size_t un = static_cast<std::size_t>(n);
  for (int variant = 0; variant < 4; ++variant) {  // plain, momentum, nesterov, momentum + decay
    const kern::SgdCoef<T> c{T(0.1), T(variant ? 0.9 : 0), T(0.01), variant == 3, variant == 2};
    expect_canonical_nans<T>(label<T>("sgd_update", std::to_string(variant)), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto p = with_nans<T>(un, 80, pl, -1, 1, 4), g = with_nans<T>(un, 80, pl + 7, -1, 1, 4), v = with_nans<T>(un, 81, pl, -1, 1, 6);
      tb.sgd_update(p.data(), g.data(), variant ? v.data() : nullptr, n, c);
      if (variant) append_nan_cases(p, v);
      return p;
    });
  }
  for (int variant = 0; variant < 3; ++variant) {  // Adam, Adam + L2, AdamW
    kern::AdamCoef<T> c{T(0.9), T(0.999), T(0.1), T(0.001), T(0.01), T(0.5), T(1e-8), T(0.01), T(0.9999), variant > 0, variant == 2};
    expect_canonical_nans<T>(label<T>("adam_update", std::to_string(variant)), [&](const kern::Table<T>& tb, std::uint64_t pl) {
      auto p = with_nans<T>(un, 82, pl, -1, 1, 4), g = with_nans<T>(un, 82, pl + 7, -1, 1, 4);
      auto m = with_nans<T>(un, 83, pl, -1, 1, 6), v = with_nans<T>(un, 84, pl, 0, 1, 6);
      tb.adam_update(p.data(), g.data(), m.data(), v.data(), n, c);
      append_nan_cases(p, m);
      append_nan_cases(p, v);
      return p;
    });
  }
}
TEST(NanPayloads, OptimizerUpdatesF32) { nan_update_cases<float>(); }
TEST(NanPayloads, OptimizerUpdatesF64) { nan_update_cases<double>(); }

// ---- the index kernels (one implementation for every path) --------------------------------------
template <class T>
void index_cases() {
  const std::int64_t S = 5, n = 70, inner = 3, per = 2;
  std::vector<std::int64_t> index(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) index[static_cast<std::size_t>(i)] = (i * 3 + i / 7) % S;
  auto both = [&](const char* nm, const std::function<std::vector<T>(std::uint64_t)>& f) {
    const std::vector<T> a = f(1), b = f(2);
    EXPECT_TRUE(same_bits(a, b)) << label<T>(nm);
    std::size_t nans = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (a[i] != a[i]) {
        ++nans;
        EXPECT_TRUE(is_canonical(a[i])) << label<T>(nm) << " element " << i << " " << bits_at(a, i);
      }
    EXPECT_GT(nans, 0u) << label<T>(nm);
  };
  both("index_add_rows", [&](std::uint64_t pl) {
    auto g = with_nans<T>(static_cast<std::size_t>(2 * n * inner), 90, pl, -1, 1, 11);
    std::vector<T> gx(static_cast<std::size_t>(2 * S * inner));
    kern::index_add_rows(g.data(), 2, n, inner, index.data(), S, gx.data());
    return gx;
  });
  both("index_add_rows_by_sample", [&](std::uint64_t pl) {
    auto g = with_nans<T>(static_cast<std::size_t>(n * inner), 91, pl, -1, 1, 11);
    std::vector<T> gx(static_cast<std::size_t>(S * inner));
    kern::index_add_rows_by_sample(g.data(), n / per, per, inner, index.data(), S, gx.data());
    return gx;
  });
  std::vector<std::int64_t> gidx(static_cast<std::size_t>(n * inner));
  for (std::size_t i = 0; i < gidx.size(); ++i) gidx[i] = static_cast<std::int64_t>((i * 5 + i / 4) % S);
  both("gather_axis_backward", [&](std::uint64_t pl) {
    auto g = with_nans<T>(static_cast<std::size_t>(n * inner), 92, pl, -1, 1, 11);
    std::vector<T> gx(static_cast<std::size_t>(S * inner));
    kern::gather_axis_backward(g.data(), 1, S, inner, gidx.data(), n, gx.data());
    return gx;
  });
}
TEST(NanPayloads, IndexKernelsF32) { index_cases<float>(); }
TEST(NanPayloads, IndexKernelsF64) { index_cases<double>(); }

TEST(NanPayloads, TheCanonicalNanIsPositiveQuietWithNoPayload) {
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kern::canonical_nan<float>()), 0x7FC00000u);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(kern::canonical_nan<double>()), 0x7FF8000000000000u);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(kern::canon(nan_bits<float>(3, 4))), 0x7FC00000u);
  EXPECT_EQ(kern::canon(-0.0f), -0.0f);
  EXPECT_TRUE(std::signbit(kern::canon(-0.0)));
}

}  // namespace
}  // namespace bitgrad::test
