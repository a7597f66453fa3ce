// Order perturbation of the layer and optimizer kernels (numerics.md §19): the entries that add
// several values (layer norm, average pooling, the pooling gradients, col2im) give other bits,
// by rounding only, and the same bits on every code path and thread count; the ones that do
// not add (max pooling, im2col, the updates) are untouched.
#include <cmath>
#include <functional>
#include <sstream>

#include "support/kernel_check.hpp"

namespace bitgrad::test {
namespace {

struct PerturbGuard {
  ~PerturbGuard() { kern::set_perturbation(false); }
};

using Run = std::function<std::vector<float>(const kern::Table<float>&)>;

// The kernel on the active table with perturbation seed 7 at step 3 (call count from 0).
std::vector<float> perturbed(const Run& run) {
  PerturbGuard pg;
  kern::set_perturbation(true, 7);
  kern::perturb_step(3);
  return run(kern::active<float>());
}

// max |a - b| / max(1, |a|) over the elements
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])) / std::fmax(1.0, std::fabs(static_cast<double>(a[i])));
    m = std::fmax(m, d);
  }
  return m;
}

void check(const std::string& name, bool reduces, const Run& run) {
  RuntimeGuard guard;
  set_isa(Isa::scalar);
  set_num_threads(1);
  const std::vector<float> canonical = run(kern::table<float>(Isa::scalar));
  const std::vector<float> want = perturbed(run);
  if (reduces) {
    EXPECT_FALSE(bitwise_equal(canonical, want)) << name << ": the perturbed order gives the canonical bits";
    EXPECT_LT(rel_diff(canonical, want), 1e-5) << name << ": the same terms in another order differ by rounding only";
  } else {
    EXPECT_TRUE(bitwise_equal(canonical, want)) << name << " adds nothing, so no order may change it";
  }
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_TRUE(bitwise_equal(want, perturbed(run))) << name << " isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

TEST(Perturb, LayerNormRowsArePerturbedAndReproducible) {
  const std::int64_t R = 64, D = 300;
  const auto x = random_vec<float>(static_cast<std::size_t>(R * D), 81, -3, 5);
  const auto g = random_vec<float>(static_cast<std::size_t>(R * D), 82);
  const auto gamma = random_vec<float>(static_cast<std::size_t>(D), 83), beta = random_vec<float>(static_cast<std::size_t>(D), 84);
  check("layer_norm_rows", true, [&](const kern::Table<float>& tb) {
    std::vector<float> y(x.size()), mean(static_cast<std::size_t>(R)), rstd(static_cast<std::size_t>(R));
    tb.layer_norm_rows(x.data(), gamma.data(), beta.data(), R, D, 1e-5f, y.data(), mean.data(), rstd.data());
    y.insert(y.end(), mean.begin(), mean.end());
    y.insert(y.end(), rstd.begin(), rstd.end());
    return y;
  });
  const auto rstd = random_vec<float>(static_cast<std::size_t>(R), 85, 0.5, 2);
  check("layer_norm_grad_rows", true, [&](const kern::Table<float>& tb) {
    std::vector<float> dx(x.size());
    tb.layer_norm_grad_rows(g.data(), x.data(), gamma.data(), rstd.data(), R, D, dx.data());
    return dx;
  });
}

TEST(Perturb, PoolingAndCol2imSumsArePerturbed) {
  // overlapping 3x3 windows at stride 1: up to 9 terms per pixel
  const kern::PoolShape ps{6, 12, 11, 3, 1, 10, 9};
  const auto x = random_vec<float>(static_cast<std::size_t>(ps.planes * ps.H * ps.W), 91, -2, 2);
  const auto g = random_vec<float>(static_cast<std::size_t>(ps.planes * ps.OH * ps.OW), 92, -2, 2);
  std::vector<std::int64_t> idx(g.size());
  std::vector<float> ymax(g.size());
  kern::table<float>(Isa::scalar).max_pool(x.data(), ps, ymax.data(), idx.data());
  check("avg_pool", true, [&](const kern::Table<float>& tb) {
    std::vector<float> y(g.size());
    tb.avg_pool(x.data(), ps, y.data());
    return y;
  });
  check("avg_pool_grad", true, [&](const kern::Table<float>& tb) {
    std::vector<float> dx(x.size());
    tb.avg_pool_grad(g.data(), ps, dx.data());
    return dx;
  });
  check("max_pool_grad", true, [&](const kern::Table<float>& tb) {
    std::vector<float> dx(x.size());
    tb.max_pool_grad(g.data(), idx.data(), ps, dx.data());
    return dx;
  });
  check("max_pool", false, [&](const kern::Table<float>& tb) {
    std::vector<float> y(g.size());
    std::vector<std::int64_t> ix(g.size());
    tb.max_pool(x.data(), ps, y.data(), ix.data());
    for (std::int64_t i : ix) y.push_back(static_cast<float>(i));
    return y;
  });
  const kern::ConvShape cs{3, 9, 10, 3, 3, 9, 10, 1, 1};
  const std::size_t nc = static_cast<std::size_t>(cs.C * cs.KH * cs.KW * cs.OH * cs.OW);
  const auto dc = random_vec<float>(nc, 93, -2, 2);
  const auto xi = random_vec<float>(static_cast<std::size_t>(cs.C * cs.H * cs.W), 94, -2, 2);
  check("col2im", true, [&](const kern::Table<float>& tb) {
    std::vector<float> dx(xi.size());
    tb.col2im(dc.data(), cs, dx.data());
    return dx;
  });
  check("im2col", false, [&](const kern::Table<float>& tb) {
    std::vector<float> cols(nc);
    tb.im2col(xi.data(), cs, cols.data());
    return cols;
  });
}

TEST(Perturb, OptimizerUpdatesAreUntouched) {
  const std::size_t n = 40000;
  const auto p0 = random_vec<float>(n, 95), g = random_vec<float>(n, 96);
  check("sgd_update", false, [&](const kern::Table<float>& tb) {
    std::vector<float> p = p0, v(n, 0.0f);
    tb.sgd_update(p.data(), g.data(), v.data(), static_cast<std::int64_t>(n), kern::SgdCoef<float>{0.1f, 0.9f, 0.01f, true, true});
    p.insert(p.end(), v.begin(), v.end());
    return p;
  });
  check("adam_update", false, [&](const kern::Table<float>& tb) {
    std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
    const kern::AdamCoef<float> c{0.9f, 0.999f, 0.1f, 0.001f, 0.01f, 0.05f, 1e-8f, 0.1f, 0.999f, true, true};
    tb.adam_update(p.data(), g.data(), m.data(), v.data(), static_cast<std::int64_t>(n), c);
    p.insert(p.end(), m.begin(), m.end());
    return p;
  });
}

}  // namespace
}  // namespace bitgrad::test
