// Inference: a trained model run forward, outside training — today `bitgrad sample`, text from a
// language model's run directory; the room a server grows from (docs/architecture.md). It reads
// a run (config.toml, the latest checkpoint, vocabulary.json) and never the training data. It
// sits on top of bitgrad/train.hpp, beside the instruments.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace bitgrad::infer {

// `bitgrad sample`: text from a trained language model (a run directory of a text dataset, its
// latest checkpoint). Token i of the text (prompt included) is drawn with u = uniform_f64(i) of
// the Philox stream (seed, "sample"): logits of the last position in f32, then in f64 divided
// by the temperature, the top k kept (ties to the lower token id), p = exp(l - max) summed in
// token order, the first token whose running sum exceeds u * sum. Temperature 0: the first
// maximum. So the text depends on (run, prompt, tokens, temperature, k, seed) only.
struct SampleOptions {
  std::string prompt = "\n";
  std::int64_t tokens = 200;
  double temperature = 1.0;
  std::int64_t top_k = 0;  // 0: every token
  std::uint64_t seed = 0;
  int threads = 0;
  std::int64_t logprobs = -1;  // >= 0: each generated token's log-probability and the k most likely
};
// One position's log-probabilities: the f32 log_softmax of its logits row (numerics §9), the
// bits a training forward of the same window computes; `top` the k most likely tokens, the more
// likely first, ties to the lower id (a JSON object of them lists its keys sorted).
struct TokenLogprobs {
  std::int64_t token = 0;
  float logprob = 0;
  std::vector<std::pair<std::int64_t, float>> top;
};
struct SampleResult {
  std::string text;                  // prompt + generated
  std::vector<std::int64_t> tokens;  // generated token ids
  std::int64_t step = 0;             // of the checkpoint sampled from
  std::vector<TokenLogprobs> logprobs;  // per generated token, with SampleOptions::logprobs >= 0
  std::string logprobs_json;  // the same as `bitgrad serve` writes them (OpenAI's object, one line)
};
SampleResult sample(const std::string& run_dir, const SampleOptions& o);
// A run trained before runs kept their vocabulary (no vocabulary.json) is refused, naming the
// file; resuming its training writes one.

}  // namespace bitgrad::infer

// ---- bitgrad export: a run's latest checkpoint as files other tools read ----------
namespace bitgrad::infer {

struct ExportOptions {
  std::string safetensors;  // non-empty: the parameters and buffers, by name (an ONNX model's: its initializer names)
  std::string onnx;         // non-empty: an ONNX model's graph with the trained initializers ([model] onnx runs only)
};
struct ExportResult {
  std::int64_t step = 0;        // of the checkpoint exported
  std::size_t tensors = 0;      // written to the safetensors file
};
ExportResult export_run(const std::string& run_dir, const ExportOptions& o);

}  // namespace bitgrad::infer
