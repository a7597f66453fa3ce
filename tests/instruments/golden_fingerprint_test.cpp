// Pinned bits: golden fingerprints per numerics version. Each case reaches canonical orders and
// elementary functions of its own, so a numerics change anywhere makes one of them fail:
//   selftest   the 2-d MLP of `bitgrad selftest` (gradients of a small MLP)
//   layer norm forward and backward over tokens [N, T, D]
//   attention  causal self-attention forward and backward (softmax, masked products)
//   recurrent  an LSTM and a GRU layer over a sequence, forward and backward (f32 sigmoid, tanh)
//   CNN        4 training steps of examples/fashion_cnn.toml (conv, pooling, im2col/col2im)
//   GPT        4 training steps of examples/fortunes_gpt.toml in fp32, in bf16 with stochastic
//              rounding and in fp16 with dynamic loss scaling (mixed precision)
// The training cases are scripts/crosscheck.sh's runs (--steps 4 --threads 2 --workers 2, the
// same configurations), so their values are the fingerprints the crosscheck prints.
//
// When a change alters numerics on purpose: bump kNumericsVersion, document the change in
// docs/numerics.md, and add rows for the new version to kPinned below (keep the old rows: they
// record what each version computed). A case whose bits did not change gets the same value
// again. A failure without a version bump is a numerics change nobody meant: find it.
#include <fstream>
#include <sstream>

#include "bitgrad/bitgrad.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/nn.hpp"
#include "support/fashion.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

struct Pinned {
  int numerics;
  const char* name;
  const char* fingerprint;
};

// Versions 4, 5 and 6's values (the selftest's is also versions 1-3's: a 2-d MLP, which the version-2
// change to samples of several rows cannot reach; version 5 changed imported graphs only; version
// 6's blocked GEMM order and shorter row blocks moved every case with a GEMM, so all but layer norm).
constexpr Pinned kPinned[] = {
    {4, "selftest", "c05186ac5a6ae60f37c578add34da46f"},
    {4, "layer_norm", "2a34a078885a0238679ab0643da6f771"},
    {4, "attention", "9c9d437c0fd073ee88cecddd8be48b36"},
    {4, "cnn", "d514763dd146904f4a69331421bb2433"},
    {4, "gpt", "796a416d599f0a0e82b22bc8a8fafaea"},
    {4, "gpt-bf16", "0b8c1ae8df47bf1f2994bb7dc9f69de0"},
    {4, "gpt-fp16", "9b64eaf142ca39a087eb6d94f6332a44"},
    {5, "selftest", "c05186ac5a6ae60f37c578add34da46f"},
    {5, "layer_norm", "2a34a078885a0238679ab0643da6f771"},
    {5, "attention", "9c9d437c0fd073ee88cecddd8be48b36"},
    {5, "cnn", "d514763dd146904f4a69331421bb2433"},
    {5, "gpt", "796a416d599f0a0e82b22bc8a8fafaea"},
    {5, "gpt-bf16", "0b8c1ae8df47bf1f2994bb7dc9f69de0"},
    {5, "gpt-fp16", "9b64eaf142ca39a087eb6d94f6332a44"},
    {6, "selftest", "53416f4b6a6c5070f33f5558d241f40c"},
    {6, "layer_norm", "2a34a078885a0238679ab0643da6f771"},
    {6, "attention", "29e0473d290a4f5ec1607adf6551beba"},
    {6, "cnn", "e4d3b2a5bec3f89e34097c7b77e02756"},
    {6, "gpt", "1b8aa8e27b97edff67f67077e6686440"},
    {6, "gpt-bf16", "908962ef4d8b964370c0ea1881568c94"},
    {6, "gpt-fp16", "4f2b41242796854f5d515bb0210cc7e7"},
    // version 7: f32 sigmoid and tanh are f32 formulas (numerics §8): the selftest (tanh, sigmoid)
    // and the recurrent case (new here) moved
    {7, "selftest", "2d1790bdf957d2044e457553e9da4ead"},
    {7, "layer_norm", "2a34a078885a0238679ab0643da6f771"},
    {7, "attention", "29e0473d290a4f5ec1607adf6551beba"},
    {7, "recurrent", "3674f3de0a61c577dec0a6d28777889e"},
    {7, "cnn", "e4d3b2a5bec3f89e34097c7b77e02756"},
    {7, "gpt", "1b8aa8e27b97edff67f67077e6686440"},
    {7, "gpt-bf16", "908962ef4d8b964370c0ea1881568c94"},
    {7, "gpt-fp16", "4f2b41242796854f5d515bb0210cc7e7"},
};

// The pinned value of a case at this build's numerics version.
std::string pinned(const std::string& name) {
  for (const Pinned& p : kPinned)
    if (p.numerics == kNumericsVersion && p.name == name) return p.fingerprint;
  ADD_FAILURE() << "numerics version " << kNumericsVersion << " pins no fingerprint for '" << name
                << "': add its row to kPinned (see the comment at the top)";
  return "";
}

TEST(GoldenFingerprint, SelftestGradientsArePinned) {
  const std::string want = pinned("selftest");
  RuntimeGuard guard;
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_EQ(run_selftest().fingerprint.hex(), want) << "isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

// f32 inputs from Philox streams, marked as leaves.
std::vector<Tensor> leaves(const std::vector<Shape>& shapes, std::uint64_t seed) {
  std::vector<Tensor> v;
  for (const Shape& s : shapes) {
    Tensor t = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(s.numel()), seed++), s);
    t.set_requires_grad();
    v.push_back(t);
  }
  return v;
}

// The fingerprint of f's output and of every input's gradient under a seeded output gradient,
// checked on every code path and thread count against the pinned value.
void check_op(const std::string& name, const std::vector<Shape>& shapes, const std::function<Tensor(const std::vector<Tensor>&)>& f) {
  const std::string want = pinned(name);
  RuntimeGuard guard;
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      std::vector<Tensor> in = leaves(shapes, 100);
      Tensor y = f(in);
      y.backward(Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(y.shape().numel()), 99), y.shape()));
      std::vector<Tensor> all = {y};
      for (const Tensor& x : in) all.push_back(x.grad());
      EXPECT_EQ(fingerprint(all).hex(), want) << name << " isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

TEST(GoldenFingerprint, LayerNormIsPinned) {
  check_op("layer_norm", {{4, 9, 24}, {24}, {24}}, [](const std::vector<Tensor>& x) { return layer_norm(x[0], x[1], x[2]); });
}

TEST(GoldenFingerprint, AttentionIsPinned) {
  check_op("attention", {{3, 10, 16}, {48, 16}, {48}, {16, 16}, {16}}, [](const std::vector<Tensor>& x) {
    return nn::causal_self_attention(x[0], x[1], x[2], x[3], x[4], 4, 0.0, 0, nn::Context{true, 7, 1, 0});
  });
}

// An LSTM and a GRU layer (hidden 6, batch-first [3, 7, 5]); under no_grad (the kernels' fused
// path, b_hh added inside lstm_gates) the outputs are the recorded run's.
TEST(GoldenFingerprint, RecurrentIsPinned) {
  const auto layer = [](const std::vector<Tensor>& x, std::size_t at) {
    return std::vector<RnnParams>{RnnParams{x[at], x[at + 1], x[at + 2], x[at + 3]}};
  };
  const auto f = [&](const std::vector<Tensor>& x) {
    const Tensor l = rnn(x[0], RnnMode::lstm, layer(x, 1), Tensor(), Tensor(), true).output;
    const Tensor g = rnn(x[0], RnnMode::gru, layer(x, 5), Tensor(), Tensor(), true).output;
    return concat({l, g}, 2);
  };
  const std::vector<Shape> shapes = {{3, 7, 5}, {24, 5}, {24, 6}, {24}, {24}, {18, 5}, {18, 6}, {18}, {18}};
  check_op("recurrent", shapes, f);
  RuntimeGuard guard;
  const std::vector<Tensor> in = leaves(shapes, 100);
  const std::string recorded = fingerprint(f(in)).hex();
  NoGradGuard no_grad;
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_EQ(fingerprint(f(in)).hex(), recorded) << "no_grad isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f) << "cannot read " << path;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// scripts/crosscheck.sh's training run: `bitgrad train CONFIG --steps 4 --threads 2 --workers 2`.
std::string crosscheck_fingerprint(const std::string& config_text) {
  RuntimeGuard guard;
  return run_text(config_text, options(4, 2, 2)).fingerprint.hex();
}

std::string example(const std::string& name) { return read_text(std::string(BITGRAD_SOURCE_DIR) + "/examples/" + name); }

#define BITGRAD_NEED_FORTUNES()                                                                      \
  do {                                                                                               \
    if (::access("/usr/share/games/fortunes", R_OK)) GTEST_SKIP() << "fortunes is not installed (apt-get install fortunes)"; \
  } while (0)

// crosscheck.sh's sed: the precision lines after clip_grad_norm
std::string gpt_with(const std::string& precision_lines) {
  std::string t = example("fortunes_gpt.toml");
  const std::string anchor = "\nclip_grad_norm = 1.0\n";
  const std::size_t at = t.find(anchor);
  EXPECT_NE(at, std::string::npos) << "examples/fortunes_gpt.toml has no clip_grad_norm = 1.0 line";
  if (at != std::string::npos) t.insert(at + anchor.size(), precision_lines);
  return t;
}

TEST(GoldenTraining, CnnStepsArePinned) {
  BITGRAD_NEED_FASHION_MNIST();
  EXPECT_EQ(crosscheck_fingerprint(example("fashion_cnn.toml")), pinned("cnn"));
}

TEST(GoldenTraining, GptStepsArePinned) {
  BITGRAD_NEED_FORTUNES();
  EXPECT_EQ(crosscheck_fingerprint(example("fortunes_gpt.toml")), pinned("gpt"));
}

TEST(GoldenTraining, GptBf16StepsArePinned) {
  BITGRAD_NEED_FORTUNES();
  EXPECT_EQ(crosscheck_fingerprint(gpt_with("precision = \"bf16\"\nrounding = \"stochastic\"\n")), pinned("gpt-bf16"));
}

TEST(GoldenTraining, GptFp16StepsArePinned) {
  BITGRAD_NEED_FORTUNES();
  EXPECT_EQ(crosscheck_fingerprint(gpt_with("precision = \"fp16\"\n")), pinned("gpt-fp16"));
}

TEST(Fingerprint, ShapeDtypeAndValuesAllCount) {
  Tensor a = Tensor::from<float>(std::vector<float>{1, 2, 3, 4}, Shape{4});
  Tensor b = Tensor::from<float>(std::vector<float>{1, 2, 3, 4}, Shape{2, 2});
  Tensor c = Tensor::from<double>(std::vector<double>{1, 2, 3, 4}, Shape{4});
  Tensor d = Tensor::from<float>(std::vector<float>{1, 2, 3, 5}, Shape{4});
  EXPECT_NE(fingerprint(a), fingerprint(b));
  EXPECT_NE(fingerprint(a), fingerprint(c));
  EXPECT_NE(fingerprint(a), fingerprint(d));
  EXPECT_EQ(fingerprint(a), fingerprint(a.contiguous_copy()));
  EXPECT_EQ(fingerprint(a).hex().size(), 32u);
  Tensor z = Tensor::from<float>(std::vector<float>{0.0f}, Shape{1}), nz = Tensor::from<float>(std::vector<float>{-0.0f}, Shape{1});
  EXPECT_NE(fingerprint(z), fingerprint(nz)) << "bits, not values: -0 and +0 differ";
}

}  // namespace
}  // namespace bitgrad::test
