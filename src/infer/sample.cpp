// `bitgrad sample`: generation from a trained text model, the same text at every thread count
// and code path (the forward pass is canonical, the draw is scalar f64 keyed by position). The
// model is built from the run's configuration and vocabulary.json; the corpus is never read.
#include "bitgrad/infer.hpp"

#include <algorithm>
#include <limits>

#include "bitgrad/io.hpp"
#include "bitgrad/math.hpp"
#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/train.hpp"
#include "train/run_dir.hpp"

namespace bitgrad::infer {
namespace {

// What build_model reads of a text dataset (windows of `block` tokens, a label per position,
// the vocabulary's size), without the windows themselves.
class TextShape : public data::Dataset {
 public:
  TextShape(std::int64_t block, std::int64_t vocab) : block_(block), vocab_(vocab) {}
  std::int64_t size() const override { return 0; }
  Shape sample_shape() const override { return Shape{block_}; }
  std::int64_t num_classes() const override { return vocab_; }
  Shape target_shape() const override { return Shape{block_}; }
  void get(std::int64_t, float*, std::int64_t*, float*) const override { throw Error("sample: the model's shape holds no samples"); }
  std::string describe() const override { return "text shape"; }

 private:
  std::int64_t block_, vocab_;
};

// The token drawn from the logits of one position (SampleOptions' rule).
std::int64_t draw(const float* logits, std::int64_t V, const SampleOptions& o, double u) {
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;  // the first maximum
  if (o.temperature == 0) return best;
  std::vector<double> l(static_cast<std::size_t>(V));
  for (std::int64_t i = 0; i < V; ++i) l[static_cast<std::size_t>(i)] = static_cast<double>(logits[i]) / o.temperature;
  std::vector<bool> keep(static_cast<std::size_t>(V), true);
  if (o.top_k > 0 && o.top_k < V) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(V));
    for (std::int64_t i = 0; i < V; ++i) ids[static_cast<std::size_t>(i)] = i;
    // a total order: larger logit first, then the lower id
    std::stable_sort(ids.begin(), ids.end(), [&](std::int64_t a, std::int64_t b) { return l[static_cast<std::size_t>(a)] > l[static_cast<std::size_t>(b)]; });
    std::fill(keep.begin(), keep.end(), false);
    for (std::int64_t r = 0; r < o.top_k; ++r) keep[static_cast<std::size_t>(ids[static_cast<std::size_t>(r)])] = true;
  }
  const double m = l[static_cast<std::size_t>(best)];
  std::vector<double> p(static_cast<std::size_t>(V), 0.0);
  double total = 0;
  for (std::int64_t i = 0; i < V; ++i)
    if (keep[static_cast<std::size_t>(i)]) total += p[static_cast<std::size_t>(i)] = math::exp(l[static_cast<std::size_t>(i)] - m);
  const double target = u * total;
  double run = 0;
  std::int64_t last = best;
  for (std::int64_t i = 0; i < V; ++i) {
    if (!keep[static_cast<std::size_t>(i)]) continue;
    run += p[static_cast<std::size_t>(i)];
    last = i;
    if (run > target) return i;
  }
  return last;  // u * total rounded up to the sum itself
}

}  // namespace

SampleResult sample(const std::string& run_dir, const SampleOptions& o) {
  BITGRAD_CHECK(o.tokens >= 0, "sample", "--tokens must be >= 0, got ", o.tokens);
  BITGRAD_CHECK(o.temperature >= 0 && o.temperature <= 1e6, "sample", "--temperature must be in [0, 1e6], got ", o.temperature);
  BITGRAD_CHECK(o.top_k >= 0, "sample", "--top-k must be >= 0, got ", o.top_k);
  const train::RunDir dir = train::RunDir::open(run_dir, "sample");
  const train::Config cfg = train::load_config(dir.config_path());
  if (cfg.data.dataset != train::DatasetKind::text)
    throw Error("sample: " + run_dir + " trained on " + train::to_string(cfg.data.dataset) + " data; sampling needs a text model");
  const std::string vocab_file = dir.vocabulary_path();
  if (!dir.has("vocabulary.json"))
    throw NotFoundError("sample: " + vocab_file + " does not exist: the run was trained before runs kept their vocabulary; resume its training (bitgrad train --resume " +
                        run_dir + " --steps MORE) to write it, or train it again");
  const auto corpus = data::vocabulary_from_json(io::read_file(vocab_file), vocab_file);
  ThreadCountScope threads(o.threads);
  auto model = train::build_model(cfg, TextShape(cfg.data.block_size, corpus->vocab_size()));
  const train::Checkpoint ck = dir.latest_checkpoint();
  {
    NoGradGuard ng;
    auto params = model->named_parameters();
    for (auto& b : model->named_buffers()) params.push_back(b);  // the checkpoint's model file: parameters, then buffers
    BITGRAD_CHECK(ck.params.size() == params.size(), "sample", run_dir, ": the checkpoint holds ", ck.params.size(), " tensors, the model ",
                  params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      BITGRAD_CHECK(ck.params[i].first == params[i].first && ck.params[i].second.shape() == params[i].second.shape(), "sample", run_dir,
                    ": checkpoint parameter '", ck.params[i].first, "' does not match the model's '", params[i].first, "'");
      params[i].second.copy_from(ck.params[i].second);
    }
  }
  std::vector<std::int64_t> text = corpus->encode(o.prompt, "--prompt");
  BITGRAD_CHECK(!text.empty(), "sample", "--prompt is empty; give at least one character");
  const std::int64_t block = cfg.data.block_size, V = corpus->vocab_size();
  const rng::Stream stream(o.seed, "sample");
  SampleResult r;
  r.step = ck.info.step;
  NoGradGuard ng;
  for (std::int64_t n = 0; n < o.tokens; ++n) {
    const std::int64_t len = std::min<std::int64_t>(block, static_cast<std::int64_t>(text.size()));
    std::vector<float> ctx(static_cast<std::size_t>(len));
    for (std::int64_t i = 0; i < len; ++i) ctx[static_cast<std::size_t>(i)] = static_cast<float>(text[text.size() - static_cast<std::size_t>(len - i)]);
    Tensor logits = model->forward(Tensor::from(ctx, Shape{1, len}), nn::Context{});  // [1, len, V]
    const float* last = logits.data<float>() + (len - 1) * V;
    const auto pos = static_cast<std::uint64_t>(text.size());  // the position of the token drawn
    const std::int64_t t = draw(last, V, o, stream.uniform_f64(pos));
    text.push_back(t);
    r.tokens.push_back(t);
  }
  r.text = corpus->decode(text);
  return r;
}

}  // namespace bitgrad::infer
