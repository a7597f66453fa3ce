// The modules of the convolution variants, adaptive pooling and upsampling (bitgrad/nn_spatial.hpp):
// shapes, their ops' bits, initialisation from the seed, errors.
#include <bit>

#include "bitgrad/nn_spatial.hpp"
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

TEST(NnSpatial, Errors) {
  EXPECT_THROW(nn::Conv(3, 6, {3, 3, 3}), Error);
  EXPECT_THROW(nn::Conv(3, 6, {3, 3}, ConvOptions{{}, {}, {}, 2, {}}), Error);
  EXPECT_THROW(nn::Conv(4, 6, {3, 3}).output_shape(Shape{1, 3, 5, 5}), Error);
  EXPECT_THROW(nn::AdaptivePool2d(false, 0, 1), Error);
  EXPECT_THROW(nn::Upsample(0, 0, 0.0, 0.0, false), Error);
}

}  // namespace
}  // namespace bitgrad::test
