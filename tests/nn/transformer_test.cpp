// Transformer pieces: gradients of attention, the sequence cross-entropy, layer norm over
// [N, T, D] and the embedding with repeated ids (f64 finite differences, the shared harness);
// bit-identical results on every code path and thread count; a tiny GPT's loss and every
// gradient against PyTorch (tests/golden/gen_gpt_golden.py).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "bitgrad/nn.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

Tensor attention(V x, std::int64_t heads, double p = 0.0) {
  nn::Context ctx{true, 9, 4, 3};  // training: dropout keyed by (seed 9, step 4), rows from sample 3
  return nn::causal_self_attention(x[0], x[1], x[2], x[3], x[4], heads, p, 0, ctx);
}

std::vector<OpCase> cases() {
  Tensor tgt = i64_tensor({0, 4, 4, 1, 2, 3, 0, 0, 4, 1, 2, 2}, Shape{3, 4});
  Tensor ids = i64_tensor({4, 4, 4, 2, 1, 4, 0, 4}, Shape{2, 4});  // repeats within and across samples
  return {
      {"causal_self_attention(heads=2)", {{2, 5, 4}, {12, 4}, {12}, {4, 4}, {4}}, [](V x) { return attention(x, 2); }},
      {"causal_self_attention(heads=1)", {{1, 3, 6}, {18, 6}, {18}, {6, 6}, {6}}, [](V x) { return attention(x, 1); }},
      {"causal_self_attention(heads=3,dropout=0.3)", {{2, 4, 6}, {18, 6}, {18}, {6, 6}, {6}}, [](V x) { return attention(x, 3, 0.3); }},
      {"cross_entropy(sequences,mean)", {{3, 4, 5}}, [tgt](V x) { return cross_entropy(x[0], tgt); }, -2, 2},
      {"cross_entropy(sequences,sum)", {{3, 4, 5}}, [tgt](V x) { return cross_entropy(x[0], tgt, Reduction::sum); }, -2, 2},
      {"cross_entropy(sequences,none)", {{3, 4, 5}}, [tgt](V x) { return cross_entropy(x[0], tgt, Reduction::none); }, -2, 2},
      {"cross_entropy_sample_means(sequences)", {{3, 4, 5}}, [tgt](V x) { return cross_entropy_sample_means(x[0], tgt); }, -2, 2},
      {"layer_norm(tokens)", {{3, 4, 5}, {5}, {5}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }},
      {"embedding(repeated ids)", {{5, 3}}, [ids](V x) { return embedding(x[0], ids); }},
  };
}

TEST(Transformer, GradientsAndDeterminism) { run_all_modes(cases()); }

TEST(Transformer, AttentionIsSplitOverThreadsWithoutChangingABit) {
  std::vector<OpCase> big = {
      {"causal_self_attention(heads=4)", {{16, 32, 64}, {192, 64}, {192}, {64, 64}, {64}}, [](V x) { return attention(x, 4); }},
      {"cross_entropy(sequences,sum)", {{64, 32, 40}}, [](V x) {
         std::vector<std::int64_t> t(64 * 32);
         for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int64_t>((i * 7) % 40);
         return cross_entropy(x[0], i64_tensor(t, Shape{64, 32}), Reduction::sum);
       }},
      {"cross_entropy_sample_means(sequences)", {{64, 32, 40}}, [](V x) {
         std::vector<std::int64_t> t(64 * 32);
         for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int64_t>((i * 5) % 40);
         return cross_entropy_sample_means(x[0], i64_tensor(t, Shape{64, 32}));
       }},
  };
  check_split_determinism(big);
}

TEST(Transformer, ACausalPositionSeesNoLaterToken) {
  // changing the last token changes only the last position's output
  std::vector<Tensor> in = make_inputs({"a", {{2, 4, 4}, {12, 4}, {12}, {4, 4}, {4}}, nullptr}, DType::f64);
  const Tensor y0 = attention(in, 2);
  double* px = in[0].mutable_data<double>();
  px[3 * 4 + 1] += 1.0;  // sample 0, position 3
  const Tensor y1 = attention(in, 2);
  for (std::int64_t i = 0; i < 2 * 4 * 4; ++i) {
    const bool later = i < 16 && i / 4 == 3;
    if (!later) {
      EXPECT_EQ(y0.data<double>()[i], y1.data<double>()[i]) << "element " << i;
    }
  }
  EXPECT_NE(y0.data<double>()[3 * 4], y1.data<double>()[3 * 4]);
  EXPECT_THROW_MSG(nn::causal_self_attention(in[0], in[1], in[2], in[3], in[4], 3, 0, 0, nn::Context{}), "n_embd 4 is not divisible by n_head 3");
}

TEST(Transformer, ATinyGptMatchesPyTorch) {
  std::ifstream f(std::string(BITGRAD_SOURCE_DIR) + "/tests/golden/tiny_gpt.json");
  ASSERT_TRUE(f) << "missing tests/golden/tiny_gpt.json";
  const nlohmann::json doc = nlohmann::json::parse(f);
  const auto& s = doc["sizes"];
  const std::int64_t V = s["vocab"], T = s["block"], D = s["dim"], H = s["heads"], L = s["layers"], N = s["batch"];
  nn::Sequential model;
  model.add(std::make_shared<nn::TokenEmbedding>(V, T, D, 0.0, 0));
  for (std::int64_t b = 0; b < L; ++b) model.add(std::make_shared<nn::TransformerBlock>(D, H, 0.0, true, L, 1 + 3 * b));
  model.add(std::make_shared<nn::LayerNorm>(D));
  model.add(std::make_shared<nn::Linear>(D, V, false));
  auto params = model.named_parameters();
  ASSERT_EQ(params.size(), doc["params"].size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& p = doc["params"][i];
    ASSERT_EQ(params[i].first, p["name"].get<std::string>());
    std::vector<float> v;
    for (double d : p["value"].get<std::vector<double>>()) v.push_back(static_cast<float>(d));
    NoGradGuard ng;
    params[i].second.copy_from(Tensor::from<float>(v, params[i].second.shape()));
  }
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (const auto& row : doc["x"])
    for (std::int64_t t : row.get<std::vector<std::int64_t>>()) x.push_back(static_cast<float>(t));
  for (const auto& row : doc["y"])
    for (std::int64_t t : row.get<std::vector<std::int64_t>>()) y.push_back(t);
  Tensor loss = cross_entropy(model.forward(Tensor::from<float>(x, Shape{N, T}), nn::Context{}), Tensor::from<std::int64_t>(y, Shape{N, T}));
  // f32 against torch in f64 (the exact value for f32 purposes; the orders, so the last bits, differ).
  // The loss and every gradient are made of at most n values: the parameters, the N x T tokens, and
  // 16 elementwise roundings for each of a block's 12 ops and the 4 outside; no result combines more
  // terms, so f32 is within gamma(n) S of the exact value, S the loss / the gradient's largest
  // magnitude, gamma(n) = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability, §3; the argument
  // of tests/python/test_parity_ops.py, without torch's f32 error, which the golden file does not hold).
  std::size_t n = static_cast<std::size_t>(N * T + 16 * (12 * L + 4));
  for (const auto& p : doc["params"]) n += p["value"].size();
  const double nu = static_cast<double>(n) * std::ldexp(1.0, -24);
  const double gamma = nu / (1 - nu);
  EXPECT_NEAR(loss.item(), doc["loss"].get<double>(), gamma * std::fabs(doc["loss"].get<double>()));
  loss.backward();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> want = doc["params"][i]["grad"].get<std::vector<double>>();
    const std::vector<float> got = params[i].second.grad().to_vector<float>();
    ASSERT_EQ(got.size(), want.size()) << params[i].first;
    double s = 0;
    for (double w : want) s = std::max(s, std::fabs(w));
    for (std::size_t k = 0; k < got.size(); ++k)
      ASSERT_NEAR(got[k], want[k], gamma * (s > 0 ? s : 1.0)) << params[i].first << " element " << k;
  }
}

}  // namespace
}  // namespace bitgrad::test
