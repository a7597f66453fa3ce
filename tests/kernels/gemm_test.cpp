// GEMM: every fast path equals the scalar reference bit for bit, on odd shapes, all transposes,
// with and without bias, at threads 1..8: k around every block and chunk boundary, k = 0 and 1,
// and outputs small enough for split-K.
#include <array>
#include <cmath>
#include <sstream>

#include "support/kernel_check.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad::test {
namespace {

struct GemmCase {
  std::int64_t m, n, k;
  bool ta, tb;
  bool bias;
};

// B packed ahead as the code path says for the shape (kern::GemmPacking), written here element by
// element from GemmPacking::at, the B pointer null: the frame must read every value from it
template <class T>
std::vector<T> packed_b(const kern::GemmPacking& P, const std::vector<T>& B, std::int64_t k, std::int64_t n, std::int64_t rsb,
                        std::int64_t csb) {
  std::vector<T> out(static_cast<std::size_t>(P.size(k, n)), T(std::nan("")));
  for (std::int64_t kk = 0; kk < k; ++kk)
    for (std::int64_t j = 0; j < P.width(n); ++j)
      out[static_cast<std::size_t>(P.at(k, n, kk, j))] = j < n ? B[static_cast<std::size_t>(kk * rsb + j * csb)] : T(0);
  return out;
}

template <class T>
void run_case(const GemmCase& c, bool packed = false) {
  std::ostringstream name;
  name << "gemm(" << tname(T{}) << ",m=" << c.m << ",n=" << c.n << ",k=" << c.k << ",ta=" << (c.ta ? 'T' : 'N')
       << ",tb=" << (c.tb ? 'T' : 'N') << ",bias=" << c.bias << (packed ? ",B packed" : "") << ")";
  auto A = random_vec<T>(static_cast<std::size_t>(c.m * c.k), 11, -1, 1, true);
  auto B = random_vec<T>(static_cast<std::size_t>(c.k * c.n), 12, -1, 1, true);
  auto bias = random_vec<T>(static_cast<std::size_t>(c.n), 13);
  expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
    std::vector<T> C(static_cast<std::size_t>(c.m * c.n), T(-7));
    kern::GemmArgs<T> g;
    g.M = c.m;
    g.N = c.n;
    g.K = c.k;
    g.A = A.data();
    g.rsa = c.ta ? 1 : c.k;
    g.csa = c.ta ? c.m : 1;
    g.B = B.data();
    g.rsb = c.tb ? 1 : c.n;
    g.csb = c.tb ? c.k : 1;
    g.C = C.data();
    g.ldc = c.n;
    g.bias = c.bias ? bias.data() : nullptr;
    std::vector<T> Bp;
    if (packed && tb.gemm_packing) {
      const kern::GemmPacking P = tb.gemm_packing(c.m, c.n, c.k);
      if (P.usable() && c.k > 0) {
        Bp = packed_b(P, B, c.k, c.n, g.rsb, g.csb);
        g.Bp = Bp.data(), g.packing = P, g.B = nullptr;
      }
    }
    tb.gemm(g);
    return C;
  });
}

const GemmCase kCases[] = {
    {1, 1, 1, false, false, false},     {7, 33, 1, false, true, true},       {33, 7, 127, true, false, false},
    {127, 129, 33, true, true, true},   {129, 127, 511, false, false, true}, {1, 785, 129, false, true, false},
    {785, 1, 33, true, false, true},    {64, 33, 7, false, false, false},    {128, 512, 784, false, true, true},
    {3, 2049, 5, false, false, true},   {0, 5, 3, false, false, true},       {5, 0, 3, false, false, true},
    {5, 3, 0, false, false, true},      {5, 3, 0, false, false, false},      {7, 33, 31, true, false, false},
    {33, 7, 33, true, false, false},    {127, 129, 128, true, false, false}, {129, 127, 129, true, true, false},
    {512, 784, 128, true, false, false}, {17, 9, 4097, true, false, true},   {5, 31, 8193, false, true, false},
    {10, 1, 10000, true, false, false},
    // k just below, at and above a block (32), the f64 AVX-512 chunk (128) and the f32 chunk (256)
    {13, 37, 32, false, false, true},   {13, 37, 63, false, true, false},    {13, 37, 64, true, false, true},
    {13, 37, 127, false, false, false}, {13, 37, 129, true, true, true},     {13, 37, 255, false, false, true},
    {13, 37, 256, false, true, false},  {13, 37, 257, false, false, true},   {13, 37, 511, true, false, false},
    {13, 37, 513, false, false, true},  {13, 37, 767, false, true, true},    {13, 37, 769, false, false, false},
    // a last block as long as the microkernel's lead (its first k's run half a tile at a time),
    // one shorter and one longer
    {13, 37, 35, true, false, true},    {13, 37, 36, false, true, false},    {13, 37, 37, false, false, true},
    {13, 37, 260, true, true, false},   {7, 50, 548, false, false, true},
    // small outputs over long k: split-K at 2 threads and more (leaves cut at the tree's nodes)
    {1, 64, 4096, false, false, true},  {1, 40, 20000, false, true, false},  {3, 17, 9000, true, false, true},
    {1, 1, 65536, false, false, false}, {2, 130, 3333, false, false, true},  {6, 16, 2080, true, true, false},
    // shapes that pick the narrower tiles (6x32, 12x16 on AVX-512) directly or transposed
    {6, 25, 784, false, true, true},    {16, 150, 100, false, true, false},  {100, 16, 50, true, false, true},
    {25, 6, 784, true, false, false},   {100, 16, 300, true, false, false},  {785, 129, 257, false, false, false},
    // and the 8-row one (8x48 on AVX-512): a convolution's 8 or 16 output channels
    {8, 1568, 72, false, false, false}, {16, 784, 144, false, true, true},   {24, 97, 300, true, false, false},
    // and the 8 x 32 one: an attention's heads
    {32, 32, 32, false, false, false},  {16, 32, 16, false, true, true},     {40, 96, 50, true, false, true},
};

TEST(Gemm, FastPathsEqualReferenceF32) {
  for (const auto& c : kCases) run_case<float>(c);
}

TEST(Gemm, FastPathsEqualReferenceF64) {
  for (const auto& c : kCases) run_case<double>(c);
}

// The same with B packed ahead wherever the code path takes it (the shapes it computes as C^T
// take none): the same bits, B never read
TEST(Gemm, PackedBEqualsReferenceF32) {
  for (const auto& c : kCases) run_case<float>(c, true);
}
TEST(Gemm, PackedBEqualsReferenceF64) {
  for (const auto& c : kCases) run_case<double>(c, true);
}

// A B packed for another microkernel is not read as if it were this one's: with B given the GEMM
// reads B, without it the call is refused
TEST(Gemm, PackedBOfAnotherLayoutIsNotRead) {
  const auto& tb = kern::table<float>(best_isa());
  if (!tb.gemm_packing) GTEST_SKIP() << "the scalar path packs no B";
  const std::int64_t m = 64, n = 300, k = 300;  // k over two chunks: the two layouts differ
  auto A = random_vec<float>(static_cast<std::size_t>(m * k), 1), B = random_vec<float>(static_cast<std::size_t>(k * n), 2);
  kern::GemmPacking P = tb.gemm_packing(m, n, k);
  ASSERT_TRUE(P.usable());
  P.chunk /= 2;  // another layout
  std::vector<float> Bp = packed_b(P, B, k, n, n, 1), C(static_cast<std::size_t>(m * n)), R(C.size());
  kern::GemmArgs<float> g;
  g.M = m, g.N = n, g.K = k, g.A = A.data(), g.rsa = k, g.csa = 1, g.B = B.data(), g.rsb = n, g.csb = 1, g.C = R.data(), g.ldc = n;
  tb.gemm(g);
  g.C = C.data(), g.Bp = Bp.data(), g.packing = P;
  tb.gemm(g);
  EXPECT_EQ(C, R);
  g.B = nullptr;
  EXPECT_THROW(tb.gemm(g), std::invalid_argument);
}

// gemm_samples: the batch rule over S samples' products (each sample's operands at its own
// offset) equals the reference's stored products summed by sum_cols, and that is by definition
// what it is: checked against tb.gemm per sample and tb.sum_cols on the scalar reference too.
// S around the batch rule's blocks of 32 (one block, a block and one, several levels of the
// pairwise stack), k of a few terms (the products beside their running sums in the registers),
// within one chunk and beyond it (the stored form), odd M and N, B transposed.
template <class T>
void samples_case(std::int64_t S, std::int64_t m, std::int64_t n, std::int64_t k, bool tb_) {
  std::ostringstream name;
  name << "gemm_samples(" << tname(T{}) << ",S=" << S << ",m=" << m << ",n=" << n << ",k=" << k << ",tb=" << tb_ << ")";
  const std::int64_t sa = m * k + 3, sb = k * n + 5;
  auto A = random_vec<T>(static_cast<std::size_t>(S * sa), 21, -1, 1, true);
  auto B = random_vec<T>(static_cast<std::size_t>(S * sb), 22, -1, 1, true);
  auto args = [&](T* C) {
    kern::GemmSamplesArgs<T> a;
    a.S = S, a.sa = sa, a.sb = sb;
    a.g.M = m, a.g.N = n, a.g.K = k;
    a.g.A = A.data(), a.g.rsa = k, a.g.csa = 1;
    a.g.B = B.data(), a.g.rsb = tb_ ? 1 : n, a.g.csb = tb_ ? k : 1;
    a.g.C = C, a.g.ldc = n + 2;
    return a;
  };
  std::vector<T> want(static_cast<std::size_t>(m * (n + 2)), T(-7));
  {
    // the definition, on the scalar reference: each product stored, then sum_cols
    ExecContext ref(1, Isa::scalar);
    ExecScope scope(ref);
    const kern::Table<T>& tb = kern::table<T>(Isa::scalar);
    std::vector<T> part(static_cast<std::size_t>(S * m * n));
    for (std::int64_t s = 0; s < S; ++s) {
      kern::GemmArgs<T> g = args(nullptr).g;
      g.A += s * sa;
      g.B += s * sb;
      g.C = part.data() + s * m * n;
      g.ldc = n;
      tb.gemm(g);
    }
    std::vector<T> tot(static_cast<std::size_t>(m * n));
    tb.sum_cols(part.data(), S, m * n, tot.data());
    for (std::int64_t i = 0; i < m; ++i) std::copy(tot.begin() + i * n, tot.begin() + (i + 1) * n, want.begin() + i * (n + 2));
  }
  expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
    std::vector<T> C(static_cast<std::size_t>(m * (n + 2)), T(-7));
    tb.gemm_samples(args(C.data()));
    EXPECT_TRUE(bitwise_equal(want, C)) << name.str() << ": not the stored products' batch rule";
    return C;
  });
}

TEST(Gemm, SamplesSummedByTheBatchRuleEqualTheirStoredProducts) {
  for (std::int64_t S : {1, 31, 32, 33, 97})
    for (auto [m, n, k] : {std::array<std::int64_t, 3>{7, 33, 9}, {13, 70, 32}, {1, 9, 64}, {64, 130, 1}, {6, 64, 129}, {5, 17, 400},
                                    {19, 100, 4}, {4, 47, 8}, {33, 16, 2}}) {
      samples_case<float>(S, m, n, k, S % 2 == 1);
      samples_case<double>(S, m, n, k, S % 2 == 0);
    }
  // k of a few terms over more samples than the registers' path packs at once (its bound)
  samples_case<float>(33000, 2, 3, 8, false);
  samples_case<double>(33000, 2, 3, 8, true);
}

// The reference itself against an independent evaluation of the documented order: blocks of
// 32 k's, each a chain from +0, the pairwise tree over the blocks, then + bias.
TEST(Gemm, ReferenceFollowsTheDocumentedOrder) {
  const std::int64_t m = 3, n = 2, k = 70 + 96;  // 166 = 5 blocks of 32 + 6
  auto A = random_vec<double>(static_cast<std::size_t>(m * k), 5);
  auto B = random_vec<double>(static_cast<std::size_t>(k * n), 6);
  auto bias = random_vec<double>(static_cast<std::size_t>(n), 7);
  std::vector<double> C(static_cast<std::size_t>(m * n));
  kern::GemmArgs<double> g;
  g.M = m, g.N = n, g.K = k, g.A = A.data(), g.rsa = k, g.csa = 1, g.B = B.data(), g.rsb = n, g.csb = 1, g.C = C.data(), g.ldc = n;
  g.bias = bias.data();
  kern::table<double>(Isa::scalar).gemm(g);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double blk[6] = {0, 0, 0, 0, 0, 0};
      for (std::int64_t kk = 0; kk < k; ++kk) blk[kk / 32] = std::fma(A[i * k + kk], B[kk * n + j], blk[kk / 32]);
      // 6 blocks: ((b0 + b1) + (b2 + b3)) + (b4 + b5)
      const double want = (((blk[0] + blk[1]) + (blk[2] + blk[3])) + (blk[4] + blk[5])) + bias[j];
      EXPECT_EQ(std::bit_cast<std::uint64_t>(want), std::bit_cast<std::uint64_t>(C[i * n + j]));
    }
}

// gemm_batch: each GEMM of the batch exactly what the reference's gemm gives it alone (the
// reference has no gemm_batch: its loop is the definition), every operand at its own offset or one
// shared (step 0), transposed or not, with and without bias; shapes small enough to go whole to
// the threads (an attention's heads) and larger ones, one computed as C^T, and k = 0.
template <class T>
void batch_case(std::int64_t count, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb_, bool shared_a, bool bias) {
  std::ostringstream name;
  name << "gemm_batch(" << tname(T{}) << ",count=" << count << ",m=" << m << ",n=" << n << ",k=" << k << ",ta=" << ta << ",tb=" << tb_
       << ",shared a=" << shared_a << ",bias=" << bias << ")";
  const std::int64_t sa = shared_a ? 0 : m * k + 3, sb = k * n + 5, sc = m * n + 2;
  auto A = random_vec<T>(static_cast<std::size_t>(std::max<std::int64_t>(count * sa, m * k) + 1), 31, -1, 1, true);
  auto B = random_vec<T>(static_cast<std::size_t>(count * sb + 1), 32, -1, 1, true);
  auto bv = random_vec<T>(static_cast<std::size_t>(n + 1), 33);
  expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
    std::vector<T> C(static_cast<std::size_t>(count * sc + 1), T(-7));
    kern::GemmBatchArgs<T> a;
    a.count = count, a.sa = sa, a.sb = sb, a.sc = sc;
    a.g.M = m, a.g.N = n, a.g.K = k;
    a.g.A = A.data(), a.g.rsa = ta ? 1 : k, a.g.csa = ta ? m : 1;
    a.g.B = B.data(), a.g.rsb = tb_ ? 1 : n, a.g.csb = tb_ ? k : 1;
    a.g.C = C.data(), a.g.ldc = n;
    a.g.bias = bias ? bv.data() : nullptr;
    if (tb.gemm_batch) {
      tb.gemm_batch(a);
    } else {
      for (std::int64_t i = 0; i < count; ++i) {
        kern::GemmArgs<T> g = a.g;
        g.A += i * sa, g.B += i * sb, g.C += i * sc;
        tb.gemm(g);
      }
    }
    return C;
  });
}

TEST(Gemm, BatchesEqualEachGemmAlone) {
  for (bool ta : {false, true})
    for (bool tb_ : {false, true}) {
      batch_case<float>(256, 32, 32, 32, ta, tb_, false, false);  // an attention's heads
      batch_case<double>(37, 7, 33, 31, ta, tb_, ta, !tb_);
      batch_case<float>(9, 13, 70, 65, ta, tb_, tb_, ta);
    }
  batch_case<float>(5, 129, 127, 33, false, true, false, true);  // large enough for gemm's own split
  batch_case<float>(6, 300, 3, 40, true, false, false, false);    // computed as C^T
  batch_case<float>(4, 5, 3, 0, false, false, false, true);       // k = 0: the bias alone
  batch_case<float>(0, 5, 3, 4, false, false, false, true);       // no GEMM at all
}

// Split-K ran: a small output over a long k is computed by more than one thread.
TEST(Gemm, SmallOutputsOverLongKSplitK) {
  const std::int64_t m = 1, n = 64, k = 8192;
  auto A = random_vec<float>(static_cast<std::size_t>(m * k), 8);
  auto B = random_vec<float>(static_cast<std::size_t>(k * n), 9);
  std::vector<float> C(static_cast<std::size_t>(m * n)), want(C.size());
  kern::GemmArgs<float> g;
  g.M = m, g.N = n, g.K = k, g.A = A.data(), g.rsa = k, g.csa = 1, g.B = B.data(), g.rsb = n, g.csb = 1, g.ldc = n;
  g.C = want.data();
  kern::table<float>(Isa::scalar).gemm(g);
  ExecContext ctx(4, best_isa());
  ExecScope scope(ctx);
  kern::reset_region_stats();
  g.C = C.data();
  kern::context_table_f32().gemm(g);
  EXPECT_GT(kern::region_stats().widest, 1);
  EXPECT_TRUE(bitwise_equal(want, C));
}

}  // namespace
}  // namespace bitgrad::test
