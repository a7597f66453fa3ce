// A served tiny GPT and the clients of the serve tests (tests/serve): the server on a free
// loopback port on a thread of its own, a request, a completion's JSON.
#pragma once

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "serve/serve.hpp"
#include "support/runs.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {

// A tiny GPT without dropout, trained once per process (block_size 8: texts longer than it slide).
inline const std::string& gpt_run() {
  static const std::string dir = [] {
    std::string cfg = tiny_gpt();
    cfg.replace(cfg.find("dropout = 0.1"), 13, "dropout = 0.0");
    return train_into(cfg, "serve_gpt", options(6, 1, 0));
  }();
  return dir;
}

// The server on a free port, serving on a thread of its own until the end of the scope.
struct Running {
  explicit Running(const std::string& dir, serve::ServeOptions o = {}) {
    o.port = 0;
    server = std::make_unique<serve::Server>(dir, o);
    thread = std::thread([this] { server->run(); });
  }
  ~Running() {
    server->stop();
    thread.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_read_timeout(60);
    return c;
  }
  std::unique_ptr<serve::Server> server;
  std::thread thread;
};

struct Reply {
  int status = 0;
  std::string body, retry_after;
};
inline Reply post(const Running& r, const std::string& path, const std::string& body) {
  auto c = r.client();
  auto res = c.Post(path.c_str(), body, "application/json");
  if (!res) return Reply{-1, "no response: " + httplib::to_string(res.error()), ""};
  return Reply{res->status, res->body, res->get_header_value("Retry-After")};
}

inline std::string completion(const std::string& prompt, std::int64_t tokens, double temperature, std::int64_t top_k, std::uint64_t seed,
                       bool stream = false) {
  return nlohmann::json{{"prompt", prompt}, {"max_tokens", tokens}, {"temperature", temperature}, {"top_k", top_k}, {"seed", seed}, {"stream", stream}}.dump();
}

}  // namespace bitgrad::test
