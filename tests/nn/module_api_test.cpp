// PyTorch's module features in the C++ API: named_modules, state_dict with PyTorch's keys
// and order, load_state_dict (strict and not), train/eval, registration replaced in place and
// removed, persistent and non-persistent buffers.
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/nn.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

// A module written by a C++ user: a parameter of its own, a buffer, two children.
class Net : public nn::Module {
 public:
  Net() {
    scale = register_parameter("scale", Tensor::ones(Shape{3}));
    register_buffer("mask", Tensor::ones(Shape{3}), false);
    register_buffer("count", Tensor::zeros(Shape{1}));
    ln = std::make_shared<nn::LayerNorm>(3);
    register_module("ln", ln);
    auto seq = std::make_shared<nn::Sequential>();
    seq->add(std::make_shared<nn::Linear>(3, 2));
    seq->add(std::make_shared<nn::BatchNorm>(1, 2));
    register_module("head", seq);
  }
  Tensor forward(const Tensor& x, const nn::Context& ctx) override { return children()[1].second->forward(ln->forward(x * scale, ctx), ctx); }
  Shape output_shape(const Shape& in) const override { return Shape{in[0], 2}; }
  std::string describe() const override { return "Net()"; }
  Tensor scale;
  std::shared_ptr<nn::LayerNorm> ln;
};

std::vector<std::string> keys(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> k;
  for (const auto& [n, t] : v) k.push_back(n);
  return k;
}

TEST(ModuleApi, StateDictHasPyTorchKeysAndOrder) {
  Net net;
  EXPECT_EQ(keys(net.state_dict()), (std::vector<std::string>{"scale", "count", "ln.weight", "ln.bias", "head.0.weight", "head.0.bias",
                                                              "head.1.weight", "head.1.bias", "head.1.running_mean", "head.1.running_var",
                                                              "head.1.num_batches_tracked"}));
  // named_parameters keeps bitgrad's own names (optimizer state, checkpoints)
  EXPECT_EQ(keys(net.named_parameters()),
            (std::vector<std::string>{"scale", "ln.gamma", "ln.beta", "head.0.weight", "head.0.bias", "head.1.weight", "head.1.bias"}));
  // named_buffers has the non-persistent one too
  EXPECT_EQ(keys(net.named_buffers()).front(), "mask");
}

TEST(ModuleApi, NamedModulesDepthFirst) {
  Net net;
  std::vector<std::string> names;
  for (const auto& [n, m] : net.named_modules()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"", "ln", "head", "head.0", "head.1"}));
  EXPECT_EQ(net.named_modules()[0].second, &net);
}

TEST(ModuleApi, LoadStateDictStrictAndNot) {
  Net a, b;
  nn::initialize(a, nn::Init::kaiming_uniform, 1);
  nn::initialize(b, nn::Init::kaiming_uniform, 2);
  ASSERT_NE(fingerprint(a.parameters()).hex(), fingerprint(b.parameters()).hex());
  const auto r = b.load_state_dict(a.state_dict());
  EXPECT_TRUE(r.missing.empty() && r.unexpected.empty());
  EXPECT_EQ(fingerprint(a.parameters()).hex(), fingerprint(b.parameters()).hex());
  auto state = a.state_dict();
  state.erase(state.begin());                       // no 'scale'
  state.emplace_back("extra", Tensor::ones(Shape{1}));
  try {
    b.load_state_dict(state);
    FAIL() << "a strict load of different keys succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing 'scale', unexpected 'extra'"), std::string::npos) << e.what();
  }
  const auto loose = b.load_state_dict(state, false);
  EXPECT_EQ(loose.missing, (std::vector<std::string>{"scale"}));
  EXPECT_EQ(loose.unexpected, (std::vector<std::string>{"extra"}));
  auto wrong = a.state_dict();
  wrong[0].second = Tensor::ones(Shape{4});
  EXPECT_THROW(b.load_state_dict(wrong), Error);
}

TEST(ModuleApi, TrainEvalReachEveryDescendant) {
  Net net;
  // every module starts in training mode, as PyTorch's
  for (const auto& [n, m] : net.named_modules()) EXPECT_TRUE(m->training()) << n;
  net.eval();
  for (const auto& [n, m] : net.named_modules()) EXPECT_FALSE(m->training()) << n;
  net.train();
  for (const auto& [n, m] : net.named_modules()) EXPECT_TRUE(m->training()) << n;
}

TEST(ModuleApi, RegistrationReplacedInPlaceAndRemoved) {
  Net net;
  net.set_parameter("scale", Tensor::zeros(Shape{3}));
  EXPECT_EQ(keys(net.named_parameters()).front(), "scale");  // same place
  net.set_module("ln", std::make_shared<nn::LayerNorm>(3));
  EXPECT_EQ(keys(net.named_parameters())[1], "ln.gamma");
  EXPECT_TRUE(net.unregister("scale"));
  EXPECT_FALSE(net.unregister("scale"));
  EXPECT_EQ(keys(net.named_parameters()).front(), "ln.gamma");
  EXPECT_TRUE(net.unregister("mask"));
  EXPECT_EQ(keys(net.named_buffers()).front(), "count");
  EXPECT_TRUE(net.buffer_persistent("count"));
}

}  // namespace
}  // namespace bitgrad::test
