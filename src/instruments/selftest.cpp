// Selftest network: x [129, 64] -> linear 96 -> gelu -> linear 48 -> tanh -> linear 10 = z;
// loss = cross_entropy(z, y) + 0.5 * mse_loss(sigmoid(z), t). 129 samples: four full
// canonical blocks and a partial one. Every value comes from named Philox streams.
#include "bitgrad/selftest.hpp"

#include "bitgrad/autograd.hpp"
#include "bitgrad/ops.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad {
namespace {
constexpr std::uint64_t kSeed = 20261121;

Tensor normal(const Shape& s, const char* stream, float scale) {
  Tensor t = Tensor::empty(s, DType::f32);
  rng::Stream(kSeed, stream).fill_normal(t.mutable_data<float>(), t.numel(), 0, 0.0f, scale);
  return t;
}
}  // namespace

SelftestResult run_selftest() {
  const std::int64_t N = 129, D0 = 64, D1 = 96, D2 = 48, C = 10;
  Tensor x = normal({N, D0}, "selftest.x", 1.0f);
  Tensor y = Tensor::empty({N}, DType::i64);
  Tensor t = Tensor::empty({N, C}, DType::f32);
  {
    rng::Stream s(kSeed, "selftest.y");
    std::int64_t* py = y.mutable_data<std::int64_t>();
    for (std::int64_t i = 0; i < N; ++i) py[i] = static_cast<std::int64_t>(s.below(static_cast<std::uint64_t>(i), C));
    rng::Stream(kSeed, "selftest.t").fill_uniform(t.mutable_data<float>(), t.numel(), 0, 0.0f, 1.0f);
  }
  std::vector<std::pair<std::string, Tensor>> params = {
      {"w1", normal({D1, D0}, "selftest.w1", 0.125f)}, {"b1", normal({D1}, "selftest.b1", 0.1f)},
      {"w2", normal({D2, D1}, "selftest.w2", 0.1f)},   {"b2", normal({D2}, "selftest.b2", 0.1f)},
      {"w3", normal({C, D2}, "selftest.w3", 0.15f)},   {"b3", normal({C}, "selftest.b3", 0.1f)}};
  for (auto& [name, p] : params) p.set_requires_grad(true);
  auto P = [&](int i) { return params[static_cast<std::size_t>(i)].second; };

  Tensor h1 = gelu(linear(x, P(0), P(1)));
  Tensor h2 = tanh(linear(h1, P(2), P(3)));
  Tensor z = linear(h2, P(4), P(5));
  Tensor loss = add(cross_entropy(z, y), mul(mse_loss(sigmoid(z), t), 0.5));
  loss.backward();

  SelftestResult r;
  r.model = "mlp 64-96-48-10 (gelu, tanh), loss cross_entropy + 0.5 mse(sigmoid), batch 129, f32";
  r.loss = loss.item();
  Fingerprint all;
  for (auto& [name, p] : params) {
    Tensor g = p.grad();
    r.gradients.emplace_back(name, fingerprint(g));
    all.add(g);
  }
  r.fingerprint = all.digest();
  return r;
}

}  // namespace bitgrad
