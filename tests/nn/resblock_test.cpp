// torchvision's BasicBlock (nn::BasicBlock, `resblock` in the layer list): output
// shapes, torchvision's parameter and buffer names, the bits of the ops it is made of (forward,
// gradients, running statistics; at several thread counts), the f64 gradient of that composition,
// and the configuration's keys and errors.
#include "bitgrad/gradcheck.hpp"
#include "bitgrad/nn_spatial.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/train.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

TEST(ResBlock, ShapesAndTorchvisionNames) {
  nn::BasicBlock same(8, 8, 1), down(8, 16, 2), wider(4, 8, 1);
  EXPECT_EQ(same.output_shape(Shape{2, 8, 9, 9}), (Shape{2, 8, 9, 9}));
  EXPECT_EQ(down.output_shape(Shape{2, 8, 9, 9}), (Shape{2, 16, 5, 5}));
  EXPECT_EQ(down.output_shape(Shape{2, 8, 28, 28}), (Shape{2, 16, 14, 14}));
  EXPECT_EQ(wider.output_shape(Shape{3, 4, 6, 5}), (Shape{3, 8, 6, 5}));
  EXPECT_FALSE(same.downsample);
  EXPECT_TRUE(down.downsample && wider.downsample);
  EXPECT_EQ(names_of(same.named_parameters()), (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias"}));
  EXPECT_EQ(names_of(down.named_parameters()),
            (std::vector<std::string>{"conv1.weight", "bn1.weight", "bn1.bias", "conv2.weight", "bn2.weight", "bn2.bias", "downsample.0.weight",
                                      "downsample.1.weight", "downsample.1.bias"}));
  EXPECT_EQ(names_of(down.named_buffers()),
            (std::vector<std::string>{"bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked", "bn2.running_mean", "bn2.running_var",
                                      "bn2.num_batches_tracked", "downsample.1.running_mean", "downsample.1.running_var",
                                      "downsample.1.num_batches_tracked"}));
  const auto p = down.named_parameters();
  EXPECT_EQ(p[0].second.shape(), (Shape{16, 8, 3, 3}));
  EXPECT_EQ(p[3].second.shape(), (Shape{16, 16, 3, 3}));
  EXPECT_EQ(p[6].second.shape(), (Shape{16, 8, 1, 1}));
  nn::initialize(down, nn::Init::kaiming_uniform, 7);
  Tensor x = Tensor::from<float>(random_vec<float>(2 * 8 * 9 * 9, 3), Shape{2, 8, 9, 9});
  EXPECT_EQ(down.forward(x, nn::Context{}).shape(), (Shape{2, 16, 5, 5}));
  EXPECT_THROW_MSG(down.output_shape(Shape{2, 4, 9, 9}), "BasicBlock(8, 16, stride=2): expects images [N, 8, H, W], got [2, 4, 9, 9]");
  EXPECT_THROW_MSG(nn::BasicBlock(8, 0, 1), "BasicBlock");
}

// The block written out with the ops (torchvision's forward), parameters in named_parameters' order.
Tensor composed(const Tensor& x, const std::vector<Tensor>& p, int stride) {
  Tensor h = relu(batch_norm(conv2d(x, p[0], Tensor(), stride, 1), Tensor(), Tensor(), p[1], p[2], true));
  h = batch_norm(conv2d(h, p[3], Tensor(), 1, 1), Tensor(), Tensor(), p[4], p[5], true);
  const Tensor s = p.size() > 6 ? batch_norm(conv2d(x, p[6], Tensor(), stride, 0), Tensor(), Tensor(), p[7], p[8], true) : x;
  return relu(h + s);
}

TEST(ResBlock, BitsAreThoseOfItsOpsAtEveryThreadCount) {
  RuntimeGuard guard;
  for (int stride : {1, 2}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    const std::int64_t out = stride == 1 ? 6 : 8;
    const Tensor x0 = Tensor::from<float>(random_vec<float>(4 * 6 * 7 * 7, 11), Shape{4, 6, 7, 7});
    std::vector<float> want_y, want_gx, want_mean;
    std::vector<std::vector<float>> want_g;
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      nn::BasicBlock b(6, out, stride);
      nn::initialize(b, nn::Init::kaiming_uniform, 5);
      nn::Context ctx;
      ctx.training = true;
      Tensor x = x0.contiguous_copy();
      x.set_requires_grad(true);
      Tensor y = b.forward(x, ctx);
      const Shape ys = y.shape();
      const Tensor r = Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(ys.numel()), 12), ys);  // a random projection
      (y * r).backward(Tensor::ones(ys));
      std::vector<std::vector<float>> g;
      for (const Tensor& p : b.parameters()) g.push_back(p.grad().to_vector<float>());
      if (t == 1) {
        // the same ops by hand: the same bits
        std::vector<Tensor> ps;
        for (const Tensor& p : b.parameters()) ps.push_back(p.detach().contiguous_copy());
        for (Tensor& p : ps) p.set_requires_grad(true);
        Tensor xc = x0.contiguous_copy();
        xc.set_requires_grad(true);
        Tensor yc = composed(xc, ps, stride);
        (yc * r).backward(Tensor::ones(ys));
        EXPECT_EQ(yc.to_vector<float>(), y.to_vector<float>());
        EXPECT_EQ(xc.grad().to_vector<float>(), x.grad().to_vector<float>());
        for (std::size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(ps[i].grad().to_vector<float>(), g[i]) << "parameter " << i;
        // the running statistics moved once, as batch_norm's
        Tensor rm = Tensor::zeros(Shape{out}), rv = Tensor::ones(Shape{out});
        {
          NoGradGuard ng;
          batch_norm(conv2d(x0, ps[0], Tensor(), stride, 1), rm, rv, ps[1], ps[2], true);
        }
        EXPECT_EQ(b.bn1->running_mean.to_vector<float>(), rm.to_vector<float>());
        EXPECT_EQ(b.bn1->running_var.to_vector<float>(), rv.to_vector<float>());
        EXPECT_EQ(b.bn1->num_batches_tracked.to_vector<std::int64_t>(), std::vector<std::int64_t>{1});
        want_y = y.to_vector<float>(), want_gx = x.grad().to_vector<float>(), want_g = g;
        want_mean = b.bn2->running_mean.to_vector<float>();
      } else {
        EXPECT_EQ(y.to_vector<float>(), want_y) << "threads " << t;
        EXPECT_EQ(x.grad().to_vector<float>(), want_gx) << "threads " << t;
        EXPECT_EQ(g, want_g) << "threads " << t;
        EXPECT_EQ(b.bn2->running_mean.to_vector<float>(), want_mean) << "threads " << t;
      }
    }
  }
}

TEST(ResBlock, TheCompositionsGradientInFloat64) {
  for (int stride : {1, 2}) {
    SCOPED_TRACE("stride " + std::to_string(stride));
    nn::BasicBlock b(2, stride == 1 ? 2 : 3, stride);
    nn::initialize(b, nn::Init::kaiming_uniform, 9);
    std::vector<Tensor> inputs = {Tensor::from<double>(random_vec<double>(3 * 2 * 5 * 5, 21), Shape{3, 2, 5, 5})};
    std::uint64_t k = 30;
    for (const Tensor& p : b.parameters()) {  // weights from the block, the batch norms' affine moved off 1 and 0
      Tensor d = p.detach().cast(DType::f64).contiguous_copy();
      if (p.ndim() == 1) d = d + Tensor::from<double>(random_vec<double>(static_cast<std::size_t>(p.numel()), k++, -0.3, 0.3), p.shape());
      inputs.push_back(d);
    }
    for (Tensor& t : inputs) t.set_requires_grad(true);
    const GradcheckResult g = gradcheck(
        [stride](const std::vector<Tensor>& in) { return composed(in[0], std::vector<Tensor>(in.begin() + 1, in.end()), stride); }, inputs,
        GradcheckOptions{1e-6, 1e-5, 1e-4});
    EXPECT_TRUE(g.ok) << g.message;
    EXPECT_GT(g.checked, 100);
  }
}

const char* kResNet = R"(seed = 3
[data]
dataset = "synthetic"
samples = 16
shape = [3, 8, 8]
classes = 4
[model]
layers = [
  { type = "conv2d", out = 4, kernel = 3, padding = 1, bias = false },
  { type = "resblock", out = 4 },
  { type = "resblock", out = 8, stride = 2, momentum = 0.2, eps = 1e-3 },
  { type = "global_avgpool" },
  { type = "flatten" },
  { type = "linear", out = 4 },
]
[train]
batch_size = 8
)";

TEST(ResBlock, LayerListKeysNamesAndErrors) {
  const train::Config c = train::parse_config(kResNet, "res.toml");
  ASSERT_EQ(c.model.layers.size(), 6u);
  EXPECT_EQ(c.model.layers[1].type, train::LayerKind::resblock);
  EXPECT_EQ(c.model.layers[1].stride, 1);
  EXPECT_EQ(c.model.layers[2].stride, 2);
  EXPECT_EQ(c.model.layers[2].momentum, 0.2);
  EXPECT_EQ(c.model.layers[2].eps, 1e-3);
  EXPECT_TRUE(train::has_batch_norm(c)) << "a resblock's batch norms refuse accumulate and ranks as a batchnorm layer's";
  const std::string resolved = train::resolved_toml(c);
  EXPECT_NE(resolved.find("type = \"resblock\", out = 8, stride = 2"), std::string::npos) << resolved;
  EXPECT_EQ(train::config_hash(train::parse_config(resolved, "again.toml")), train::config_hash(c));
  auto ds = train::train_dataset(c);
  auto model = train::build_model(c, *ds);
  EXPECT_EQ(model->output_shape(Shape{2, 3, 8, 8}), (Shape{2, 4}));
  const auto names = names_of(model->named_parameters());
  EXPECT_EQ(names[1], "1.conv1.weight");
  EXPECT_EQ(names[7], "2.conv1.weight");
  EXPECT_EQ(names[13], "2.downsample.0.weight");
  EXPECT_EQ(names[15], "2.downsample.1.bias");

  auto with = [](const std::string& from, const std::string& to) {
    std::string t = kResNet;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  EXPECT_THROW_MSG(train::parse_config(with("{ type = \"resblock\", out = 4 }", "{ type = \"resblock\" }"), "res.toml"),
                   "res.toml:10: model.layers[1] (resblock) needs 'out'");
  EXPECT_THROW_MSG(train::parse_config(with("stride = 2, momentum", "stride = 0, momentum"), "res.toml"),
                   "res.toml:11: model.layers[2] stride must be in [1, 64], got 0");
  EXPECT_THROW_MSG(train::parse_config(with("{ type = \"resblock\", out = 4 }", "{ type = \"resblock\", out = 4, kernel = 5 }"), "res.toml"),
                   "res.toml:10: unknown key 'kernel' in model.layers[1]");
  const train::Config flat = train::parse_config(with("{ type = \"resblock\", out = 4 }", "{ type = \"flatten\" },\n  { type = \"resblock\", out = 4 }"),
                                                 "res.toml");
  EXPECT_THROW_MSG(train::build_model(flat, *ds), "res.toml:11: model.layers[2] (resblock) expects images [N, C, H, W], the layer before gives [1, 256]");
}

TEST(ResBlock, TrainingKeepsItsBitsOverThreadsWorkersAndRecomputation) {
  // the running statistics of its batch norms are updated once per step whatever is recomputed (T9)
  RuntimeGuard guard;
  std::string text = std::string(kResNet) + "epochs = 1\n[optimizer]\ntype = \"sgd\"\nlr = 0.1\nmomentum = 0.9\n";
  text.replace(text.find("samples = 16"), 12, "samples = 64\ntest_samples = 16");
  const train::RunResult base = run_text(text, options(8, 1, 0));
  ASSERT_EQ(base.steps, 8);
  ASSERT_EQ(base.test_loss.size(), 1u) << "evaluated at the epoch's end";
  EXPECT_EQ(run_text(text, options(8, 2, 2)).fingerprint.hex(), base.fingerprint.hex()) << "threads 2, workers 2";
  for (const char* mode : {"blocks", "all"}) {
    std::string r = text;
    r.insert(r.find("[model]\n") + 8, std::string("recompute = \"") + mode + "\"\n");
    const train::RunResult got = run_text(r, options(8, 1, 0));
    EXPECT_EQ(got.fingerprint.hex(), base.fingerprint.hex()) << "recompute = " << mode;
    EXPECT_EQ(got.test_loss, base.test_loss) << "recompute = " << mode << ": evaluation reads the running statistics";
  }
  instruments::TrainOptions acc = options(2, 1, 0);
  acc.accumulate = 2;
  EXPECT_THROW_MSG(run_text(text, acc), "accumulate = 2 with a batchnorm layer is not supported");
}

}  // namespace
}  // namespace bitgrad::test
