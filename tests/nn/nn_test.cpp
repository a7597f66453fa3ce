// Modules: parameter names and order, initialisation and dropout reproducibility, shape checks.
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/nn_spatial.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::shared_ptr<nn::Sequential> mlp(std::uint64_t seed) {
  auto m = std::make_shared<nn::Sequential>();
  m->add(std::make_shared<nn::Linear>(6, 5));
  m->add(std::make_shared<nn::ActivationLayer>(nn::Activation::relu));
  m->add(std::make_shared<nn::Dropout>(0.5, 0));
  m->add(std::make_shared<nn::Linear>(5, 3, false));
  nn::initialize(*m, nn::Init::kaiming_uniform, seed);
  return m;
}

TEST(Nn, ParametersInRegistrationOrder) {
  auto m = mlp(1);
  auto p = m->named_parameters();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].first, "0.weight");
  EXPECT_EQ(p[1].first, "0.bias");
  EXPECT_EQ(p[2].first, "3.weight");
  EXPECT_EQ(p[0].second.shape(), (Shape{5, 6}));
  EXPECT_TRUE(p[0].second.requires_grad());
  EXPECT_EQ(m->describe(), "Sequential(Linear(6, 5), ReLU(), Dropout(p=0.5), Linear(5, 3, no bias))");
}

TEST(Nn, InitialisationIsAFunctionOfTheSeed) {
  EXPECT_EQ(fingerprint(mlp(1)->parameters()), fingerprint(mlp(1)->parameters()));
  EXPECT_NE(fingerprint(mlp(1)->parameters()), fingerprint(mlp(2)->parameters()));
  // kaiming uniform: |w| <= sqrt(3) sqrt(2) / sqrt(fan_in); bias |b| <= 1/sqrt(fan_in)
  auto p = mlp(3)->named_parameters();
  const float wb = static_cast<float>(std::sqrt(6.0 / 6.0)), bb = static_cast<float>(1 / std::sqrt(6.0));
  for (float v : p[0].second.to_vector<float>()) ASSERT_LE(std::fabs(v), wb);
  for (float v : p[1].second.to_vector<float>()) ASSERT_LE(std::fabs(v), bb);
  // parameter i draws from (seed, "init").sub(i): the first weight is its stream's first draws
  Tensor w = Tensor::zeros({5, 6});
  nn::init_tensor(w, nn::Init::kaiming_uniform, 6, 5, rng::Stream(3, "init").sub(0));
  EXPECT_EQ(fingerprint(w), fingerprint(p[0].second));
}

TEST(Nn, DropoutFollowsStepAndRowOffset) {
  auto m = mlp(4);
  Tensor x = Tensor::ones({8, 6});
  nn::Context train{true, 99, 5, 0};
  Tensor a = m->forward(x, train), b = m->forward(x, train);
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  nn::Context next = train;
  next.step = 6;
  EXPECT_NE(fingerprint(a), fingerprint(m->forward(x, next))) << "a new mask every step";
  // rows 4..7 of the batch computed as a micro-batch starting at row 4
  nn::Context micro = train;
  micro.row_offset = 4;
  EXPECT_EQ(slice(a, 0, 4, 8).to_vector<float>(), m->forward(slice(x, 0, 4, 8), micro).to_vector<float>());
  nn::Context eval;
  Tensor e1 = m->forward(x, eval), e2 = m->forward(x, eval);
  EXPECT_EQ(fingerprint(e1), fingerprint(e2));
  EXPECT_NE(fingerprint(e1), fingerprint(a)) << "no dropout in evaluation";
}

TEST(Nn, ShapesAreCheckedBeforeRunning) {
  nn::Sequential s;
  ConvOptions same;
  same.pads = {1, 1, 1, 1};
  s.add(std::make_shared<nn::Conv>(1, 4, std::vector<int>{3, 3}, same));
  s.add(std::make_shared<nn::Pool>(true, PoolOptions{{2, 2}}));
  s.add(std::make_shared<nn::Flatten>());
  s.add(std::make_shared<nn::Linear>(4 * 14 * 14, 10));
  EXPECT_EQ(s.output_shape(Shape{7, 1, 28, 28}), (Shape{7, 10}));
  try {
    s.output_shape(Shape{7, 3, 28, 28});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)): expects inputs [N, 1, H, W], got [7, 3, 28, 28]"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(s.output_shape(Shape{7, 1, 20, 20}), Error);
  EXPECT_THROW(nn::parse_init("kaiming"), Error);
  EXPECT_THROW(nn::Dropout(1.0, 0), Error);
}

}  // namespace
}  // namespace bitgrad::test
