// The scheduler of `bitgrad serve`: one thread, in an execution context of its own, that runs
// the waiting requests in batches. Text generation is continuous: each iteration admits waiting
// completions up to max_batch, computes the next token of every active one in one batch
// (infer::Decoder: a KV cache per request), and retires the finished and the cancelled ones.
// Predictions waiting at an iteration's start are run as one batch. What a request gets does not
// depend on its batch: every row is computed as alone (docs/serving.md).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bitgrad/rng.hpp"
#include "serve/serve.hpp"
#include "infer/prefix_cache.hpp"
#include "infer/run_model.hpp"
#include "serve/request.hpp"

namespace bitgrad::serve {

struct CompletionJob {
  CompletionJob(CompletionRequest r, std::vector<std::int64_t> prompt);
  CompletionRequest req;
  std::vector<std::int64_t> prompt_ids;  // the prompt's tokens (seq.tokens begins with them)
  infer::Decoder::Sequence seq;
  std::int64_t prompt_tokens = 0;
  rng::Stream stream;  // (seed, "sample"): token i of the text drawn with uniform_f64(i)
  std::vector<std::int64_t> generated;
  std::vector<infer::TokenLogprobs> prompt_logprobs;  // echo: the prompt's tokens 1 .. P-1 (guarded by the engine's lock)
  bool echoed = false;                                // (likewise)
  std::vector<infer::TokenLogprobs> logprobs;  // per generated token, with req.logprobs >= 0 (guarded by the engine's lock)
  std::atomic<bool> cancelled{false};  // the client went away
  // Called under the engine's lock, on the thread that moved the job: new pieces, or done. It
  // must be quick and must not call the engine (the server posts the bytes to the connection).
  std::function<void(CompletionJob&)> on_progress;
  std::size_t delivered = 0;  // pieces the server has written (guarded by the engine's lock)
  std::size_t delivered_logprobs = 0;  // logprobs entries the server has written (likewise)
  std::size_t delivered_offset = 0;    // the byte offset of the next entry's token (likewise)
  // guarded by the engine's lock
  std::string text;                 // the completion so far (cut at a stop string at the end)
  std::vector<std::string> pieces;  // the text released per token step (streaming: one event each)
  std::size_t released = 0;         // bytes of text in pieces
  bool done = false;
  std::string finish_reason;  // length, stop, cancelled, error
  std::string error;
};

struct PredictJob {
  PredictRequest req;
  std::vector<float> logits, probabilities;  // samples * per
  std::int64_t per = 0;                      // outputs per sample
  bool done = false;
  std::string error;
  std::function<void()> on_done;  // under the engine's lock, as CompletionJob::on_progress
};

// Prometheus text of the counters (GET /metrics).
class Metrics {
 public:
  void request(const std::string& endpoint, int status, double seconds);
  void batch(std::int64_t size);
  void tokens(std::int64_t prompt, std::int64_t generated);
  std::string text(std::int64_t waiting, std::int64_t active, const infer::PrefixCache::Stats& prefix) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::int64_t> requests_;
  std::vector<std::int64_t> latency_ = std::vector<std::int64_t>(14, 0);
  double latency_sum_ = 0;
  std::int64_t latency_count_ = 0;
  std::vector<std::int64_t> batch_ = std::vector<std::int64_t>(10, 0);
  std::int64_t batch_sum_ = 0, batch_count_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0;
};

class Engine {
 public:
  Engine(const infer::RunModel& m, const ServeOptions& o, Metrics& metrics);
  ~Engine();  // finishes what was submitted, then stops
  // false: the queue is full (answer 503)
  bool submit(const std::shared_ptr<CompletionJob>& j);
  bool submit(const std::shared_ptr<PredictJob>& j);
  // Wakes the scheduler so that it sees a cancelled job now.
  void poke();
  std::int64_t waiting() const;
  std::int64_t active() const;
  infer::PrefixCache::Stats prefix_stats() const;
  // The drain (Server::drain): no new request is taken (submit returns false); idle() says when
  // the ones inside are done; abort_all ends them with an error.
  void close_intake();
  bool idle() const;
  void abort_all(const std::string& why);

 private:
  void loop();
  void step(std::vector<std::shared_ptr<CompletionJob>>& batch);
  void predict(std::vector<std::shared_ptr<PredictJob>>& batch);
  void finish(CompletionJob& j, const std::string& reason);  // under mu_
  const infer::RunModel& m_;
  ServeOptions o_;
  Metrics& metrics_;
  std::unique_ptr<infer::Decoder> decoder_;
  std::unique_ptr<infer::PrefixCache> prefix_;  // the engine thread's alone
  infer::PrefixCache::Stats prefix_stats_;      // a copy, under mu_
  mutable std::mutex mu_;
  std::condition_variable work_;
  std::deque<std::shared_ptr<CompletionJob>> waiting_;
  std::deque<std::shared_ptr<PredictJob>> predicts_;
  std::vector<std::shared_ptr<CompletionJob>> active_;
  bool stopping_ = false;
  bool closed_ = false;  // draining: submit refuses
  std::thread thread_;
};

}  // namespace bitgrad::serve
