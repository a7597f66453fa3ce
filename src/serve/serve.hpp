// `bitgrad serve`: a trained run answered over HTTP/1.1 (docs/serving.md). A response's bytes
// are a function of the run and the request alone: concurrent requests are batched (text
// generation continuously, a KV cache per request), and each request's rows are computed as
// they would be alone — the kernels are batch-invariant (contract T4) and the batch runs in an
// execution context of its own. A completion equals `bitgrad sample` for the same prompt, seed,
// temperature and top k. It sits above infer and train, below the CLI (library bitgrad_serve, not
// installed: its API is the command, `bitgrad serve`; this header is the CLI's and the tests').
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "serve/http.hpp"

namespace bitgrad::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: a free port (Server::port() says which)
  int threads = 1;                  // kernel threads of the batch's execution context
  int max_batch = 16;               // requests decoded together
  int max_queue = 64;               // requests waiting beyond those; more are answered 503
  std::int64_t max_tokens = 1024;   // per completion
  std::int64_t max_prompt = 65536;  // bytes of a prompt
  HttpLimits http;                  // connections, sizes and timeouts of the HTTP front
  double drain_seconds = 60;        // SIGTERM: how long the requests in flight may take to finish
  std::int64_t prefix_cache_bytes = 64ll << 20;  // key/value rows of prompt prefixes kept (0: none)
  std::int64_t prefix_block = 16;   // tokens per cached block (at most the run's block_size)
};

class Server {
 public:
  // Loads the run (its latest checkpoint) and binds the socket; throws when either fails.
  Server(const std::string& run_dir, const ServeOptions& o);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  int port() const;
  std::int64_t connections() const;  // HTTP connections open now
  std::string describe() const;  // the model: "gpt run R (step N, vocabulary V)" or a classifier's
  // Serves until stop(); then returns when the requests in flight are answered.
  void run();
  // Stops accepting connections; run() returns after the requests in flight (thread-safe,
  // callable from any thread; not from a signal handler). A stream still running is cut.
  void stop();
  // The graceful end (SIGTERM): new requests are answered 503; every request inside,
  // streams included, runs to its finish event and [DONE]; then stop(). When they take longer
  // than `seconds`, the unfinished ones end with an error event (finish_reason "error") and this
  // returns false.
  bool drain(double seconds);
  // Ends a drain in progress now, as if its time had run out (a second SIGTERM); callable from any
  // thread, before or during drain().
  void cut_drain();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bitgrad::serve
