// The HTTP/1.1 front of `bitgrad serve` (docs/serving.md "Limits"): one event-loop thread owns
// every connection (epoll, non-blocking sockets), a fixed pool of worker threads parses the
// requests and writes the answers, and nothing waits on a thread per request: an answer is
// posted to its connection when it is ready, from any thread. Its resources are bounded
// independently of the server's options: connections (a fixed number, more are answered 503),
// a request's head (431/414) and body (413 before a byte of it is read), the bodies held at once
// (503), and time: a connection that idles, drips its head or its body, or stops reading its
// answer is closed (408 where a request was started).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bitgrad::serve {

struct HttpLimits {
  int max_connections = 1024;                     // open at once; beyond, 503 and closed
  std::size_t max_head = 16 << 10;                // request line and headers (431)
  std::size_t max_target = 8 << 10;               // the request line (414)
  std::size_t max_headers = 100;                  // header lines (431)
  std::int64_t max_body = std::int64_t{64} << 20;      // one request's body (413, before it is read)
  std::int64_t body_budget = std::int64_t{256} << 20;  // bodies held at once, read or answered (503)
  double idle_timeout = 5;                        // keep-alive: seconds to a request's first byte
  double header_timeout = 10;                     // from a request's first byte to its last header
  double body_timeout = 60;                       // from the head to the body's last byte
  double write_timeout = 30;                      // an answer not read for this long is dropped
  int workers = 4;                                // threads that parse requests and format answers
  int max_requests = 1000;                        // per connection (keep-alive)
};

struct HttpRequest {
  std::string method, target, path, version;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, in order
  std::string body;
  const std::string* header(std::string_view lower_name) const;  // the first one, or null
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// A request's head parsed from the bytes received so far (no state: the fuzzer calls it).
struct HttpHead {
  enum class State { incomplete, complete, refused } state = State::incomplete;
  int status = 0;         // refused: 400, 411, 413, 414, 417, 431, 505
  std::string why;        // refused: what was wrong, for the error body
  std::size_t bytes = 0;  // complete: where the body starts
  HttpRequest request;    // complete: all but the body
  std::int64_t content_length = 0;
  bool keep_alive = true;
  bool expect_continue = false;
};
HttpHead parse_head(std::string_view in, const HttpLimits& limits);

// "HTTP/1.1 <status> <reason>" with the headers, Content-Length and body (or the head of a
// chunked body when `chunked`); `close` adds "Connection: close".
std::string serialize_response(const HttpResponse& r, bool chunked, bool close, bool head_only);

struct Outbox;

// One request's answer, written from any thread: send() the whole of it, or begin_stream(),
// write() chunks and end(). on_gone() runs (once, on the event loop, or at once when it already
// happened) if the client goes away before the answer ends.
class Reply {
 public:
  Reply(std::shared_ptr<Outbox> box, std::uint64_t conn, bool head_only, bool keep_alive);
  void send(const HttpResponse& r);
  void begin_stream(const HttpResponse& head);
  void write(std::string_view bytes);
  void end();
  void on_gone(std::function<void()> f);
  bool gone() const;
  void went_away();  // the event loop: the connection closed before end()

 private:
  void post(std::string bytes, bool last);
  std::shared_ptr<Outbox> box_;
  std::uint64_t conn_;
  bool head_only_, keep_alive_;
  struct State;
  std::shared_ptr<State> st_;
};

class HttpFront {
 public:
  // Called on a worker for each request; it answers through the Reply, now or later.
  using Handler = std::function<void(HttpRequest&&, const std::shared_ptr<Reply>&)>;
  // The body of a refusal the front makes itself (status, message).
  using ErrorBody = std::function<std::string(int, const std::string&)>;
  // Starts the workers and raises the open-file limit as far as it may; throws Error when the
  // threads, epoll or the descriptors cannot be had.
  HttpFront(const HttpLimits& limits, Handler handler, ErrorBody error_body);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;
  int bind(const std::string& host, int port);  // port 0: a free one; returns the port
  void run();                                   // the event loop, until stop()
  void stop();                                  // from any thread; idempotent
  void post(std::function<void()> task);        // run on a worker (dropped after stop)
  std::int64_t in_flight() const;               // requests taken whose answers are not all written
  std::int64_t connections() const;
  int max_connections() const;  // the limit in force (the option, within the open-file limit)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bitgrad::serve
