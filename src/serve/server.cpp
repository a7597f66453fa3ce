// The HTTP face of `bitgrad serve` (serve/serve.hpp, docs/serving.md): cpp-httplib (Debian's
// libcpp-httplib-dev) for HTTP/1.1, nlohmann for JSON. The handlers parse and check a request
// (request.cpp), hand it to the engine, and write what it computed; nothing here touches the
// numbers. Response bodies carry no clock and no counter, so their bytes are the request's.
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <nlohmann/json.hpp>

#include "serve/serve.hpp"
#include "infer/run_model.hpp"
#include "serve/engine.hpp"
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
  httplib::Server http;
  int port = 0;
  int listen_fd = -1;  // the listening socket, to widen its backlog after the bind
  std::atomic<int> streams{0};        // streamed responses not yet ended (the drain waits for them)
  std::atomic<bool> draining{false};  // new requests are answered 503

  void fail(httplib::Response& res, int status, const std::string& field, const std::string& message) {
    res.status = status;
    if (status == 503) res.set_header("Retry-After", "1");
    res.set_content(error_body(status, field, message), "application/json");
  }

  void routes();
  void completions(const httplib::Request& req, httplib::Response& res);
  void predict(const httplib::Request& req, httplib::Response& res);
};

void Server::Impl::routes() {
  auto timed = [this](const std::string& endpoint, auto handler) {
    return [this, endpoint, handler](const httplib::Request& req, httplib::Response& res) {
      const auto t0 = Clock::now();
      res.status = 200;
      try {
        handler(req, res);
      } catch (const RequestError& e) {
        fail(res, e.status, e.field, e.what());
      } catch (const std::exception& e) {
        fail(res, 500, "", e.what());
      }
      if (!res.has_header("Cache-Control"))  // set on streams only: a stream counts itself when it ends
        metrics.request(endpoint, res.status, std::chrono::duration<double>(Clock::now() - t0).count());
    };
  };
  http.Post("/v1/completions", timed("/v1/completions", [this](const httplib::Request& q, httplib::Response& r) { completions(q, r); }));
  http.Post("/v1/predict", timed("/v1/predict", [this](const httplib::Request& q, httplib::Response& r) { predict(q, r); }));
  http.Get("/v1/models", timed("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
             json m = {{"id", name},
                       {"object", "model"},
                       {"owned_by", "bitgrad"},
                       {"kind", model.text() ? "text" : "classifier"},
                       {"step", model.step},
                       {"input_shape", std::vector<std::int64_t>(model.sample_shape.begin(), model.sample_shape.end())},
                       {"classes", model.classes},
                       {"endpoint", model.text() ? "/v1/completions" : "/v1/predict"}};
             if (model.text()) m["block_size"] = model.cfg.data.block_size;
             res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}) + "\n", "application/json");
           }));
  http.Get("/health", timed("/health", [this](const httplib::Request&, httplib::Response& res) {
             res.set_content(dump(json{{"status", "ok"}, {"model", name}}) + "\n", "application/json");
           }));
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.text(engine->waiting(), engine->active()), "text/plain; version=0.0.4");
  });
  // a known path with another method: 405 naming the one it takes (it was a bare 404)
  auto not_allowed = [this](const char* allow) {
    return [this, allow](const httplib::Request& req, httplib::Response& res) {
      res.set_header("Allow", allow);
      fail(res, 405, "", req.method + " " + req.path + " is not served; this endpoint takes " + allow);
    };
  };
  for (const char* p : {"/v1/completions", "/v1/predict"}) {
    http.Get(p, not_allowed("POST"));
    http.Put(p, not_allowed("POST"));
    http.Patch(p, not_allowed("POST"));
    http.Delete(p, not_allowed("POST"));
  }
  for (const char* p : {"/v1/models", "/health", "/metrics"}) {
    http.Post(p, not_allowed("GET"));
    http.Put(p, not_allowed("GET"));
    http.Patch(p, not_allowed("GET"));
    http.Delete(p, not_allowed("GET"));
  }
  // every refusal the HTTP library makes itself (no route, a malformed request line or header, a
  // body or URI too long) gets the documented JSON body too; one a handler filled is left alone
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string msg;
    switch (res.status) {
      case 404:
        msg = "no endpoint " + req.method + " " + req.path + " (POST /v1/completions, POST /v1/predict, GET /v1/models, GET /health, GET /metrics)";
        break;
      case 400: msg = "a malformed HTTP request"; break;
      case 413: msg = "the request is larger than the server takes"; break;
      case 414: msg = "the request's URI is too long"; break;
      case 415: msg = "the request's content type is not taken (send application/json)"; break;
      default: msg = "HTTP error " + std::to_string(res.status); break;
    }
    res.set_content(error_body(res.status, "", msg), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
}

void Server::Impl::completions(const httplib::Request& req, httplib::Response& res) {
  if (!model.text()) throw RequestError(404, "", "this server serves a classifier (" + name + "): POST /v1/predict");
  CompletionRequest r = parse_completion(req.body, limits);
  if (!r.model.empty() && r.model != name) throw RequestError(404, "model", "'model' names '" + r.model + "'; this server serves '" + name + "'");
  std::vector<std::int64_t> prompt;
  try {
    prompt = model.corpus->encode(r.prompt, "prompt");
  } catch (const std::exception& e) {
    throw RequestError(400, "prompt", e.what());
  }
  const bool stream = r.stream;
  auto job = std::make_shared<CompletionJob>(std::move(r), std::move(prompt));
  if (!engine->submit(job)) {
    fail(res, 503, "", draining ? std::string("the server is stopping; retry on another") :
                                  "the server is at capacity (" + std::to_string(o.max_batch) + " running, " + std::to_string(o.max_queue) + " waiting); retry");
    return;
  }
  const std::string id = "cmpl-" + id_of(name, req.body);
  auto chunk = [this, id](const std::string& text, const json& reason) {
    return json{{"id", id}, {"object", "text_completion"}, {"model", name}, {"choices", json::array({json{{"index", 0}, {"text", text}, {"finish_reason", reason}}})}};
  };
  if (!stream) {
    engine->wait_done(job);
    if (job->finish_reason == "error") throw std::runtime_error(job->error);
    json body = chunk(job->text, job->finish_reason);
    body["usage"] = {{"prompt_tokens", job->prompt_tokens},
                     {"completion_tokens", static_cast<std::int64_t>(job->generated.size())},
                     {"total_tokens", job->prompt_tokens + static_cast<std::int64_t>(job->generated.size())}};
    res.set_content(dump(body) + "\n", "application/json");
    return;
  }
  // server-sent events: one per token step (its released text), then the finish, then [DONE]
  const auto t0 = Clock::now();
  auto sent = std::make_shared<std::size_t>(0);
  res.set_header("Cache-Control", "no-cache");
  ++streams;  // until the releaser below runs: the drain waits for the stream's last event
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, sent, chunk](std::size_t, httplib::DataSink& sink) {
        bool done = false;
        const std::vector<std::string> pieces = engine->wait(job, *sent, done);
        for (const std::string& p : pieces) {
          const std::string ev = "data: " + dump(chunk(p, nullptr)) + "\n\n";
          if (!sink.write(ev.data(), ev.size())) return false;
        }
        *sent += pieces.size();
        if (done) {
          const std::string end = "data: " + dump(chunk("", job->finish_reason == "error" ? json("error") : json(job->finish_reason))) +
                                  "\n\ndata: [DONE]\n\n";
          if (!sink.write(end.data(), end.size())) return false;
          sink.done();
        }
        return true;
      },
      [this, job, t0](bool success) {
        --streams;
        if (!success) {  // the client went away: its slot is freed at the next step
          job->cancelled = true;
          engine->poke();
        }
        metrics.request("/v1/completions", success ? 200 : 499, std::chrono::duration<double>(Clock::now() - t0).count());
      });
}

void Server::Impl::predict(const httplib::Request& req, httplib::Response& res) {
  if (model.text()) throw RequestError(404, "", "this server serves a text model (" + name + "): POST /v1/completions");
  auto job = std::make_shared<PredictJob>();
  job->req = parse_predict(req.body, model.sample_shape, limits);
  if (!job->req.model.empty() && job->req.model != name)
    throw RequestError(404, "model", "'model' names '" + job->req.model + "'; this server serves '" + name + "'");
  if (!engine->submit(job)) {
    fail(res, 503, "", "the server is at capacity; retry");
    return;
  }
  engine->wait(job);
  if (!job->error.empty()) throw RequestError(422, "inputs", "the model refused the inputs: " + job->error);
  const std::int64_t n = job->req.samples, per = job->per;
  json logits = json::array(), probs = json::array(), argmax = json::array();
  for (std::int64_t i = 0; i < n; ++i) {
    const float* l = job->logits.data() + i * per;
    logits.push_back(std::vector<float>(l, l + per));
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < per; ++c)
      if (l[c] > l[best]) best = c;  // the first maximum
    argmax.push_back(best);
    if (!job->probabilities.empty()) {
      const float* p = job->probabilities.data() + i * per;
      probs.push_back(std::vector<float>(p, p + per));
    }
  }
  json body = {{"model", name}, {"logits", logits}};
  if (!job->probabilities.empty()) {
    body["probabilities"] = probs;
    body["argmax"] = argmax;
  }
  res.set_content(dump(body) + "\n", "application/json");
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
  const int workers = o.http_threads > 0 ? o.http_threads : o.max_batch + o.max_queue + 4;
  s.http.new_task_queue = [workers] { return new httplib::ThreadPool(static_cast<std::size_t>(workers)); };
  s.http.set_keep_alive_max_count(1000);
  s.http.set_payload_max_length(std::size_t{256} << 20);
  s.routes();
  // Debian's cpp-httplib is built with a listen backlog of 5: 16 clients connecting at once on a
  // busy machine overflow it, and the kernel's SYN cookies then drop some of them ("no response:
  // Read" at the client). The socket is captured as it is made and listen() is called again with
  // the system's maximum, which Linux allows on a listening socket.
  s.http.set_socket_options([&s](socket_t sock) {
    httplib::default_socket_options(sock);
    s.listen_fd = static_cast<int>(sock);
  });
  if (o.port == 0) {
    s.port = s.http.bind_to_any_port(o.host);
    if (s.port < 0) throw Error("serve: cannot bind to " + o.host + " (a free port)");
  } else {
    if (!s.http.bind_to_port(o.host, o.port)) throw Error("serve: cannot bind to " + o.host + ":" + std::to_string(o.port) + " (in use?)");
    s.port = o.port;
  }
  if (s.listen_fd >= 0 && ::listen(s.listen_fd, SOMAXCONN) != 0)
    throw Error("serve: cannot widen the listen backlog of " + o.host + ":" + std::to_string(s.port));
}

Server::~Server() {
  impl_->http.stop();
  impl_->engine.reset();  // finishes what was submitted
}

int Server::port() const { return impl_->port; }

std::string Server::describe() const {
  const Impl& s = *impl_;
  return s.name + " (" + (s.model.text() ? "text, vocabulary " + std::to_string(s.model.classes) + ", block " + std::to_string(s.model.cfg.data.block_size)
                                          : "classifier, input " + s.model.sample_shape.str() + ", " + std::to_string(s.model.classes) + " classes") +
         ", step " + std::to_string(s.model.step) + ")";
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() { impl_->http.stop(); }

bool Server::drain(double seconds) {
  Impl& p = *impl_;
  p.draining = true;
  p.engine->close_intake();
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto settled = [&] { return p.engine->idle() && p.streams.load() == 0; };
  while (!settled() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool drained = settled();
  if (!drained) {  // what is still running ends with an error event, then the server stops
    p.engine->abort_all("the server stopped before this request ended: it ran past the " + std::to_string(seconds) + " s drain");
    const auto grace = Clock::now() + std::chrono::seconds(5);
    while (p.streams.load() > 0 && Clock::now() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop();
  return drained;
}

}  // namespace bitgrad::serve
