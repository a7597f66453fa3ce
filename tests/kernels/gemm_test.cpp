// GEMM: every fast path equals the scalar reference bit for bit, on odd shapes, all transposes,
// both canonical orders, with and without bias, at threads 1..8.
#include <cmath>
#include <sstream>

#include "support/kernel_check.hpp"

namespace bitgrad::test {
namespace {

struct GemmCase {
  std::int64_t m, n, k;
  bool ta, tb;
  kern::KOrder order;
  bool bias;
};

template <class T>
void run_case(const GemmCase& c) {
  std::ostringstream name;
  name << "gemm(" << tname(T{}) << ",m=" << c.m << ",n=" << c.n << ",k=" << c.k << ",ta=" << (c.ta ? 'T' : 'N')
       << ",tb=" << (c.tb ? 'T' : 'N') << ",order=" << (c.order == kern::KOrder::chain ? "chain" : "batch_tree")
       << ",bias=" << c.bias << ")";
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
    g.order = c.order;
    tb.gemm(g);
    return C;
  });
}

const kern::KOrder CH = kern::KOrder::chain, TR = kern::KOrder::batch_tree;

const GemmCase kCases[] = {
    {1, 1, 1, false, false, CH, false},      {7, 33, 1, false, true, CH, true},     {33, 7, 127, true, false, CH, false},
    {127, 129, 33, true, true, CH, true},    {129, 127, 511, false, false, CH, true}, {1, 785, 129, false, true, CH, false},
    {785, 1, 33, true, false, CH, true},     {64, 33, 7, false, false, CH, false},  {128, 512, 784, false, true, CH, true},
    {3, 2049, 5, false, false, CH, true},    {0, 5, 3, false, false, CH, true},     {5, 0, 3, false, false, CH, true},
    {5, 3, 0, false, false, CH, true},       {5, 3, 0, false, false, TR, false},    {1, 1, 1, false, false, TR, false},
    {7, 33, 31, true, false, TR, false},     {33, 7, 33, true, false, TR, false},   {127, 129, 128, true, false, TR, false},
    {129, 127, 129, true, true, TR, false},  {512, 784, 128, true, false, TR, false}, {17, 9, 4097, true, false, TR, false},
    {5, 31, 8193, false, true, TR, false},   {10, 1, 10000, true, false, TR, false},
    // shapes that pick the narrower tiles (6x32, 12x16 on AVX-512) directly or transposed
    {6, 25, 784, false, true, CH, true},    {16, 150, 100, false, true, CH, false}, {100, 16, 50, true, false, CH, true},
    {25, 6, 784, true, false, CH, false},   {6, 25, 784, false, true, TR, false},  {100, 16, 300, true, false, TR, false}, {785, 129, 257, false, false, TR, false},
};

TEST(Gemm, FastPathsEqualReferenceF32) {
  for (const auto& c : kCases) run_case<float>(c);
}

TEST(Gemm, FastPathsEqualReferenceF64) {
  for (const auto& c : kCases) run_case<double>(c);
}

// The reference itself against an independent evaluation of the documented orders.
TEST(Gemm, ReferenceFollowsTheDocumentedOrder) {
  const std::int64_t m = 3, n = 2, k = 70;
  auto A = random_vec<double>(static_cast<std::size_t>(m * k), 5);
  auto B = random_vec<double>(static_cast<std::size_t>(k * n), 6);
  std::vector<double> C(static_cast<std::size_t>(m * n));
  kern::GemmArgs<double> g;
  g.M = m, g.N = n, g.K = k, g.A = A.data(), g.rsa = k, g.csa = 1, g.B = B.data(), g.rsb = n, g.csb = 1, g.C = C.data(), g.ldc = n;
  g.order = kern::KOrder::batch_tree;
  kern::table<double>(Isa::scalar).gemm(g);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double blk[3] = {0, 0, 0};  // 70 = 32 + 32 + 6: ((b0 + b1) + b2)
      for (std::int64_t kk = 0; kk < k; ++kk) blk[kk / 32] = std::fma(A[i * k + kk], B[kk * n + j], blk[kk / 32]);
      double want = (blk[0] + blk[1]) + blk[2];
      EXPECT_EQ(std::bit_cast<std::uint64_t>(want), std::bit_cast<std::uint64_t>(C[i * n + j]));
    }
}

}  // namespace
}  // namespace bitgrad::test
