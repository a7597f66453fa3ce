// [train] loss beyond cross_entropy and mse (numerics.md §41): l1, smooth_l1 (beta),
// huber (delta), bce_with_logits, and cross_entropy with label_smoothing, class_weights and
// ignore_index. Each trains, keeps T5 (accumulate 1, 2, 4: the same bits), gives as the step's
// loss the bits of the op's own mean (the op PyTorch checks, tests/python/test_parity_ops.py)
// and PyTorch's definition's value, and a wrong key or value is an error naming the file, line
// and key.
#include <algorithm>
#include <cmath>

#include "bitgrad/ops.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "bitgrad/train.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

// 300 samples, batch 128 (a short last batch of 44 in each epoch with drop_last = false)
std::string config(bool classes, const std::string& loss_lines) {
  return std::string(R"(
seed = 7
[data]
dataset = "synthetic"
samples = 300
test_samples = 100
shape = [6]
)") + (classes ? "classes = 4\n" : "classes = 0\ntargets = 3\n") +
         R"([model]
layers = [ { type = "linear", out = 16 }, { type = "tanh" }, { type = "linear", out = )" +
         (classes ? "4" : "3") + R"( } ]
[train]
batch_size = 128
steps = 6
drop_last = false
)" + loss_lines + R"(
[optimizer]
type = "sgd"
lr = 0.1
[eval]
each_epoch = false
)";
}

struct Kind {
  const char* name;
  bool classes;
  const char* lines;
};
const Kind kKinds[] = {
    {"l1", false, "loss = \"l1\""},
    {"smooth_l1", false, "loss = \"smooth_l1\"\nbeta = 0.5"},
    {"smooth_l1 beta 0", false, "loss = \"smooth_l1\"\nbeta = 0"},
    {"huber", false, "loss = \"huber\"\ndelta = 2.0"},
    {"bce_with_logits", false, "loss = \"bce_with_logits\""},
    {"label_smoothing", true, "label_smoothing = 0.1"},
    {"class_weights", true, "class_weights = [0.5, 2.0, 1.0, 3.0]"},
    {"ignore_index", true, "ignore_index = 2"},
    {"all three", true, "loss = \"cross_entropy\"\nlabel_smoothing = 0.2\nclass_weights = [0.5, 2.0, 1.0, 3.0]\nignore_index = 1"},
};

// The op's mean of the model's output on a batch: what PyTorch's loss with reduction="mean" gives.
Tensor op_mean(const train::TrainConfig& t, const Tensor& out, const Tensor& y) {
  switch (t.loss) {
    case train::LossKind::l1: return l1_loss(reshape(out, y.shape()), y);
    case train::LossKind::smooth_l1: return smooth_l1_loss(reshape(out, y.shape()), y, Reduction::mean, t.beta);
    case train::LossKind::huber: return huber_loss(reshape(out, y.shape()), y, Reduction::mean, t.delta);
    case train::LossKind::bce_with_logits: return binary_cross_entropy_with_logits(reshape(out, y.shape()), y);
    case train::LossKind::mse: return mse_loss(reshape(out, y.shape()), y);
    case train::LossKind::cross_entropy: break;
  }
  Tensor w;
  if (!t.class_weights.empty()) w = Tensor::from<double>(t.class_weights, Shape{static_cast<std::int64_t>(t.class_weights.size())}).cast(DType::f32);
  return softmax_cross_entropy(out, y, w, t.ignore_index, t.label_smoothing);
}

// PyTorch's definitions in f64 (torch.nn.L1Loss, SmoothL1Loss, HuberLoss, BCEWithLogitsLoss,
// CrossEntropyLoss with weight, ignore_index and label_smoothing; reduction "mean"), an oracle
// independent of the ops.
double torch_mean(const train::TrainConfig& t, const Tensor& out, const Tensor& y) {
  const std::vector<float> o = out.contiguous_copy().to_vector<float>();
  if (t.loss != train::LossKind::cross_entropy) {
    const std::vector<float> b = y.to_vector<float>();
    double sum = 0;
    for (std::size_t i = 0; i < o.size(); ++i) {
      const double a = o[i], v = b[i], z = std::fabs(a - v);
      switch (t.loss) {
        case train::LossKind::l1: sum += z; break;
        case train::LossKind::smooth_l1: sum += z < t.beta ? 0.5 * z * z / t.beta : z - 0.5 * t.beta; break;
        case train::LossKind::huber: sum += z < t.delta ? 0.5 * z * z : t.delta * (z - 0.5 * t.delta); break;
        case train::LossKind::bce_with_logits: sum += std::max(a, 0.0) - a * v + std::log1p(std::exp(-std::fabs(a))); break;
        default: sum += z * z;
      }
    }
    return sum / static_cast<double>(o.size());
  }
  const std::vector<std::int64_t> lab = y.to_vector<std::int64_t>();
  const std::size_t N = lab.size(), C = o.size() / N;
  double num = 0, den = 0;
  for (std::size_t n = 0; n < N; ++n) {
    if (lab[n] == t.ignore_index) continue;
    double m = -INFINITY, se = 0;
    for (std::size_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(o[n * C + c]));
    for (std::size_t c = 0; c < C; ++c) se += std::exp(o[n * C + c] - m);
    auto nlogp = [&](std::size_t c) { return -(o[n * C + c] - m - std::log(se)); };
    auto w = [&](std::size_t c) { return t.class_weights.empty() ? 1.0 : t.class_weights[c]; };
    const auto tc = static_cast<std::size_t>(lab[n]);
    double smooth = 0;
    for (std::size_t c = 0; c < C; ++c) smooth += w(c) * nlogp(c);
    num += (1 - t.label_smoothing) * w(tc) * nlogp(tc) + t.label_smoothing / static_cast<double>(C) * smooth;
    den += w(tc);
  }
  return num / den;
}

TEST(LossKinds, EachTrainsAndKeepsT5) {
  RuntimeGuard g;
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(k.name);
    const std::string text = config(k.classes, k.lines);
    instruments::TrainOptions o;
    std::string log;
    const train::RunResult whole = run_text(text, o, &log);
    ASSERT_EQ(whole.steps, 6);
    EXPECT_TRUE(std::isfinite(whole.last_loss));
    for (std::int64_t a : {2, 4}) {  // micro-batches of 64 and 32: whole blocks, and the short last batch's tail
      o.accumulate = a;
      const train::RunResult split = run_text(text, o, &log);
      EXPECT_EQ(split.fingerprint.hex(), whole.fingerprint.hex()) << "accumulate " << a;
      EXPECT_EQ(split.last_loss, whole.last_loss) << "accumulate " << a;
      EXPECT_EQ(log.find("T5 does not hold"), std::string::npos) << log;
    }
  }
}

TEST(LossKinds, TheStepsLossIsTheOpsMean) {
  RuntimeGuard g;
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(k.name);
    const train::Config c = train::parse_config(config(k.classes, k.lines), "t.toml");
    train::Session trained(c, train::train_dataset(c), nullptr, 0), fresh(c, train::train_dataset(c), nullptr, 0);
    for (std::int64_t s = 0; s < 3; ++s) {  // step 2 is the short last batch of 44
      const train::Session::StepOut r = trained.step(s);
      const Tensor out = fresh.predict(r.batch.x);
      const float want = static_cast<float>(op_mean(c.train, out, r.batch.y).item());
      EXPECT_EQ(r.loss, want) << "step " << s;
      // torch_mean is the exact value for f32 purposes (f64 on the f32 outputs). bitgrad's f32 mean
      // (numerics §30, §41): each element's loss rounded once from f64 (pointwise losses) or a few
      // roundings over a row of C classes (log_softmax, the smoothing sum, two products, one sum),
      // all terms >= 0 (no cancellation), then a sum of the batch's elements and one division (W of
      // weights 0.5-3 and counts: exact): n = out's numel + 16 roundings, relative error <= gamma(n)
      // (Higham, Accuracy and Stability, §3), gamma(n) = n u / (1 - n u), u = 2^-24
      const double torch = torch_mean(c.train, out, r.batch.y);
      const double nu = static_cast<double>(out.numel() + 16) * std::ldexp(1.0, -24);
      EXPECT_NEAR(r.loss, torch, nu / (1 - nu) * std::fabs(torch)) << "step " << s;
      fresh.step(s);
    }
  }
}

TEST(LossKinds, ConfigurationErrorsNameFileLineAndKey) {
  auto fails = [](bool classes, const std::string& lines, const std::string& msg) {
    SCOPED_TRACE(lines);
    EXPECT_THROW_MSG(
        {
          const train::Config c = train::parse_config(config(classes, lines), "t.toml");
          train::Session s(c, train::train_dataset(c), nullptr, 0);
        },
        msg);
  };
  fails(false, "loss = \"hinge\"", "t.toml:16: [train] loss is 'hinge'; expected one of cross_entropy, mse, l1, smooth_l1, huber, bce_with_logits");
  fails(false, "loss = \"huber\"\ndelta = 0", "t.toml:17: [train] delta must be in");
  fails(false, "loss = \"smooth_l1\"\nbeta = -1", "t.toml:17: [train] beta must be in");
  fails(false, "loss = \"l1\"\ndelta = 1.0", "t.toml:17: unknown key 'delta' in [train]");
  fails(true, "label_smoothing = 1.5", "t.toml:15: [train] label_smoothing must be in [0, 1], got 1.5");
  fails(true, "class_weights = [1, -2, 1, 1]", "t.toml:15: [train] class_weights must be a non-empty array of numbers >= 0");
  fails(true, "class_weights = \"x\"", "t.toml:15: [train] class_weights must be a non-empty array of numbers >= 0");
  fails(true, "class_weights = [1.0, 2.0]", "t.toml:15: [train] class_weights has 2 values but the dataset has 4 classes");
  fails(true, "loss = \"l1\"", "the dataset has class labels; use loss = \"cross_entropy\"");
  fails(false, "loss = \"cross_entropy\"", "the dataset has real-valued targets; use loss = \"mse\", \"l1\"");
  fails(false, "label_smoothing = 0.1\nloss = \"mse\"", "t.toml:16: unknown key 'label_smoothing' in [train]");
}

TEST(LossKinds, DefaultsLeaveTheHashAndTheResolvedFileAsBefore) {
  const train::Config plain = train::parse_config(config(true, ""), "t.toml");
  const train::Config spelled = train::parse_config(config(true, "label_smoothing = 0.0\nignore_index = -100"), "t.toml");
  EXPECT_EQ(train::config_hash(spelled), train::config_hash(plain));
  EXPECT_EQ(train::resolved_toml(plain).find("label_smoothing"), std::string::npos);
  const train::Config set = train::parse_config(config(true, "label_smoothing = 0.1\nclass_weights = [1, 2, 3, 4]"), "t.toml");
  EXPECT_NE(train::config_hash(set), train::config_hash(plain));
  const std::string resolved = train::resolved_toml(set);
  EXPECT_NE(resolved.find("class_weights = [1.0, 2.0, 3.0, 4.0]"), std::string::npos) << resolved;
  EXPECT_EQ(train::config_hash(train::parse_config(resolved, "r.toml")), train::config_hash(set));
}

}  // namespace
}  // namespace bitgrad::test
