// The normalisation and recurrent layers as modules and in the configuration's
// layer list: parameter names and order (PyTorch's), initialisation keyed by the parameter index,
// output shapes, and trainings whose fingerprints hold over threads (and micro-batches where
// numerics.md §33/§34 promise T5).
#include "support/op_harness.hpp"
#include "support/runs.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {
namespace {

TEST(NormRnnLayers, RecurrentParametersAsPyTorch) {
  nn::Recurrent lstm(RnnMode::lstm, 3, 5, 2);
  const auto named = lstm.named_parameters();
  const std::vector<std::string> want = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                                         "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"};
  ASSERT_EQ(named.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(named[i].first, want[i]);
  EXPECT_EQ(named[0].second.shape(), (Shape{20, 3}));
  EXPECT_EQ(named[4].second.shape(), (Shape{20, 5}));
  EXPECT_EQ(named[5].second.shape(), (Shape{20, 5}));
  nn::initialize(lstm, nn::Init::kaiming_uniform, 7);
  const double bound = 1.0 / std::sqrt(5.0);
  for (const auto& [name, t] : named)
    for (float v : t.to_vector<float>()) EXPECT_LE(std::abs(v), static_cast<float>(bound)) << name;
  // parameter j draws from (seed, "init").sub(j): the bias of layer 1 is stream 6's
  Tensor b = Tensor::zeros(Shape{20});
  rng::Stream(7, "init").sub(6).fill_uniform(b.mutable_data<float>(), 20, 0, static_cast<float>(-bound), static_cast<float>(bound));
  EXPECT_TRUE(bitwise_equal(named[6].second.to_vector<float>(), b.to_vector<float>()));
  EXPECT_EQ(lstm.output_shape(Shape{4, 6, 3}), (Shape{4, 6, 5}));
  nn::Recurrent gru(RnnMode::gru, 3, 5, 1, false, false, true);
  EXPECT_EQ(gru.parameters().size(), 2u);
  EXPECT_EQ(gru.output_shape(Shape{6, 4, 3}), (Shape{4, 5}));  // sequence first, the last step
  nn::initialize(gru, nn::Init::kaiming_uniform, 1);
  Tensor x = Tensor::from<float>(random_vec<float>(72, 3, -1, 1), Shape{6, 4, 3});
  const RnnResult r = gru.run(x);
  EXPECT_TRUE(bitwise_equal(gru.forward(x, {}).to_vector<float>(), slice(r.output, 0, 5, 6).to_vector<float>()));
}

// forward_steps over a sequence cut in pieces (the server's decoding: a prompt, then a token at a
// time) gives forward's bits for the whole, for every recurrent kind; layers that cannot (sequence
// first, the last step only) say so.
TEST(NormRnnLayers, StepsContinuedFromTheStateAreTheWholeSequencesBits) {
  for (const RnnMode mode : {RnnMode::lstm, RnnMode::gru, RnnMode::rnn_tanh}) {
    nn::Recurrent rec(mode, 3, 5, 2);
    nn::initialize(rec, nn::Init::kaiming_uniform, 4);
    ASSERT_TRUE(rec.carries_state());
    const Tensor x = Tensor::from<float>(random_vec<float>(21, 9, -1, 1), Shape{1, 7, 3});
    const std::vector<float> whole = contiguous(rec.forward(x, {})).to_vector<float>();
    std::vector<Tensor> state;
    std::vector<float> pieces;
    for (const auto& [t0, t1] : {std::pair{0, 4}, std::pair{4, 5}, std::pair{5, 6}, std::pair{6, 7}}) {
      const std::vector<float> part = contiguous(rec.forward_steps(slice(x, 1, t0, t1), state, {})).to_vector<float>();
      pieces.insert(pieces.end(), part.begin(), part.end());
    }
    EXPECT_TRUE(bitwise_equal(pieces, whole)) << static_cast<int>(mode);
    EXPECT_EQ(state.size(), mode == RnnMode::lstm ? 2u : 1u);
  }
  nn::Recurrent last(RnnMode::lstm, 3, 5, 1, true, true, true), seq_first(RnnMode::lstm, 3, 5, 1, true, false);
  EXPECT_FALSE(last.carries_state());
  EXPECT_FALSE(seq_first.carries_state());
  std::vector<Tensor> state;
  EXPECT_THROW_MSG(last.forward_steps(Tensor::zeros(Shape{1, 2, 3}), state, {}), "forward_steps needs batch_first");
}

TEST(NormRnnLayers, NormModules) {
  nn::GroupNorm g(2, 4);
  EXPECT_EQ(g.named_parameters()[0].first, "gamma");
  EXPECT_EQ(g.output_shape(Shape{3, 4, 5, 5}), (Shape{3, 4, 5, 5}));
  EXPECT_THROW(g.output_shape(Shape{3, 6, 5}), Error);
  nn::GroupNorm inst(0, 4, 1e-5, false, true);
  EXPECT_TRUE(inst.parameters().empty());
  EXPECT_EQ(inst.describe(), "InstanceNorm(4, no affine)");
  nn::RMSNorm r({8});
  EXPECT_EQ(r.describe(), "RMSNorm(8)");
  EXPECT_EQ(r.output_shape(Shape{2, 3, 8}), (Shape{2, 3, 8}));
  EXPECT_THROW(r.output_shape(Shape{2, 7}), Error);
}

const char* kImages = R"(
seed = 5
[data]
dataset = "synthetic"
samples = 256
shape = [4, 6, 6]
classes = 3
[model]
layers = [
  { type = "conv2d", out = 8, kernel = 3, padding = 1 },
  { type = "groupnorm", groups = 4 },
  { type = "relu" },
  { type = "instancenorm", affine = true },
  { type = "flatten" },
  { type = "rmsnorm" },
  { type = "linear", out = 3 },
]
[train]
batch_size = 64
steps = 4
[optimizer]
type = "adam"
lr = 0.01
)";

const char* kSequences = R"(
seed = 6
[data]
dataset = "synthetic"
samples = 128
shape = [5, 3]
classes = 4
[model]
layers = [
  { type = "gru", hidden = 8, output = "last" },
  { type = "linear", out = 4 },
]
[train]
batch_size = 64
steps = 3
)";

TEST(NormRnnLayers, ConfiguredModelsTrainTheSameOnAnyThreadCount) {
  const std::string base = run_text(kImages, options(4, 1)).fingerprint.hex();
  EXPECT_EQ(run_text(kImages, options(4, 3)).fingerprint.hex(), base);
  instruments::TrainOptions o = options(4, 2);
  o.accumulate = 2;  // micro-batches of one block: the norms keep T5
  EXPECT_EQ(run_text(kImages, o).fingerprint.hex(), base);
  const std::string seq = run_text(kSequences, options(3, 1)).fingerprint.hex();
  EXPECT_EQ(run_text(kSequences, options(3, 4)).fingerprint.hex(), seq);
  instruments::TrainOptions a = options(3, 2);
  a.accumulate = 2;  // the GRU's gradients too reduce per sample over the steps first (numerics §34)
  EXPECT_EQ(run_text(kSequences, a).fingerprint.hex(), seq);
}

TEST(NormRnnLayers, CharLstmOverTokenEmbeddings) {
  auto text = [](const std::string& head) {
    return R"(
seed = 2
[data]
dataset = "text"
path = ")" + tiny_corpus() + R"("
val_fraction = 0.2
block_size = 8
[model]
layers = [
  { type = "embedding", dim = 12 },
  { type = "lstm", hidden = 12, num_layers = 2 },
  )" + head + R"(,
]
[train]
batch_size = 64
steps = 3
[optimizer]
type = "adam"
lr = 0.01
)";
  };
  const train::Config tied = train::parse_config(text("{ type = \"tied_head\" }"), "test.toml");
  ASSERT_EQ(tied.model.layers.size(), 3u);
  EXPECT_EQ(tied.model.layers[1].num_layers, 2);
  EXPECT_FALSE(tied.model.layers[1].last_only);
  const std::int64_t vocab = train::train_dataset(tied)->num_classes();
  const std::string cfg = text("{ type = \"linear\", out = " + std::to_string(vocab) + " }");
  const std::string base = run_text(cfg, options(3, 1)).fingerprint.hex();
  EXPECT_EQ(run_text(cfg, options(3, 3)).fingerprint.hex(), base);
  instruments::TrainOptions a = options(3, 2);
  a.accumulate = 2;  // micro-batches of one block of 32 windows: T5
  EXPECT_EQ(run_text(cfg, a).fingerprint.hex(), base);
  EXPECT_THROW_MSG(train::parse_config(std::string(kSequences).replace(std::string(kSequences).find("\"last\""), 6, "\"first\""), "t.toml"),
                   "output");
}

}  // namespace
}  // namespace bitgrad::test
