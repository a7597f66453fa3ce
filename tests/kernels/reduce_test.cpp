// Reductions (row rule, batch rule) and the softmax family: fast paths equal the reference
// bit for bit; the reference equals the documented orders.
#include <sstream>

#include "support/kernel_check.hpp"

namespace bitgrad::test {
namespace {

const std::pair<std::int64_t, std::int64_t> kRowShapes[] = {{1, 0}, {3, 1}, {5, 7}, {7, 16}, {2, 17}, {4, 33},
                                                            {3, 1023}, {2, 1025}, {1, 5000}, {129, 10}, {300, 512},
                                                            {2, 127}, {2, 128}, {3, 129}, {2, 255}, {2, 257}, {1, 16 * 128 + 3}};

template <class T>
void row_cases() {
  for (auto [R, L] : kRowShapes) {
    const std::size_t n = static_cast<std::size_t>(R * L);
    auto x = random_vec<T>(n, 7, -20, 20, true);
    auto y = random_vec<T>(n, 8, -2, 2, true);
    std::vector<std::int64_t> t(static_cast<std::size_t>(R));
    for (std::int64_t r = 0; r < R; ++r) t[static_cast<std::size_t>(r)] = L ? (r * 7) % L : 0;
    std::ostringstream sh;
    sh << tname(T{}) << ",R=" << R << ",L=" << L << ")";
    auto run = [&](const char* what, auto f) {
      expect_fast_equals_reference<T>(std::string(what) + "(" + sh.str(), f);
    };
    run("sum_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(static_cast<std::size_t>(R));
      tb.sum_rows(x.data(), R, L, o.data());
      return o;
    });
    run("sumsq_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(static_cast<std::size_t>(R));
      tb.sumsq_rows(x.data(), y.data(), R, L, o.data());
      return o;
    });
    run("sumsq_rows_single", [&](const kern::Table<T>& tb) {
      std::vector<T> o(static_cast<std::size_t>(R));
      tb.sumsq_rows(x.data(), nullptr, R, L, o.data());
      return o;
    });
    if (L == 0) continue;
    run("softmax_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(n);
      tb.softmax_rows(x.data(), R, L, o.data());
      return o;
    });
    run("log_softmax_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(n);
      tb.log_softmax_rows(x.data(), R, L, o.data());
      return o;
    });
    run("softmax_grad_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(n);
      tb.softmax_grad_rows(x.data(), y.data(), R, L, o.data());
      return o;
    });
    run("log_softmax_grad_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(n);
      tb.log_softmax_grad_rows(x.data(), y.data(), R, L, o.data());
      return o;
    });
    run("xent_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(static_cast<std::size_t>(R));
      tb.xent_rows(x.data(), t.data(), R, L, o.data());
      return o;
    });
    run("xent_grad_rows", [&](const kern::Table<T>& tb) {
      std::vector<T> o(n);
      tb.xent_grad_rows(x.data(), t.data(), R, L, T(0.37), o.data());
      return o;
    });
  }
}

// A lane whose fma terms all underflow to -0 must stay -0 where a short last group does not
// reach it (the reference leaves it alone): padding it with fma(0, 0, -0) = +0 flipped the sign
// of softmax_grad's dot, and so of gx where gy is -0.
template <class T>
void negative_zero_lanes() {
  const T tiny = sizeof(T) == 4 ? T(1e-30) : T(1e-200);
  for (std::int64_t L : {17, 33, 128 + 21, 1024 + 21}) {  // a short group after a full one in the row's last block
    // every product -tiny * tiny rounds to -0, so every lane of the reference holds -0
    std::vector<T> y(static_cast<std::size_t>(L), tiny), g(static_cast<std::size_t>(L), -tiny);
    g.back() = T(-0.0);
    expect_fast_equals_reference<T>("softmax_grad_rows(-0 lanes, L=" + std::to_string(L) + ")", [&](const kern::Table<T>& tb) {
      std::vector<T> o(static_cast<std::size_t>(L));
      tb.softmax_grad_rows(y.data(), g.data(), 1, L, o.data());
      return o;
    });
    std::vector<T> o(static_cast<std::size_t>(L));
    kern::table<T>(Isa::scalar).softmax_grad_rows(y.data(), g.data(), 1, L, o.data());
    EXPECT_FALSE(std::signbit(o.back())) << "gy = -0 minus a dot of -0 is +0, L=" << L;
  }
}
TEST(Reduce, ShortGroupsLeaveNegativeZeroLanesAlone) {
  negative_zero_lanes<float>();
  negative_zero_lanes<double>();
}

TEST(Reduce, RowKernelsF32) { row_cases<float>(); }
TEST(Reduce, RowKernelsF64) { row_cases<double>(); }

template <class T>
void col_cases() {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{0, 3}, {1, 1}, {31, 7}, {32, 33}, {33, 127}, {129, 5}, {1000, 513}, {10000, 10}};
  for (auto [R, C] : shapes) {
    auto x = random_vec<T>(static_cast<std::size_t>(R * C), 9, -3, 3, true);
    std::ostringstream name;
    name << "sum_cols(" << tname(T{}) << ",R=" << R << ",C=" << C << ")";
    expect_fast_equals_reference<T>(name.str(), [&](const kern::Table<T>& tb) {
      std::vector<T> o(static_cast<std::size_t>(C));
      tb.sum_cols(x.data(), R, C, o.data());
      return o;
    });
  }
}

TEST(Reduce, ColumnKernelsF32) { col_cases<float>(); }
TEST(Reduce, ColumnKernelsF64) { col_cases<double>(); }

// sum_mid: the row rule down the middle axis of [A, L, K] equals sum_rows of the same data with
// that axis moved last (its definition, on the scalar reference), and the fast paths equal the
// reference: L around the row rule's lanes (16) and blocks (128), K around a vector and a group
// of vectors (sum_mid_fast's 8), specials.
template <class T>
void mid_cases() {
  for (std::int64_t A : {1, 3})
    for (std::int64_t L : {0, 1, 15, 16, 17, 32, 128, 129, 300})
      for (std::int64_t K : {1, 7, 16, 33, 70, 128, 129, 300}) {
        const auto x = random_vec<T>(static_cast<std::size_t>(A * L * K), 51 + static_cast<std::uint64_t>(L), -1, 1, true);
        std::ostringstream name;
        name << "sum_mid(" << tname(T{}) << ",A=" << A << ",L=" << L << ",K=" << K << ")";
        auto run = [&](const kern::Table<T>& tb) {
          std::vector<T> out(static_cast<std::size_t>(A * K), T(-7));
          tb.sum_mid(x.data(), A, L, K, out.data());
          return out;
        };
        expect_fast_equals_reference<T>(name.str(), run);
        ExecContext ref(1, Isa::scalar);
        ExecScope scope(ref);
        const kern::Table<T>& tb = kern::table<T>(Isa::scalar);
        std::vector<T> rows(static_cast<std::size_t>(A * K * L)), want(static_cast<std::size_t>(A * K), T(0));
        for (std::int64_t a = 0; a < A; ++a)
          for (std::int64_t l = 0; l < L; ++l)
            for (std::int64_t k = 0; k < K; ++k) rows[static_cast<std::size_t>((a * K + k) * L + l)] = x[static_cast<std::size_t>((a * L + l) * K + k)];
        if (L > 0) tb.sum_rows(rows.data(), A * K, L, want.data());
        EXPECT_TRUE(bitwise_equal(want, run(tb))) << name.str() << ": not sum_rows of the moved axis";
      }
}
TEST(Reduce, MiddleAxisF32) { mid_cases<float>(); }
TEST(Reduce, MiddleAxisF64) { mid_cases<double>(); }

TEST(Reduce, RowRuleIsTheDocumentedOrder) {
  // L = 40: lanes j take j, j+16, j+32; fold h = 8, 4, 2, 1
  auto x = random_vec<float>(40, 3);
  float lanes[16] = {};
  for (int i = 0; i < 40; ++i) lanes[i % 16] = lanes[i % 16] + x[static_cast<std::size_t>(i)];
  for (int h = 8; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) lanes[j] = lanes[j] + lanes[j + h];
  float got = 0;
  kern::table<float>(Isa::scalar).sum_rows(x.data(), 1, 40, &got);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(lanes[0]), std::bit_cast<std::uint32_t>(got));
}

TEST(Reduce, BatchRuleIsTheDocumentedOrder) {
  // 7 blocks of 32 rows (the last short): ((b0+b1)+(b2+b3)) + ((b4+b5) + b6)
  const int R = 200;
  auto x = random_vec<float>(R, 4);
  float b[7] = {};
  for (int r = 0; r < R; ++r) b[r / 32] = b[r / 32] + x[static_cast<std::size_t>(r)];
  float want = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + b[6]);
  float got = 0;
  kern::table<float>(Isa::scalar).sum_cols(x.data(), R, 1, &got);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(want), std::bit_cast<std::uint32_t>(got));
}

// A complete aligned subtree is a sum of its own: splitting the batch into micro-batches of a
// power-of-two number of blocks and combining them by the same tree gives the same bits (T5).
TEST(Reduce, AlignedSubtreesCombineToTheWholeBatch) {
  const int R = 256;  // 8 blocks
  auto x = random_vec<float>(R, 5, -1, 1, true);
  float whole = 0;
  kern::table<float>(Isa::scalar).sum_cols(x.data(), R, 1, &whole);
  for (int parts : {2, 4, 8}) {
    kern::PairwiseStack<float> st;
    for (int p = 0; p < parts; ++p) {
      float s = 0;
      kern::table<float>(Isa::scalar).sum_cols(x.data() + p * (R / parts), R / parts, 1, &s);
      st.push(s);
    }
    EXPECT_EQ(std::bit_cast<std::uint32_t>(whole), std::bit_cast<std::uint32_t>(st.total())) << "parts=" << parts;
  }
}

}  // namespace
}  // namespace bitgrad::test
