// The modules of the convolution variants, adaptive pooling and upsampling (bitgrad/nn_spatial.hpp):
// shapes, their ops' bits, initialisation from the seed, errors.
#include <bit>

#include "bitgrad/nn_spatial.hpp"
#include "bitgrad/train.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

TEST(NnSpatial, OutputShapesAreTheForwardShapes) {
  ConvOptions o;
  o.stride = {2, 1};
  o.pads = {1, 0, 2, 1};
  o.dilation = {1, 2};
  o.groups = 2;
  ConvOptions t = o;
  t.output_padding = {1, 0};
  ConvOptions one;
  one.stride = {2};
  one.pads = {1, 1};
  std::vector<std::pair<std::shared_ptr<nn::Module>, Shape>> cases = {
      {std::make_shared<nn::Conv>(4, 6, std::vector<int>{3, 2}, o), Shape{2, 4, 9, 8}},
      {std::make_shared<nn::Conv>(4, 6, std::vector<int>{3, 2}, t, true, true), Shape{2, 4, 5, 4}},
      {std::make_shared<nn::Conv>(3, 5, std::vector<int>{3}, one), Shape{2, 3, 11}},
      {std::make_shared<nn::Conv>(3, 5, std::vector<int>{3}, one, false, true), Shape{2, 3, 6}},
      {std::make_shared<nn::AdaptivePool2d>(false, 3, 2), Shape{2, 3, 7, 5}},
      {std::make_shared<nn::AdaptivePool2d>(true, 1, 1), Shape{2, 3, 7, 5}},
      {std::make_shared<nn::Upsample>(0, 0, 2.0, 1.5, false), Shape{1, 2, 3, 4}},
      {std::make_shared<nn::Upsample>(5, 7, 0.0, 0.0, true, true), Shape{1, 2, 3, 4}},
  };
  for (auto& [m, in] : cases) {
    SCOPED_TRACE(m->describe());
    nn::initialize(*m, nn::Init::kaiming_uniform, 3);
    Tensor x = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(in.numel()), 1), in);
    EXPECT_EQ(m->forward(x, nn::Context{}).shape(), m->output_shape(in));
  }
}

TEST(NnSpatial, ConvIsItsOpWithTheLayersParameters) {
  ConvOptions o;
  o.pads = {1, 1, 1, 1};
  o.groups = 3;
  nn::Conv c(3, 6, {3, 3}, o);
  nn::initialize(c, nn::Init::kaiming_uniform, 7);
  EXPECT_EQ(c.weight.shape(), (Shape{6, 1, 3, 3}));
  Tensor x = Tensor::from<float>(random_vec<float>(2 * 3 * 5 * 5, 2), Shape{2, 3, 5, 5});
  const auto a = c.forward(x, nn::Context{}).to_vector<float>(), b = conv(x, c.weight, c.bias, o).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(std::bit_cast<std::uint32_t>(a[i]), std::bit_cast<std::uint32_t>(b[i]));
  nn::Conv d(3, 6, {3, 3}, o);
  nn::initialize(d, nn::Init::kaiming_uniform, 7);
  EXPECT_EQ(c.weight.to_vector<float>(), d.weight.to_vector<float>()) << "the seed decides the parameters";
  nn::Conv tr(6, 4, {2, 2}, ConvOptions{{2, 2}, {}, {}, 2, {}}, true, true);
  EXPECT_EQ(tr.weight.shape(), (Shape{6, 2, 2, 2}));
}

// The layers in the configuration's model list: shapes chain, the model steps, and a run of two
// threads trains to the bits of one (the ops split samples and planes, never an output)
const char* kModel = R"(
seed = 5
[data]
dataset = "synthetic"
samples = 64
test_samples = 0
shape = [2, 8, 8]
classes = 3
[model]
layers = [
  { type = "conv", out = 4, kernel = 3, padding = 2, dilation = 2, groups = 2 },
  { type = "relu" },
  { type = "upsample", scale = 1.5, bilinear = true },
  { type = "conv_transpose2d", out = 4, kernel = 3, stride = 2, padding = 1, output_padding = 1, groups = 4 },
  { type = "adaptive_avgpool2d", size = 3 },
  { type = "upsample", size = 4 },
  { type = "global_avgpool" },
  { type = "flatten" },
  { type = "linear", out = 3 },
]
[train]
batch_size = 32
epochs = 1
)";

TEST(NnSpatial, LayersOfTheConfiguration) {
  RuntimeGuard guard;
  const train::Config c = train::parse_config(kModel, "spatial.toml");
  auto ds = train::train_dataset(c);
  auto model = train::build_model(c, *ds);
  EXPECT_EQ(model->output_shape(Shape{2, 2, 8, 8}), (Shape{2, 3}));
  Tensor x = Tensor::from<float>(random_vec<float>(2 * 2 * 8 * 8, 4), Shape{2, 2, 8, 8});
  std::vector<float> want;
  for (int t : {1, 2, 3}) {
    set_num_threads(t);
    const std::vector<float> y = model->forward(x, nn::Context{}).to_vector<float>();
    if (want.empty()) want = y;
    EXPECT_EQ(want, y) << "threads " << t;
  }
  const train::Config one_d = train::parse_config(
      "[data]\ndataset = \"synthetic\"\nsamples = 8\nshape = [3, 10]\nclasses = 2\n[model]\nlayers = [\n"
      "  { type = \"conv1d\", out = 4, kernel = 3, stride = 2, groups = 1 },\n  { type = \"flatten\" },\n  { type = \"linear\", out = 2 },\n]\n",
      "one_d.toml");
  auto ds1 = train::train_dataset(one_d);
  EXPECT_EQ(train::build_model(one_d, *ds1)->output_shape(Shape{1, 3, 10}), (Shape{1, 2}));
}

TEST(NnSpatial, Errors) {
  EXPECT_THROW(nn::Conv(3, 6, {3, 3, 3}), Error);
  EXPECT_THROW(nn::Conv(3, 6, {3, 3}, ConvOptions{{}, {}, {}, 2, {}}), Error);
  EXPECT_THROW(nn::Conv(4, 6, {3, 3}).output_shape(Shape{1, 3, 5, 5}), Error);
  EXPECT_THROW(nn::AdaptivePool2d(false, 0, 1), Error);
  EXPECT_THROW(nn::Upsample(0, 0, 0.0, 0.0, false), Error);
}

}  // namespace
}  // namespace bitgrad::test
