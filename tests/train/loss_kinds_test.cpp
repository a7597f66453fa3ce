// [train] loss beyond cross_entropy and mse (issue 29; numerics.md §38): l1, smooth_l1 (beta),
// huber (delta), bce_with_logits, and cross_entropy with label_smoothing, class_weights and
// ignore_index. Each trains, keeps T5 (accumulate 1, 2, 4: the same bits), gives as the step's
// loss the bits of the op's own mean (the op PyTorch checks, tests/python/test_parity_ops.py),
// and a wrong key or value is an error naming the file, line and key.
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
      const float want = static_cast<float>(op_mean(c.train, fresh.predict(r.batch.x), r.batch.y).item());
      EXPECT_EQ(r.loss, want) << "step " << s;
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
  fails(false, "loss = \"hinge\"", "t.toml:19: [train] loss is 'hinge'; expected one of cross_entropy, mse, l1, smooth_l1, huber, bce_with_logits");
  fails(false, "loss = \"huber\"\ndelta = 0", "t.toml:20: [train] delta must be in");
  fails(false, "loss = \"smooth_l1\"\nbeta = -1", "t.toml:20: [train] beta must be in");
  fails(false, "loss = \"l1\"\ndelta = 1.0", "t.toml:20: unknown key 'delta' in [train]");
  fails(true, "label_smoothing = 1.5", "t.toml:19: [train] label_smoothing must be in [0, 1], got 1.5");
  fails(true, "class_weights = [1, -2, 1, 1]", "t.toml:19: [train] class_weights must be a non-empty array of numbers >= 0");
  fails(true, "class_weights = \"x\"", "t.toml:19: [train] class_weights must be a non-empty array of numbers >= 0");
  fails(true, "class_weights = [1.0, 2.0]", "t.toml:19: [train] class_weights has 2 values but the dataset has 4 classes");
  fails(true, "loss = \"l1\"", "the dataset has class labels; use loss = \"cross_entropy\"");
  fails(false, "loss = \"cross_entropy\"", "the dataset has real-valued targets; use loss = \"mse\", \"l1\"");
  fails(false, "label_smoothing = 0.1\nloss = \"mse\"", "t.toml:19: unknown key 'label_smoothing' in [train]");
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
