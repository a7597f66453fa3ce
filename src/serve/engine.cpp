// The scheduler and the counters of `bitgrad serve` (engine.hpp).
#include "serve/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "bitgrad/autograd.hpp"
#include "bitgrad/ops.hpp"
#include "bitgrad/runtime.hpp"

namespace bitgrad::serve {
namespace {
constexpr double kLatencyBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
constexpr std::int64_t kBatchBounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

std::string num(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}
}  // namespace

CompletionJob::CompletionJob(CompletionRequest r, std::vector<std::int64_t> prompt)
    : req(std::move(r)), prompt_ids(prompt), prompt_tokens(static_cast<std::int64_t>(prompt.size())), stream(req.seed, "sample") {
  seq.tokens = std::move(prompt);
}

// ---- metrics ------------------------------------------------------------------------------------
void Metrics::request(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[{endpoint, status}];
  std::size_t b = 0;
  while (b < std::size(kLatencyBounds) && seconds > kLatencyBounds[b]) ++b;
  ++latency_[b];
  latency_sum_ += seconds;
  ++latency_count_;
}
void Metrics::batch(std::int64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  std::size_t b = 0;
  while (b < std::size(kBatchBounds) && size > kBatchBounds[b]) ++b;
  ++batch_[b];
  batch_sum_ += size;
  ++batch_count_;
}
void Metrics::tokens(std::int64_t prompt, std::int64_t generated) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}
std::string Metrics::text(std::int64_t waiting, std::int64_t active, const infer::PrefixCache::Stats& prefix) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string s;
  s += "# HELP bitgrad_requests_total Requests answered, by endpoint and HTTP status.\n# TYPE bitgrad_requests_total counter\n";
  for (const auto& [k, n] : requests_)
    s += "bitgrad_requests_total{endpoint=\"" + k.first + "\",code=\"" + std::to_string(k.second) + "\"} " + std::to_string(n) + "\n";
  s += "# HELP bitgrad_prompt_tokens_total Prompt tokens of the completions admitted.\n# TYPE bitgrad_prompt_tokens_total counter\n";
  s += "bitgrad_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  s += "# HELP bitgrad_generated_tokens_total Tokens generated.\n# TYPE bitgrad_generated_tokens_total counter\n";
  s += "bitgrad_generated_tokens_total " + std::to_string(generated_tokens_) + "\n";
  s += "# HELP bitgrad_queue_depth Requests waiting to be admitted.\n# TYPE bitgrad_queue_depth gauge\nbitgrad_queue_depth " +
       std::to_string(waiting) + "\n";
  s += "# HELP bitgrad_active_requests Requests being computed.\n# TYPE bitgrad_active_requests gauge\nbitgrad_active_requests " +
       std::to_string(active) + "\n";
  s += "# HELP bitgrad_batch_size Requests per batch (a decoding step or a prediction batch).\n# TYPE bitgrad_batch_size histogram\n";
  std::int64_t c = 0;
  for (std::size_t b = 0; b < std::size(kBatchBounds); ++b)
    s += "bitgrad_batch_size_bucket{le=\"" + std::to_string(kBatchBounds[b]) + "\"} " + std::to_string(c += batch_[b]) + "\n";
  s += "bitgrad_batch_size_bucket{le=\"+Inf\"} " + std::to_string(batch_count_) + "\n";
  s += "bitgrad_batch_size_sum " + std::to_string(batch_sum_) + "\nbitgrad_batch_size_count " + std::to_string(batch_count_) + "\n";
  s += "# HELP bitgrad_request_latency_seconds Time from a request's arrival to its last byte.\n# TYPE bitgrad_request_latency_seconds histogram\n";
  c = 0;
  for (std::size_t b = 0; b < std::size(kLatencyBounds); ++b)
    s += "bitgrad_request_latency_seconds_bucket{le=\"" + num(kLatencyBounds[b]) + "\"} " + std::to_string(c += latency_[b]) + "\n";
  s += "bitgrad_request_latency_seconds_bucket{le=\"+Inf\"} " + std::to_string(latency_count_) + "\n";
  s += "bitgrad_request_latency_seconds_sum " + num(latency_sum_) + "\nbitgrad_request_latency_seconds_count " + std::to_string(latency_count_) + "\n";
  const std::pair<const char*, std::int64_t> cache[] = {
      {"# HELP bitgrad_prefix_cache_lookups_total New completions looked up in the prefix cache.\n# TYPE bitgrad_prefix_cache_lookups_total counter\n"
       "bitgrad_prefix_cache_lookups_total ", prefix.lookups},
      {"# HELP bitgrad_prefix_cache_hits_total Lookups that reused cached rows.\n# TYPE bitgrad_prefix_cache_hits_total counter\n"
       "bitgrad_prefix_cache_hits_total ", prefix.hits},
      {"# HELP bitgrad_prefix_cache_reused_tokens_total Prompt tokens whose rows came from the cache.\n# TYPE bitgrad_prefix_cache_reused_tokens_total counter\n"
       "bitgrad_prefix_cache_reused_tokens_total ", prefix.reused_tokens},
      {"# HELP bitgrad_prefix_cache_evicted_total Blocks evicted, the least recently used first.\n# TYPE bitgrad_prefix_cache_evicted_total counter\n"
       "bitgrad_prefix_cache_evicted_total ", prefix.evicted},
      {"# HELP bitgrad_prefix_cache_blocks Blocks kept.\n# TYPE bitgrad_prefix_cache_blocks gauge\nbitgrad_prefix_cache_blocks ", prefix.blocks},
      {"# HELP bitgrad_prefix_cache_bytes Bytes of key and value rows kept.\n# TYPE bitgrad_prefix_cache_bytes gauge\nbitgrad_prefix_cache_bytes ",
       prefix.bytes}};
  for (const auto& [head, v] : cache) s += head + std::to_string(v) + "\n";
  return s;
}

// ---- the engine ----------------------------------------------------------------------------------
Engine::Engine(const infer::RunModel& m, const ServeOptions& o, Metrics& metrics) : m_(m), o_(o), metrics_(metrics) {
  if (m.text()) decoder_ = std::make_unique<infer::Decoder>(m);
  if (decoder_ && decoder_->keeps_rows())
    prefix_ = std::make_unique<infer::PrefixCache>(o.prefix_cache_bytes, std::max<std::int64_t>(1, std::min(o.prefix_block, m.cfg.data.block_size)));
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {  // a process limit (ulimit -u): named before any address is printed
    throw Error(std::string("serve: cannot start the engine's thread (") + e.what() + ")");
  }
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  thread_.join();
}

bool Engine::submit(const std::shared_ptr<CompletionJob>& j) {
  {
    std::lock_guard<std::mutex> l(mu_);
    const auto inside = static_cast<std::int64_t>(waiting_.size() + predicts_.size() + active_.size());
    if (stopping_ || closed_ || inside >= static_cast<std::int64_t>(o_.max_batch) + o_.max_queue) return false;
    metrics_.tokens(j->prompt_tokens, 0);
    if (j->req.max_tokens == 0 && !(j->req.echo && j->req.logprobs >= 0)) {  // nothing to compute
      finish(*j, "length");
      return true;
    }
    waiting_.push_back(j);
  }
  work_.notify_all();
  return true;
}

bool Engine::submit(const std::shared_ptr<PredictJob>& j) {
  {
    std::lock_guard<std::mutex> l(mu_);
    const auto inside = static_cast<std::int64_t>(waiting_.size() + predicts_.size() + active_.size());
    if (stopping_ || closed_ || inside >= static_cast<std::int64_t>(o_.max_batch) + o_.max_queue) return false;
    predicts_.push_back(j);
  }
  work_.notify_all();
  return true;
}

void Engine::poke() { work_.notify_all(); }

std::int64_t Engine::waiting() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<std::int64_t>(waiting_.size() + predicts_.size());
}
std::int64_t Engine::active() const {
  std::lock_guard<std::mutex> l(mu_);
  return static_cast<std::int64_t>(active_.size());
}
infer::PrefixCache::Stats Engine::prefix_stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return prefix_stats_;
}

// The end of s[0, end) moved back before a UTF-8 sequence it cuts short: a lead byte whose
// sequence needs more bytes than end leaves it (at most 3 bytes back).
static std::size_t whole_characters(const std::string& s, std::size_t end) {
  std::size_t p = end;
  while (p > 0 && end - p < 3 && (static_cast<unsigned char>(s[p - 1]) & 0xC0) == 0x80) --p;  // continuation bytes
  if (p == 0) return end;
  const unsigned char lead = static_cast<unsigned char>(s[p - 1]);
  const std::size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return end - (p - 1) < need ? p - 1 : end;
}

void Engine::close_intake() {
  std::lock_guard<std::mutex> l(mu_);
  closed_ = true;
}

bool Engine::idle() const {
  std::lock_guard<std::mutex> l(mu_);
  return waiting_.empty() && predicts_.empty() && active_.empty();
}

void Engine::abort_all(const std::string& why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto* q : {&waiting_}) {
      for (auto& j : *q) {
        j->error = why;
        finish(*j, "error");
      }
      q->clear();
    }
    for (auto& j : active_) {
      j->error = why;
      finish(*j, "error");
    }
    active_.clear();
    for (auto& j : predicts_) {
      j->error = why;
      j->done = true;
      if (j->on_done) j->on_done();
    }
    predicts_.clear();
  }
  work_.notify_all();
}

void Engine::finish(CompletionJob& j, const std::string& reason) {
  if (j.released < j.text.size()) j.pieces.push_back(j.text.substr(j.released));
  j.released = j.text.size();
  j.done = true;
  j.finish_reason = reason;
  if (j.on_progress) j.on_progress(j);
}

void Engine::loop() {
  // the batch's execution context: its own pool of kernel threads, nothing process-wide
  ExecContext ctx(o_.threads);
  ExecScope scope(ctx);
  for (;;) {
    std::vector<std::shared_ptr<CompletionJob>> batch;
    std::vector<std::shared_ptr<PredictJob>> preds;
    {
      std::unique_lock<std::mutex> l(mu_);
      work_.wait(l, [&] { return stopping_ || !waiting_.empty() || !predicts_.empty() || !active_.empty(); });
      // the cancelled leave first: their slots are free for the waiting
      for (auto& j : active_)
        if (j->cancelled.load()) finish(*j, "cancelled");
      std::erase_if(active_, [](const auto& j) { return j->done; });
      while (!waiting_.empty() && static_cast<int>(active_.size()) < o_.max_batch) {
        auto j = waiting_.front();
        waiting_.pop_front();
        if (j->cancelled.load()) {
          finish(*j, "cancelled");
          continue;
        }
        active_.push_back(j);
      }
      while (!predicts_.empty() && static_cast<int>(preds.size()) < o_.max_batch) {
        preds.push_back(predicts_.front());
        predicts_.pop_front();
      }
      if (active_.empty() && preds.empty()) {
        if (stopping_ && waiting_.empty() && predicts_.empty()) return;
        continue;
      }
      batch = active_;
    }
    if (!preds.empty()) predict(preds);
    if (!batch.empty()) step(batch);
  }
}

void Engine::step(std::vector<std::shared_ptr<CompletionJob>>& batch) {
  // echo's log-probabilities of the prompt, once, before the job's first token (computed here,
  // handed over under the lock: a drain may end the job meanwhile)
  std::vector<std::vector<infer::TokenLogprobs>> echoes(batch.size());
  std::vector<std::string> failed(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const CompletionJob& j = *batch[i];
    if (!j.req.echo || j.req.logprobs < 0 || j.echoed) continue;
    try {
      echoes[i] = decoder_->prompt_logprobs(j.seq.tokens, j.req.logprobs);
    } catch (const std::exception& e) {
      failed[i] = e.what();
    }
  }
  {  // those that failed there, and those that ask for no token, end here
    std::lock_guard<std::mutex> l(mu_);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      CompletionJob& j = *batch[i];
      if (j.req.echo && j.req.logprobs >= 0 && !j.echoed) {
        j.echoed = true;
        j.prompt_logprobs = std::move(echoes[i]);
      }
      if (j.done || (failed[i].empty() && j.req.max_tokens > 0)) continue;
      if (!failed[i].empty()) j.error = failed[i];
      finish(j, failed[i].empty() ? "length" : "error");
    }
    std::erase_if(active_, [](const auto& j) { return j->done; });
    std::erase_if(batch, [](const auto& j) { return j->done; });
  }
  if (batch.empty()) return;
  std::vector<infer::Decoder::Sequence*> seqs;
  for (auto& j : batch) seqs.push_back(&j->seq);
  std::vector<std::vector<float>> logits;
  std::string error;
  try {
    // a new request's prompt prefix from the cache: the same rows, not computed again
    if (prefix_)
      for (infer::Decoder::Sequence* q : seqs) prefix_->attach(*q, m_.cfg.data.block_size);
    logits = decoder_->next_logits(seqs);
    if (prefix_)
      for (infer::Decoder::Sequence* q : seqs) prefix_->remember(*q);
  } catch (const std::exception& e) {
    error = e.what();
  }
  metrics_.batch(static_cast<std::int64_t>(batch.size()));
  const std::int64_t V = m_.classes;
  std::lock_guard<std::mutex> l(mu_);
  if (prefix_) prefix_stats_ = prefix_->stats();
  if (!error.empty()) {
    for (auto& j : batch) {
      j->error = error;
      finish(*j, "error");
    }
    std::erase_if(active_, [](const auto& j) { return j->done; });
    return;
  }
  for (std::size_t s = 0; s < batch.size(); ++s) {
    CompletionJob& j = *batch[s];
    if (j.done) continue;  // ended meanwhile (a drain that ran out of time)
    const auto pos = static_cast<std::uint64_t>(j.seq.tokens.size());  // the position of the token drawn
    std::int64_t t = 0;
    try {
      t = infer::draw_token(logits[s].data(), V, j.req.temperature, j.req.top_k, j.stream.uniform_f64(pos));
    } catch (const std::exception& e) {  // non-finite logits: this request ends in an error
      j.error = e.what();
      finish(j, "error");
      continue;
    }
    if (j.req.logprobs >= 0) j.logprobs.push_back(infer::token_logprobs(logits[s].data(), V, t, j.req.logprobs));
    j.seq.tokens.push_back(t);
    j.generated.push_back(t);
    j.text = m_.corpus->decode(j.generated);
    std::size_t cut = std::string::npos, hold = 0;
    for (const std::string& st : j.req.stop) {
      cut = std::min(cut, j.text.find(st));
      hold = std::max(hold, st.size() - 1);
    }
    if (cut != std::string::npos) {
      j.text.resize(cut);
      finish(j, "stop");
    } else if (static_cast<std::int64_t>(j.generated.size()) >= j.req.max_tokens) {
      finish(j, "length");
    } else {
      // release what no stop string can still claim, at a character's start, and never the first
      // bytes of a character whose last ones are yet to be drawn (a byte vocabulary)
      std::size_t r = j.text.size() > hold ? j.text.size() - hold : 0;
      while (r > j.released && r < j.text.size() && (static_cast<unsigned char>(j.text[r]) & 0xC0) == 0x80) --r;
      r = std::max(j.released, whole_characters(j.text, r));
      if (r > j.released) {
        j.pieces.push_back(j.text.substr(j.released, r - j.released));
        j.released = r;
      } else {
        j.pieces.emplace_back();  // one piece per token step, empty or not
      }
      if (j.on_progress) j.on_progress(j);
    }
  }
  metrics_.tokens(0, static_cast<std::int64_t>(batch.size()));
  std::erase_if(active_, [](const auto& j) { return j->done; });
}

void Engine::predict(std::vector<std::shared_ptr<PredictJob>>& batch) {
  std::int64_t total = 0;
  for (auto& j : batch) total += j->req.samples;
  std::vector<float> in;
  in.reserve(static_cast<std::size_t>(total * m_.sample_shape.numel()));
  for (auto& j : batch) in.insert(in.end(), j->req.inputs.begin(), j->req.inputs.end());
  std::vector<std::int64_t> dims{total};
  for (std::int64_t d : m_.sample_shape) dims.push_back(d);
  std::string error;
  Tensor logits, probs;
  try {
    NoGradGuard ng;
    logits = contiguous(m_.model->forward(Tensor::from(in, Shape(dims)), m_.context()));
    if (m_.classes > 0 && logits.ndim() == 2) probs = contiguous(softmax(logits, -1));
  } catch (const std::exception& e) {
    error = e.what();
  }
  metrics_.batch(static_cast<std::int64_t>(batch.size()));
  std::lock_guard<std::mutex> l(mu_);
  std::int64_t row = 0;
  for (auto& j : batch) {
    if (!error.empty()) {
      j->error = error;
    } else {
      const std::int64_t per = logits.numel() / total;
      j->per = per;
      const float* lp = logits.data<float>() + row * per;
      j->logits.assign(lp, lp + j->req.samples * per);
      // outputs that overflowed (inputs near float's largest) are no answer
      for (std::size_t k = 0; k < j->logits.size() && j->error.empty(); ++k)
        if (!std::isfinite(j->logits[k]))
          j->error = "the model's output " + std::to_string(k % static_cast<std::size_t>(per)) + " of sample " +
                     std::to_string(k / static_cast<std::size_t>(per)) + " is not finite: the inputs overflow its arithmetic";
      if (probs.defined()) {
        const float* pp = probs.data<float>() + row * per;
        j->probabilities.assign(pp, pp + j->req.samples * per);
      }
    }
    row += j->req.samples;
    j->done = true;
    if (j->on_done) j->on_done();
  }
}

}  // namespace bitgrad::serve
