// Optimizers against their documented formulas (exact bits), schedules, clipping, state.
#include <bit>
#include <cmath>
#include <memory>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/math.hpp"
#include "bitgrad/optim.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

Tensor param(std::vector<float> v) {
  Tensor t = Tensor::from<float>(v, Shape{static_cast<std::int64_t>(v.size())});
  t.set_requires_grad(true);
  return t;
}
void set_grad(Tensor& p, std::vector<float> g) { p.set_grad(Tensor::from<float>(g, p.shape())); }

TEST(Optim, SgdMomentumNesterovWeightDecay) {
  Tensor p = param({1.0f, -2.0f});
  optim::Sgd sgd({{"p", p}}, {0.9, 0.01, true});
  set_grad(p, {0.5f, 0.25f});
  sgd.step(0.1);
  set_grad(p, {-0.5f, 1.0f});
  sgd.step(0.1);
  // by hand, in f32, in the documented order
  float x[2] = {1.0f, -2.0f}, v[2] = {0, 0};
  const float g1[2] = {0.5f, 0.25f}, g2[2] = {-0.5f, 1.0f};
  for (const float* g : {g1, g2})
    for (int k = 0; k < 2; ++k) {
      const float gk = g[k] + 0.01f * x[k];
      v[k] = 0.9f * v[k] + gk;
      const float d = gk + 0.9f * v[k];
      x[k] = x[k] - 0.1f * d;
    }
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{x[0], x[1]}));
  EXPECT_EQ(sgd.steps(), 2);
}

TEST(Optim, AdamFirstSteps) {
  Tensor p = param({0.5f});
  optim::Adam adam({{"p", p}}, {0.9, 0.999, 1e-8, 0.1, true});
  float x = 0.5f, m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    const float g = 0.3f * static_cast<float>(t);
    set_grad(p, {g});
    adam.step(0.01);
    const float c1 = static_cast<float>(0.01 / (1.0 - math::pow(0.9, t)));
    const float s2 = static_cast<float>(math::sqrt(1.0 - math::pow(0.999, t)));
    x = x * static_cast<float>(1.0 - 0.01 * 0.1);
    m = 0.9f * m + static_cast<float>(1.0 - 0.9) * g;
    v = 0.999f * v + static_cast<float>(1.0 - 0.999) * (g * g);
    x = x - c1 * (m / (std::sqrt(v) / s2 + 1e-8f));
    EXPECT_EQ(p.to_vector<float>()[0], x) << "step " << t;
  }
}

TEST(Optim, UpdatesSplitOverThreadsGiveTheSameBits) {
  // the updates run in chunks on the kernel threads; a parameter of several chunks (and an odd
  // size) must come out the same at every thread count, for every update formula
  RuntimeGuard guard;
  const std::size_t n = 100003;
  const std::vector<float> p0 = random_vec<float>(n, 1), g0 = random_vec<float>(n, 2), g1 = random_vec<float>(n, 3);
  auto run = [&](int kind) {
    Tensor p = param(p0);
    std::unique_ptr<optim::Optimizer> o;
    if (kind == 0) o = std::make_unique<optim::Sgd>(optim::NamedTensors{{"p", p}}, optim::SgdOptions{0.9, 0.01, true});
    else if (kind == 1) o = std::make_unique<optim::Sgd>(optim::NamedTensors{{"p", p}}, optim::SgdOptions{0.0, 0.0, false});
    else o = std::make_unique<optim::Adam>(optim::NamedTensors{{"p", p}}, optim::AdamOptions{0.9, 0.999, 1e-8, 0.1, kind == 3});
    for (const auto* g : {&g0, &g1, &g0}) {
      set_grad(p, *g);
      o->step(0.05);
    }
    return p.to_vector<float>();
  };
  for (int kind = 0; kind < 4; ++kind) {
    set_num_threads(1);
    const std::vector<float> want = run(kind);
    for (int t : thread_counts()) {
      set_num_threads(t);
      const std::vector<float> got = run(kind);
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i])) << "kind " << kind << " threads " << t << " element " << i;
    }
  }
}

TEST(Optim, Schedules) {
  optim::Schedule s;
  s.lr = 0.1;
  EXPECT_EQ(s.at(0), 0.1);
  s.kind = optim::Schedule::Kind::step;
  s.gamma = 0.5;
  s.step_size = 10;
  EXPECT_EQ(s.at(9), 0.1);
  EXPECT_EQ(s.at(25), 0.025);
  s.kind = optim::Schedule::Kind::cosine;
  s.total_steps = 100;
  s.min_lr = 0.0;
  EXPECT_EQ(s.at(0), 0.1);
  EXPECT_NEAR(s.at(50), 0.05, 1e-15);
  EXPECT_EQ(s.at(100), 0.0);
  EXPECT_EQ(s.at(150), 0.0);
  s.warmup_steps = 4;
  EXPECT_EQ(s.at(0), 0.1 * 0.25);
}

TEST(Optim, ClipGradNorm) {
  Tensor a = param({3.0f, 0.0f}), b = param({4.0f});
  set_grad(a, {3.0f, 0.0f});
  set_grad(b, {4.0f});
  EXPECT_EQ(optim::grad_norm({a, b}), 5.0);
  EXPECT_EQ(optim::clip_grad_norm({a, b}, 10.0), 5.0);
  EXPECT_EQ(b.grad().to_vector<float>()[0], 4.0f) << "below the limit: untouched";
  optim::clip_grad_norm({a, b}, 1.0);
  const float c = static_cast<float>(1.0 / (5.0 + 1e-6));
  EXPECT_EQ(a.grad().to_vector<float>()[0], 3.0f * c);
  EXPECT_EQ(b.grad().to_vector<float>()[0], 4.0f * c);
}

// Clipping scales every gradient element by c on the vector kernels: each element is g * c
// rounded, on every code path and thread count (an odd length, signed zeros, subnormals)
TEST(Optim, ClipScalesEveryElementOnEveryCodePath) {
  const std::size_t n = 70001;
  std::vector<float> g = random_vec<float>(n, 31, -3, 3);  // no huge values: the norm stays finite
  g[1] = -0.0f;
  g[2] = 1e-40f;  // subnormal, and its product too
  g[3] = -3e-39f;
  g[4] = 0.0f;
  g[n - 1] = 2.5f;  // the last element scaled too
  const std::vector<Isa> absent = for_each_context(true, [&](Device, Isa isa, int t) {
    Tensor p = Tensor::zeros(Shape{static_cast<std::int64_t>(n)});
    p.set_requires_grad(true);
    set_grad(p, g);
    const double norm = optim::clip_grad_norm({p}, 1.0);
    const float c = static_cast<float>(1.0 / (norm + 1e-6));
    ASSERT_TRUE(c > 0.0f && c < 1.0f) << "the case must clip, by a finite factor: " << c;
    const std::vector<float> got = p.grad().to_vector<float>();
    std::size_t bad = 0;
    for (std::size_t k = 0; k < n; ++k) {
      if (std::bit_cast<std::uint32_t>(got[k]) != std::bit_cast<std::uint32_t>(g[k] * c)) ++bad;
    }
    EXPECT_EQ(bad, 0u) << "isa=" << isa_name(isa) << " threads=" << t;
  });
  BITGRAD_SAY_COMPARED(absent, "clip_grad_norm");
}

TEST(Optim, StateRoundTrip) {
  Tensor p = param({1.0f, 2.0f});
  optim::Sgd a({{"p", p}}, {0.9, 0.0, false});
  set_grad(p, {1.0f, 1.0f});
  a.step(0.1);
  Tensor q = param({1.0f, 2.0f});
  optim::Sgd b({{"p", q}}, {0.9, 0.0, false});
  b.load_state(a.state(), a.steps());
  EXPECT_EQ(fingerprint(b.state()[0].second), fingerprint(a.state()[0].second));
  EXPECT_EQ(b.steps(), 1);
  optim::NamedTensors bad = {{"momentum.p", Tensor::zeros({3})}};
  EXPECT_THROW(b.load_state(bad, 1), Error);
  EXPECT_THROW(b.load_state({}, 1), Error);
}

}  // namespace
}  // namespace bitgrad::test
