// The request bodies of `bitgrad serve` (docs/serving.md), parsed and checked before anything
// runs: a body that is not JSON, a field of the wrong type or out of range, an unknown field,
// is a RequestError naming the field, answered 4xx. Kept apart from the server so that it can
// be fuzzed alone (tests/fuzz/fuzz_serve_request.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bitgrad/error.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad::serve {

class RequestError : public Error {
 public:
  RequestError(int status, std::string field, const std::string& message) : Error(message), status(status), field(std::move(field)) {}
  int status;         // 400, 413, 422
  std::string field;  // "" when the body as a whole is wrong
};

struct Limits {
  std::int64_t max_tokens = 1024;       // per completion
  std::int64_t max_prompt = 1 << 16;    // bytes of a prompt
  std::int64_t max_stops = 4;           // stop strings
  std::int64_t max_stop_bytes = 64;     // bytes of one stop string
  std::int64_t max_samples = 4096;      // inputs of one prediction
  std::int64_t max_logprobs = 20;       // alternatives listed per token
  std::int64_t max_echo_tokens = 1024;  // prompt tokens whose log-probabilities echo computes
};

// POST /v1/completions: a subset of OpenAI's shape.
struct CompletionRequest {
  std::string model;  // if given, must name the served model
  std::string prompt;
  std::int64_t max_tokens = 16;
  double temperature = 1.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
  std::vector<std::string> stop;
  bool stream = false;
  std::int64_t logprobs = -1;  // -1 (absent or null): none; k: each token's and the k most likely
  bool echo = false;           // the prompt before the completion (and its log-probabilities)
};
CompletionRequest parse_completion(std::string_view body, const Limits& limits);

// POST /v1/predict: `inputs` as nested arrays [N, sample shape...] (or one sample, of the
// sample shape), or `inputs_base64`: N samples of little-endian f32, N * numel * 4 bytes.
struct PredictRequest {
  std::string model;
  std::int64_t samples = 0;
  std::vector<float> inputs;  // samples * numel(sample shape)
};
PredictRequest parse_predict(std::string_view body, const Shape& sample_shape, const Limits& limits);

// The JSON error body {"error": {"message", "type", "param", "code"}}.
std::string error_body(int status, const std::string& field, const std::string& message);

}  // namespace bitgrad::serve
