// The HTTP face of `bitgrad serve` (serve/serve.hpp, docs/serving.md): the routes over the HTTP
// front (serve/http.hpp), nlohmann for JSON. The handlers parse and check a request
// (request.cpp) and hand it to the engine; the engine's callbacks write what it computed to the
// connection. Nothing here touches the numbers, and no thread waits on a request: a waiting
// request is data in the engine's queue. Response bodies carry no clock and no counter, so their
// bytes are the request's.

#include <atomic>
#include <chrono>
#include <thread>
#include <nlohmann/json.hpp>

#include "serve/serve.hpp"
#include "infer/run_model.hpp"
#include "serve/engine.hpp"
#include "serve/http.hpp"
#include "serve/request.hpp"

namespace bitgrad::serve {
namespace {
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// FNV-1a of the text: a completion's id is a function of the model and the request
std::string id_of(const std::string& model, const std::string& body) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const std::string* s : {&model, &body})
    for (char c : *s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

std::string base_name(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

struct Server::Impl {
  ServeOptions o;
  infer::RunModel model;
  std::string name;
  Limits limits;
  Metrics metrics;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<HttpFront> front;
  int port = 0;
  std::atomic<bool> draining{false};  // new requests are answered 503
  std::atomic<bool> cut{false};       // a drain to end now (cut_drain)

  static HttpResponse error(int status, const std::string& field, const std::string& message) {
    HttpResponse r;
    r.status = status;
    if (status == 503) r.headers.emplace_back("Retry-After", "1");
    r.body = error_body(status, field, message);
    return r;
  }
  // the answer, counted in the metrics with the time since the request was taken
  void answer(const std::shared_ptr<Reply>& reply, const std::string& endpoint, Clock::time_point t0, const HttpResponse& r) {
    metrics.request(endpoint, r.status, std::chrono::duration<double>(Clock::now() - t0).count());
    reply->send(r);
  }

  void handle(HttpRequest&& req, const std::shared_ptr<Reply>& reply);
  void completions(const HttpRequest& req, const std::shared_ptr<Reply>& reply, Clock::time_point t0);
  void predict(const HttpRequest& req, const std::shared_ptr<Reply>& reply, Clock::time_point t0);
  HttpResponse predict_body(const PredictJob& job) const;
};

void Server::Impl::handle(HttpRequest&& req, const std::shared_ptr<Reply>& reply) {
  const auto t0 = Clock::now();
  struct Route {
    const char* path;
    const char* method;
  };
  static const Route routes[] = {{"/v1/completions", "POST"}, {"/v1/predict", "POST"}, {"/v1/models", "GET"}, {"/health", "GET"}, {"/metrics", "GET"}};
  const Route* route = nullptr;
  for (const Route& r : routes)
    if (req.path == r.path) route = &r;
  if (!route) {
    reply->send(error(404, "", "no endpoint " + req.method + " " + req.path +
                                   " (POST /v1/completions, POST /v1/predict, GET /v1/models, GET /health, GET /metrics)"));
    return;
  }
  const std::string allow = route->method;
  if (req.method != allow && !(allow == "GET" && req.method == "HEAD")) {
    HttpResponse r = error(405, "", req.method + " " + req.path + " is not served; this endpoint takes " + allow);
    r.headers.emplace_back("Allow", allow);
    reply->send(r);
    return;
  }
  const std::string endpoint = route->path;
  try {
    if (endpoint == "/v1/completions") return completions(req, reply, t0);
    if (endpoint == "/v1/predict") return predict(req, reply, t0);
    HttpResponse r;
    if (endpoint == "/metrics") {
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics.text(engine->waiting(), engine->active(), engine->prefix_stats());
      reply->send(r);  // not counted: a scrape would count itself
      return;
    }
    if (endpoint == "/v1/models") {
      json m = {{"id", name},
                {"object", "model"},
                {"owned_by", "bitgrad"},
                {"kind", model.text() ? "text" : "classifier"},
                {"step", model.step},
                {"input_shape", std::vector<std::int64_t>(model.sample_shape.begin(), model.sample_shape.end())},
                {"classes", model.classes},
                {"endpoint", model.text() ? "/v1/completions" : "/v1/predict"}};
      if (model.text()) m["block_size"] = model.cfg.data.block_size;
      r.body = dump(json{{"object", "list"}, {"data", json::array({m})}}) + "\n";
    } else {
      r.body = dump(json{{"status", draining ? "draining" : "ok"}, {"model", name}}) + "\n";
      if (draining) r.status = 503;
    }
    answer(reply, endpoint, t0, r);
  } catch (const RequestError& e) {
    answer(reply, endpoint, t0, error(e.status, e.field, e.what()));
  } catch (const std::exception& e) {
    answer(reply, endpoint, t0, error(500, "", e.what()));
  }
}

void Server::Impl::completions(const HttpRequest& req, const std::shared_ptr<Reply>& reply, Clock::time_point t0) {
  if (!model.text()) throw RequestError(404, "", "this server serves a classifier (" + name + "): POST /v1/predict");
  CompletionRequest r = parse_completion(req.body, limits);
  if (!r.model.empty() && r.model != name) throw RequestError(404, "model", "'model' names '" + r.model + "'; this server serves '" + name + "'");
  std::vector<std::int64_t> prompt;
  try {
    prompt = model.corpus->encode(r.prompt, "prompt");
  } catch (const std::exception& e) {
    throw RequestError(400, "prompt", e.what());
  }
  if (r.echo && r.logprobs >= 0 && static_cast<std::int64_t>(prompt.size()) > limits.max_echo_tokens)
    throw RequestError(413, "echo", "the prompt's log-probabilities are served for prompts of at most " + std::to_string(limits.max_echo_tokens) +
                                        " tokens; this one has " + std::to_string(prompt.size()));
  if (draining) throw RequestError(503, "", "the server is stopping; retry on another");
  const bool stream = r.stream;
  auto job = std::make_shared<CompletionJob>(std::move(r), std::move(prompt));
  const std::string id = "cmpl-" + id_of(name, req.body);
  // the event's or the answer's body; with logprobs, those of the tokens not yet written
  auto chunk = [this, id](const std::string& text, const json& reason, CompletionJob* lp) {
    json choice{{"index", 0}, {"text", text}, {"finish_reason", reason}};
    if (lp != nullptr && lp->req.logprobs >= 0) {
      choice["logprobs"] = infer::logprobs_json(lp->logprobs, lp->generated, *model.corpus, lp->delivered_logprobs, lp->logprobs.size(),
                                                lp->delivered_offset);
      lp->delivered_logprobs = lp->logprobs.size();
    }
    return json{{"id", id}, {"object", "text_completion"}, {"model", name}, {"choices", json::array({choice})}};
  };
  if (!stream) {
    job->on_progress = [this, reply, chunk, t0](CompletionJob& j) {
      if (!j.done) return;
      if (j.finish_reason == "error") return answer(reply, "/v1/completions", t0, error(500, "", j.error));
      json body = chunk(j.req.echo ? j.req.prompt + j.text : j.text, j.finish_reason, &j);
      if (j.req.echo && j.req.logprobs >= 0) {  // the prompt's entries first, then the completion's after its bytes
        json all = infer::prompt_logprobs_json(j.prompt_logprobs, j.prompt_ids, *model.corpus);
        const json& gen = body["choices"][0]["logprobs"];
        std::size_t base = 0;
        for (const std::int64_t t : j.prompt_ids) base += model.corpus->decode({t}).size();
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs"})
          for (const json& x : gen[key]) all[key].push_back(x);
        for (const json& x : gen["text_offset"]) all["text_offset"].push_back(base + x.get<std::size_t>());
        body["choices"][0]["logprobs"] = std::move(all);
      }
      const auto generated = static_cast<std::int64_t>(j.generated.size());
      body["usage"] = {{"prompt_tokens", j.prompt_tokens}, {"completion_tokens", generated}, {"total_tokens", j.prompt_tokens + generated}};
      HttpResponse res;
      res.body = dump(body) + "\n";
      answer(reply, "/v1/completions", t0, res);
    };
  } else {
    // server-sent events: one per token step (its released text), then the finish, then [DONE];
    // written from the engine's callback, in the order of the steps (it runs under the engine's
    // lock). The head goes out with the first step, so a full queue is still a plain 503.
    job->on_progress = [this, reply, chunk, t0](CompletionJob& j) {
      HttpResponse head;
      head.content_type = "text/event-stream";
      head.headers.emplace_back("Cache-Control", "no-cache");
      reply->begin_stream(head);
      std::string events;
      for (; j.delivered < j.pieces.size(); ++j.delivered) events += "data: " + dump(chunk(j.pieces[j.delivered], nullptr, &j)) + "\n\n";
      if (j.done)
        events += "data: " + dump(chunk("", j.finish_reason == "error" ? json("error") : json(j.finish_reason), &j)) + "\n\ndata: [DONE]\n\n";
      reply->write(events);
      if (j.done) {
        reply->end();
        if (!reply->gone()) metrics.request("/v1/completions", 200, std::chrono::duration<double>(Clock::now() - t0).count());
      }
    };
  }
  // a client that goes away: its slot is freed at the next step
  std::weak_ptr<CompletionJob> weak = job;
  reply->on_gone([this, weak, t0] {
    if (auto j = weak.lock()) {
      j->cancelled = true;
      engine->poke();
    }
    metrics.request("/v1/completions", 499, std::chrono::duration<double>(Clock::now() - t0).count());
  });
  if (!engine->submit(job))
    answer(reply, "/v1/completions", t0,
           error(503, "", draining ? std::string("the server is stopping; retry on another")
                                   : "the server is at capacity (" + std::to_string(o.max_batch) + " running, " + std::to_string(o.max_queue) +
                                         " waiting); retry"));
}

void Server::Impl::predict(const HttpRequest& req, const std::shared_ptr<Reply>& reply, Clock::time_point t0) {
  if (model.text()) throw RequestError(404, "", "this server serves a text model (" + name + "): POST /v1/completions");
  auto job = std::make_shared<PredictJob>();
  job->req = parse_predict(req.body, model.sample_shape, limits);
  if (!job->req.model.empty() && job->req.model != name)
    throw RequestError(404, "model", "'model' names '" + job->req.model + "'; this server serves '" + name + "'");
  if (draining) throw RequestError(503, "", "the server is stopping; retry on another");
  // called under the engine's lock, where the job is alive: the body is written on a worker
  std::weak_ptr<PredictJob> weak = job;
  job->on_done = [this, weak, reply, t0] {
    if (auto j = weak.lock()) front->post([this, j, reply, t0] { answer(reply, "/v1/predict", t0, predict_body(*j)); });
  };
  if (!engine->submit(job)) answer(reply, "/v1/predict", t0, error(503, "", "the server is at capacity; retry"));
}

HttpResponse Server::Impl::predict_body(const PredictJob& job) const {
  if (!job.error.empty()) return error(422, "inputs", "the model refused the inputs: " + job.error);
  const std::int64_t n = job.req.samples, per = job.per;
  json logits = json::array(), probs = json::array(), argmax = json::array();
  for (std::int64_t i = 0; i < n; ++i) {
    const float* l = job.logits.data() + i * per;
    logits.push_back(std::vector<float>(l, l + per));
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < per; ++c)
      if (l[c] > l[best]) best = c;  // the first maximum
    argmax.push_back(best);
    if (!job.probabilities.empty()) {
      const float* p = job.probabilities.data() + i * per;
      probs.push_back(std::vector<float>(p, p + per));
    }
  }
  json body = {{"model", name}, {"logits", logits}};
  if (!job.probabilities.empty()) {
    body["probabilities"] = probs;
    body["argmax"] = argmax;
  }
  HttpResponse r;
  r.body = dump(body) + "\n";
  return r;
}

Server::Server(const std::string& run_dir, const ServeOptions& o) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  BITGRAD_CHECK(o.threads >= 1 && o.max_batch >= 1 && o.max_queue >= 0 && o.max_tokens >= 0 && o.max_prompt >= 1, "serve",
                "--threads and --max-batch must be >= 1, --max-queue and --max-tokens >= 0");
  s.o = o;
  s.model = infer::load_run_model(run_dir, "serve", false);
  s.name = base_name(run_dir);
  s.limits.max_tokens = o.max_tokens;
  s.limits.max_prompt = o.max_prompt;
  s.engine = std::make_unique<Engine>(s.model, o, s.metrics);
  s.front = std::make_unique<HttpFront>(
      o.http, [&s](HttpRequest&& req, const std::shared_ptr<Reply>& reply) { s.handle(std::move(req), reply); },
      [](int status, const std::string& message) { return error_body(status, "", message); });
  s.port = s.front->bind(o.host, o.port);
}

Server::~Server() {
  impl_->front->stop();
  impl_->engine.reset();  // finishes what was submitted (its answers go nowhere)
}

int Server::port() const { return impl_->port; }

std::int64_t Server::connections() const { return impl_->front->connections(); }

std::string Server::describe() const {
  const Impl& s = *impl_;
  return s.name + " (" + (s.model.text() ? "text, vocabulary " + std::to_string(s.model.classes) + ", block " + std::to_string(s.model.cfg.data.block_size)
                                          : "classifier, input " + s.model.sample_shape.str() + ", " + std::to_string(s.model.classes) + " classes") +
         ", step " + std::to_string(s.model.step) + ")";
}

void Server::run() { impl_->front->run(); }

void Server::stop() { impl_->front->stop(); }

void Server::cut_drain() { impl_->cut = true; }

bool Server::drain(double seconds) {
  Impl& p = *impl_;
  p.draining = true;
  p.engine->close_intake();
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto settled = [&] { return p.engine->idle() && p.front->in_flight() == 0; };
  while (!settled() && Clock::now() < until && !p.cut) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool drained = settled();
  if (!drained) {  // what is still running ends with an error event, then the server stops
    p.engine->abort_all(p.cut ? std::string("the server stopped before this request ended: a second signal ended the drain")
                              : "the server stopped before this request ended: it ran past the " + std::to_string(seconds) + " s drain");
    const auto grace = Clock::now() + std::chrono::seconds(5);
    while (p.front->in_flight() > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop();
  return drained;
}

}  // namespace bitgrad::serve
