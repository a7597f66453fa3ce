// `bitgrad sample`: generation from a trained text model, the same text at every thread count
// and code path (the forward pass is canonical, the draw is scalar f64 keyed by position). The
// model is built from the run's configuration and vocabulary.json; the corpus is never read.
#include "bitgrad/infer.hpp"

#include <algorithm>
#include <limits>

#include "bitgrad/rng.hpp"
#include "bitgrad/runtime.hpp"
#include "infer/run_model.hpp"

namespace bitgrad::infer {

SampleResult sample(const std::string& run_dir, const SampleOptions& o) {
  BITGRAD_CHECK(o.tokens >= 0, "sample", "--tokens must be >= 0, got ", o.tokens);
  BITGRAD_CHECK(o.temperature >= 0 && o.temperature <= 1e6, "sample", "--temperature must be in [0, 1e6], got ", o.temperature);
  BITGRAD_CHECK(o.top_k >= 0, "sample", "--top-k must be >= 0, got ", o.top_k);
  BITGRAD_CHECK(o.logprobs >= -1, "sample", "--logprobs must be >= 0, got ", o.logprobs);
  ThreadCountScope threads(o.threads);
  const RunModel rm = load_run_model(run_dir, "sample", true);
  const auto& cfg = rm.cfg;
  const auto& corpus = rm.corpus;
  const auto& model = rm.model;
  std::vector<std::int64_t> text = corpus->encode(o.prompt, "--prompt");
  BITGRAD_CHECK(!text.empty(), "sample", "--prompt is empty; give at least one character");
  const std::int64_t block = cfg.data.block_size, V = corpus->vocab_size();
  const rng::Stream stream(o.seed, "sample");
  SampleResult r;
  r.step = rm.step;
  NoGradGuard ng;
  for (std::int64_t n = 0; n < o.tokens; ++n) {
    const std::int64_t len = std::min<std::int64_t>(block, static_cast<std::int64_t>(text.size()));
    std::vector<float> ctx(static_cast<std::size_t>(len));
    for (std::int64_t i = 0; i < len; ++i) ctx[static_cast<std::size_t>(i)] = static_cast<float>(text[text.size() - static_cast<std::size_t>(len - i)]);
    Tensor logits = model->forward(Tensor::from(ctx, Shape{1, len}), rm.context());  // [1, len, V]
    const float* last = logits.data<float>() + (len - 1) * V;
    const auto pos = static_cast<std::uint64_t>(text.size());  // the position of the token drawn
    const std::int64_t t = draw_token(last, V, o.temperature, o.top_k, stream.uniform_f64(pos));
    if (o.logprobs >= 0) r.logprobs.push_back(token_logprobs(last, V, t, o.logprobs));
    text.push_back(t);
    r.tokens.push_back(t);
  }
  r.text = corpus->decode(text);
  std::size_t offset = 0;
  if (o.logprobs >= 0)
    r.logprobs_json = logprobs_json(r.logprobs, r.tokens, *corpus, 0, r.logprobs.size(), offset).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

}  // namespace bitgrad::infer
