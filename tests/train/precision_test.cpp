// Mixed precision (numerics.md §24-25): bf16 and fp16 runs keep the contract of f32 runs —
// threads, loader workers, micro-batches (T5), code paths, resume (T7), recomputation (T9) —
// with rounding to nearest and stochastically; fp16's dynamic loss scale skips steps and
// resumes with its state; bad settings are one-line errors.
#include <cmath>

#include "bitgrad/instruments.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {
namespace {

std::string with_train(std::string cfg, const std::string& lines) {
  const std::size_t at = cfg.find("[train]\n");
  EXPECT_NE(at, std::string::npos);
  return cfg.insert(at + 8, lines);
}

TEST(MixedPrecision, Bf16AndFp16GptKeepTheContract) {
  RuntimeGuard g;
  const std::string settings[] = {"precision = \"bf16\"\n", "precision = \"bf16\"\nrounding = \"stochastic\"\n",
                                  "precision = \"fp16\"\nloss_scale_interval = 2\n"};
  std::string f32_fp;
  {
    instruments::TrainOptions o = options(6, 2, 0);
    f32_fp = run_text(tiny_gpt(), o).fingerprint.hex();
  }
  for (const std::string& s : settings) {
    const std::string cfg = with_train(tiny_gpt(), s);
    instruments::TrainOptions o = options(6, 1, 0);
    std::string log;
    const train::RunResult base = run_text(cfg, o, &log);
    const std::string want = base.fingerprint.hex();
    EXPECT_NE(want, f32_fp) << s << "rounds nothing?";
    EXPECT_TRUE(std::isfinite(base.last_loss)) << log;
    EXPECT_NE(log.find("precision "), std::string::npos) << log;
    for (auto [t, w] : {std::pair{2, 2}, std::pair{3, 0}, std::pair{7, 2}}) {
      o.threads = t;
      o.workers = w;
      const train::RunResult r = run_text(cfg, o);
      EXPECT_EQ(r.fingerprint.hex(), want) << s << "threads=" << t << " workers=" << w;
      EXPECT_EQ(r.test_loss, base.test_loss) << s << "threads=" << t;
    }
    o.threads = 2;
    o.workers = 0;
    for (std::int64_t k : {2, 4}) {  // micro-batches of 64 and 32 windows
      o.accumulate = k;
      const train::RunResult r = run_text(cfg, o);
      EXPECT_EQ(r.fingerprint.hex(), want) << s << "accumulate=" << k;
      EXPECT_EQ(r.last_loss, base.last_loss) << s << "accumulate=" << k;
    }
    o.accumulate = 1;
    for (Isa isa : isas()) {
      set_isa(isa);
      EXPECT_EQ(run_text(cfg, o).fingerprint.hex(), want) << s << "isa=" << isa_name(isa);
    }
    set_isa(best_isa());
    // recomputation redraws the stochastic rounding as it redraws dropout (T9)
    std::string rc = cfg;
    rc.insert(rc.find("[model]\n") + 8, "recompute = \"blocks\"\n");
    EXPECT_EQ(run_text(rc, o).fingerprint.hex(), want) << s << "recompute";
    // stop and resume mid-run (T7)
    o.steps = 3;
    o.checkpoint_every = 2;
    const std::string dir = train_into(cfg, "precision_resume", o);
    EXPECT_EQ(run_text(cfg, resume_options(dir, 6)).fingerprint.hex(), want) << s << "resume";
    EXPECT_NE(io::read_file(dir + "/manifest.json").find("\"precision\": \"" + std::string(s.substr(13, 4)) + "\""), std::string::npos);
  }
}

TEST(MixedPrecision, MlpAndCnnInBf16KeepTheContract) {
  RuntimeGuard g;
  const std::string cfg = with_train(kMlp, "precision = \"bf16\"\nrounding = \"stochastic\"\n");
  instruments::TrainOptions o = options(5, 1, 0);
  const train::RunResult base = run_text(cfg, o);
  o.threads = 3;
  o.workers = 2;
  o.accumulate = 4;  // micro-batches of one block
  EXPECT_EQ(run_text(cfg, o).fingerprint.hex(), base.fingerprint.hex());
  const char* cnn = R"(
seed = 3
[data]
dataset = "synthetic"
samples = 256
shape = [2, 8, 8]
classes = 4
[model]
layers = [
  { type = "conv2d", out = 4, kernel = 3, padding = 1 },
  { type = "relu" },
  { type = "maxpool2d", kernel = 2 },
  { type = "flatten" },
  { type = "linear", out = 4 },
]
[train]
precision = "fp16"
batch_size = 64
[optimizer]
type = "adam"
lr = 0.01
)";
  instruments::TrainOptions c = options(4, 1, 0);
  const std::string want = run_text(cnn, c).fingerprint.hex();
  c.threads = 2;
  c.accumulate = 2;
  EXPECT_EQ(run_text(cnn, c).fingerprint.hex(), want);
}

TEST(MixedPrecision, DynamicLossScaleSkipsOverflowsAndResumesWithItsState) {
  RuntimeGuard g;
  // the scale doubles after every good step from 2^16, so fp16 gradients overflow within a few
  // steps; each overflow skips its step and halves the scale
  const std::string cfg = with_train(tiny_gpt(), "precision = \"fp16\"\nloss_scale_interval = 1\n");
  instruments::TrainOptions o = options(14, 2, 0);
  o.out = fresh_dir("scale");
  const train::RunResult straight = run_text(cfg, o);
  const std::vector<std::string> lines = lines_of(o.out + "/metrics.jsonl");
  int skipped = 0;
  double prev_scale = 0;
  bool prev_skipped = false;
  for (const std::string& l : lines) {
    if (l.find("\"loss\"") == std::string::npos) continue;
    const bool skip = l.find("\"skipped\": true") != std::string::npos;
    const std::size_t at = l.find("\"loss_scale\": ");
    ASSERT_NE(at, std::string::npos) << l;
    const double scale = std::stod(l.substr(at + 14));
    if (prev_scale == 0) EXPECT_EQ(scale, 65536.0) << l;
    else EXPECT_EQ(scale, prev_skipped ? prev_scale / 2 : prev_scale * 2) << l;  // interval 1: every good step doubles
    skipped += skip;
    prev_scale = scale;
    prev_skipped = skip;
  }
  EXPECT_GT(skipped, 0) << "no overflow: the test no longer tests skipping";
  // resume from each checkpoint: the scale's state comes back with it
  instruments::TrainOptions p = options(11, 2, 0);
  p.checkpoint_every = 3;
  const std::string dir = train_into(cfg, "scale_resume", p);
  EXPECT_EQ(run_text(cfg, resume_options(dir, 14)).fingerprint.hex(), straight.fingerprint.hex());
  p.steps = 14;
  p.accumulate = 2;
  p.threads = 3;
  EXPECT_EQ(run_text(cfg, p).fingerprint.hex(), straight.fingerprint.hex()) << "skipping is the same on any split";
}

// T4 in mixed precision: a window's logits are the same in any batch, at any position, on any
// code path and thread count (rounding is per element; evaluation rounds to nearest).
TEST(MixedPrecision, ASamplesLogitsIgnoreTheBatch) {
  RuntimeGuard g;
  NoGradGuard ng;
  for (const char* p : {"bf16", "fp16"}) {
    const train::Config c = train::parse_config(with_train(tiny_gpt(), std::string("precision = \"") + p + "\"\n"), "test.toml");
    auto ds = train::train_dataset(c);
    auto model = train::build_model(c, *ds);
    const std::int64_t T = 8, V = ds->num_classes(), pool = 200;
    std::vector<float> ids(static_cast<std::size_t>(pool * T));
    rng::Stream s(12, "t4-windows");
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<float>(s.below(i, static_cast<std::uint64_t>(V)));
    const Tensor data = Tensor::from(ids, Shape{pool, T});
    nn::Context ctx;
    ctx.precision = c.train.precision;
    const std::int64_t sample = 3;
    set_isa(Isa::scalar);
    set_num_threads(1);
    const std::vector<float> want = model->forward(slice(data, 0, sample, sample + 1), ctx).to_vector<float>();
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int t : {1, 3}) {
        set_num_threads(t);
        for (std::int64_t batch : {1, 31, 32, 33, 100}) {
          for (std::int64_t pos : {std::int64_t(0), batch - 1}) {
            std::vector<float> xb;
            for (std::int64_t j = 0; j < batch; ++j) {
              const std::int64_t row = j == pos ? sample : 10 + (j * 7) % (pool - 10);
              xb.insert(xb.end(), ids.begin() + row * T, ids.begin() + (row + 1) * T);
            }
            const Tensor out = model->forward(Tensor::from(xb, Shape{batch, T}), ctx);
            ASSERT_EQ(slice(out, 0, pos, pos + 1).to_vector<float>(), want) << p << " batch=" << batch << " pos=" << pos << " isa=" << isa_name(isa)
                                                                        << " threads=" << t;
          }
        }
      }
    }
  }
}

TEST(MixedPrecision, BadSettingsAreOneLineErrors) {
  EXPECT_THROW_MSG(train::parse_config(with_train(kMlp, "precision = \"fp8\"\n"), "test.toml"), "test.toml:");
  EXPECT_THROW_MSG(train::parse_config(with_train(kMlp, "precision = \"fp8\"\n"), "test.toml"), "expected one of fp32, bf16, fp16");
  EXPECT_THROW_MSG(train::parse_config(with_train(kMlp, "rounding = \"stochastic\"\n"), "test.toml"), "needs precision");
  EXPECT_THROW_MSG(train::parse_config(with_train(kMlp, "precision = \"fp16\"\nloss_scale = 1000\n"), "test.toml"), "power of two");
  EXPECT_THROW_MSG(train::parse_config(with_train(kMlp, "precision = \"fp16\"\nloss_scale = \"auto\"\n"), "test.toml"), "dynamic");
}

TEST(MixedPrecision, ResumingInAnotherPrecisionIsRefused) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(2, 2, 0);
  const std::string cfg = with_train(tiny_gpt(), "precision = \"bf16\"\n");
  const std::string dir = train_into(cfg, "precision_switch", o);
  EXPECT_THROW_MSG(run_text(tiny_gpt(), resume_options(dir, 4)), "was trained in precision bf16; the configuration asks for fp32");
}

TEST(MixedPrecision, Fp16OverflowWithAFixedScaleNamesTheTensor) {
  RuntimeGuard g;
  // a fixed scale of 2^36 overflows fp16's activation gradients at once
  const std::string cfg = with_train(tiny_gpt(), "precision = \"fp16\"\nloss_scale = 68719476736\n");
  EXPECT_THROW_MSG(run_text(cfg, options(2, 2, 0)), "fp16 overflow at step 1: the gradient of parameter '");
  // anomaly detection names the op: the head's rounding of its result's gradient to fp16
  instruments::TrainOptions o = options(2, 2, 0);
  o.detect_anomaly = true;
  EXPECT_THROW_MSG(run_text(cfg, o), "of 'round_to' (label ");
  // and finds nothing in a healthy GPT (the causal mask is finite: numerics §21)
  EXPECT_NO_THROW(run_text(tiny_gpt(), o));
}

}  // namespace
}  // namespace bitgrad::test
