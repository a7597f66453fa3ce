// The TOML's pooling options and asymmetric convolution padding (numerics.md §35, §37):
// the model a configuration builds has PyTorch's shapes, trains, keeps T5, and a wrong value is an
// error naming the file, line and key.
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "bitgrad/train.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::string config(const std::string& layers) {
  return R"(
seed = 3
[data]
dataset = "synthetic"
samples = 200
shape = [2, 7, 6]
classes = 3
[model]
layers = [
)" + layers + R"(
  { type = "flatten" },
  { type = "linear", out = 3 },
]
[train]
batch_size = 64
steps = 4
[eval]
each_epoch = false
)";
}

Shape last_hidden(const std::string& layers) {
  const train::Config c = train::parse_config(config(layers), "t.toml");
  auto ds = train::train_dataset(c);
  auto m = train::build_model(c, *ds);
  Shape s{1, 2, 7, 6};
  for (std::size_t i = 0; i + 2 < m->size(); ++i) s = m->children()[i].second->output_shape(s);
  return s;
}

TEST(LayerOptions, PoolingAndPadsGivePyTorchsShapes) {
  // torch: MaxPool2d(3, 2, padding=1, dilation=2, ceil_mode=True) on 7 x 6 -> 3 x 3
  EXPECT_EQ(last_hidden(R"({ type = "maxpool2d", kernel = 3, stride = 2, padding = 1, dilation = 2, ceil_mode = true },)"), (Shape{1, 2, 3, 3}));
  // AvgPool2d(2, 2, padding=1, ceil_mode=True, count_include_pad=False) on 7 x 6 -> 4 x 4 (the last
  // window of the rows would start in the end padding: dropped)
  EXPECT_EQ(last_hidden(R"({ type = "avgpool2d", kernel = 2, padding = 1, ceil_mode = true, count_include_pad = false },)"), (Shape{1, 2, 4, 4}));
  // Conv2d(2, 4, 3) on F.pad(x, (left 2, right 0, top 0, bottom 1)) -> 6 x 6
  EXPECT_EQ(last_hidden(R"({ type = "conv", out = 4, kernel = 3, pads = [0, 2, 1, 0] },)"), (Shape{1, 4, 6, 6}));
}

TEST(LayerOptions, TrainAndKeepT5) {
  RuntimeGuard g;
  const std::string text = config(R"({ type = "conv", out = 4, kernel = 2, pads = [1, 0, 0, 1] },
  { type = "maxpool2d", kernel = 3, stride = 2, padding = 1, dilation = 2, ceil_mode = true },
  { type = "avgpool2d", kernel = 2, stride = 1, padding = 1, count_include_pad = false },)");
  instruments::TrainOptions o;
  std::string log;
  const train::RunResult whole = run_text(text, o, &log);
  o.accumulate = 2;
  EXPECT_EQ(run_text(text, o, &log).fingerprint.hex(), whole.fingerprint.hex());
  o.accumulate = 1;
  o.threads = 3;
  EXPECT_EQ(run_text(text, o, &log).fingerprint.hex(), whole.fingerprint.hex());
}

TEST(LayerOptions, ErrorsNameFileLineAndKey) {
  auto fails = [](const std::string& layers, const std::string& msg) {
    SCOPED_TRACE(layers);
    EXPECT_THROW_MSG(
        {
          const train::Config c = train::parse_config(config(layers), "t.toml");
          auto ds = train::train_dataset(c);
          train::build_model(c, *ds);
        },
        msg);
  };
  fails(R"({ type = "maxpool2d", kernel = 2, padding = 2 },)", "t.toml:10: (maxpool2d) padding 2 must be at most half the kernel 2");
  fails(R"({ type = "avgpool2d", kernel = 2, dilation = 2 },)", "t.toml:10: unknown key 'dilation' in model.layers[0]");
  fails(R"({ type = "conv", out = 2, kernel = 2, pads = [1, 1] },)", "t.toml:10: model.layers[0] (conv): pads needs 4 entries");
  fails(R"({ type = "conv", out = 2, kernel = 2, padding = 1, pads = [1, 1, 0, 0] },)", "t.toml:10: (conv) give 'padding' or 'pads', not both");
  fails(R"({ type = "conv", out = 2, kernel = 2, pads = [1, -1, 0, 0] },)", "t.toml:10: model.layers[0] pads must be a non-empty array of at most 8 integers in [0, 64]");
}

// The memory pre-check counts every convolution kind's parameters before the layer allocates
// them (it skipped conv, conv1d and conv_transpose2d): 65536 x 65536 x 64 x 64 weights are refused.
TEST(LayerOptions, OversizedConvolutionsAreRefusedBeforeTheyAllocate) {
  for (const char* kind : {"conv", "conv_transpose2d"}) {
    SCOPED_TRACE(kind);
    const std::string layers = std::string(R"({ type = "conv", out = 65536, kernel = 1 },
  { type = ")") + kind + R"(", out = 65536, kernel = 64, padding = 32 },)";
    EXPECT_THROW_MSG(
        {
          const train::Config c = train::parse_config(config(layers), "t.toml");
          auto ds = train::train_dataset(c);
          train::build_model(c, *ds);
        },
        "t.toml:11: model.layers[1] (" + std::string(kind) + "): the model up to this layer needs about");
  }
}

}  // namespace
}  // namespace bitgrad::test
