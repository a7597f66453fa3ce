// The HTTP front of `bitgrad serve` (serve/http.hpp) under hostile clients: the head parser's
// refusals, then a live front with a small handler: clients that drip their heads, declare huge
// bodies, open too many connections, half-close, pipeline, stop reading, or send raw random
// bytes; each gets the documented JSON refusal or its answer, and the others are still served.
#include <gtest/gtest.h>
#include <dirent.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "bitgrad/error.hpp"
#include "bitgrad/rng.hpp"
#include "serve/http.hpp"
#include "serve/request.hpp"
#include "serve/serve.hpp"
#include "support/sockets.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {
using json = nlohmann::json;
using serve::HttpHead;
using serve::HttpLimits;

HttpHead parse(const std::string& bytes, const HttpLimits& l = {}) { return serve::parse_head(bytes, l); }

TEST(HttpHead, ParsesARequestAndRefusesWhatIsMalformed) {
  const HttpHead ok = parse("POST /v1/predict?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nX-Y:  v w \r\n\r\n{\"inputs\":1}");
  ASSERT_EQ(ok.state, HttpHead::State::complete);
  EXPECT_EQ(ok.request.method, "POST");
  EXPECT_EQ(ok.request.path, "/v1/predict");
  EXPECT_EQ(ok.request.target, "/v1/predict?x=1");
  EXPECT_EQ(ok.content_length, 12);
  EXPECT_TRUE(ok.keep_alive);
  ASSERT_NE(ok.request.header("x-y"), nullptr);
  EXPECT_EQ(*ok.request.header("x-y"), "v w");
  EXPECT_EQ(ok.bytes, std::string("POST /v1/predict?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nX-Y:  v w \r\n\r\n").size());
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\n").state, HttpHead::State::incomplete);
  EXPECT_EQ(parse("GET / HTT").state, HttpHead::State::incomplete);
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n").keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n").expect_continue);
  EXPECT_EQ(parse("\r\nGET / HTTP/1.1\n\n").state, HttpHead::State::complete) << "bare LF and a leading empty line";
  HttpLimits small;
  small.max_target = 64;
  small.max_head = 256;
  small.max_headers = 4;
  small.max_body = 1000;
  struct Case {
    std::string bytes;
    int status;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {"GET\r\n\r\n", 400, "malformed request line"},
           {"GE T / HTTP/1.1\r\n\r\n", 400, "malformed request target"},
           {"G(T / HTTP/1.1\r\n\r\n", 400, "malformed request method"},
           {"GET nopath HTTP/1.1\r\n\r\n", 400, "starting with '/'"},
           {"GET /\x01 HTTP/1.1\r\n\r\n", 400, "malformed request target"},
           {"GET / HTTP/2.0\r\n\r\n", 505, "HTTP version 2.0 is not served"},
           {"GET / SPDY/3\r\n\r\n", 400, "malformed HTTP version"},
           {"GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", 414, "longer than 64 bytes"},
           {"GET /" + std::string(100, 'a'), 414, "longer than 64 bytes"},
           {"GET / HTTP/1.1\r\nA: " + std::string(300, 'b') + "\r\n\r\n", 431, "head is longer than 256"},
           {"GET / HTTP/1.1\r\nA: " + std::string(300, 'b'), 431, "head is longer than 256"},
           {"GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", 431, "more than 4 header lines"},
           {"GET / HTTP/1.1\r\n folded\r\n\r\n", 400, "folded header line"},
           {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "malformed header line"},
           {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "malformed header name"},
           {std::string("GET / HTTP/1.1\r\nA: x\0y\r\n\r\n", 26), 400, "control character"},
           {"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400, "not a whole number of bytes"},
           {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400, "not a whole number of bytes"},
           {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, "two different Content-Length"},
           {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "send the body with a Content-Length"},
           {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both Transfer-Encoding"},
           {"POST / HTTP/1.1\r\nExpect: later\r\n\r\n", 417, "Expect 'later'"},
           {"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413, "larger than the 1000 bytes"},
       }) {
    const HttpHead h = parse(c.bytes, small);
    EXPECT_EQ(h.state, HttpHead::State::refused) << c.bytes;
    EXPECT_EQ(h.status, c.status) << c.bytes;
    EXPECT_NE(h.why.find(c.says), std::string::npos) << c.bytes << " -> " << h.why;
  }
}

// A front on a free port with a small handler, run on a thread of its own.
struct TestFront {
  explicit TestFront(HttpLimits l = {}) {
    front = std::make_unique<serve::HttpFront>(
        l, [this](serve::HttpRequest&& req, const std::shared_ptr<serve::Reply>& reply) { handle(std::move(req), reply); },
        [](int status, const std::string& m) { return serve::error_body(status, "", m); });
    port = front->bind("127.0.0.1", 0);
    thread = std::thread([this] { front->run(); });
  }
  ~TestFront() {
    front->stop();
    thread.join();
  }
  void handle(serve::HttpRequest&& req, const std::shared_ptr<serve::Reply>& reply) {
    serve::HttpResponse r;
    if (req.path == "/echo") {
      r.body = json{{"method", req.method}, {"bytes", req.body.size()}, {"body", req.body}}.dump(-1, ' ', false, json::error_handler_t::replace);
      reply->send(r);
    } else if (req.path == "/stream") {  // chunks of the body's size, never ended: for a client that never reads
      reply->on_gone([this] { ++gone; });
      reply->begin_stream(r);
      const std::string piece(1 << 20, 'x');
      for (int i = 0; i < 64; ++i) reply->write(piece);
    } else {
      r.status = 404;
      r.body = serve::error_body(404, "", "no " + req.path);
      reply->send(r);
    }
  }
  std::unique_ptr<serve::HttpFront> front;
  std::thread thread;
  int port = 0;
  std::atomic<int> gone{0};
};

std::string echo_request(const std::string& body, const std::string& extra = "") {
  return "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

// one request on a fresh connection: the whole answer (to the server's close or `seconds`)
std::string one_exchange(int port, const std::string& bytes, double seconds = 10) {
  const int fd = connect_to(port);
  if (fd < 0) return "no connection";
  send_all(fd, bytes);
  const std::string got = receive(fd, seconds, [](const std::string& g) {
    const std::size_t h = g.find("\r\n\r\n");
    if (h == std::string::npos) return false;
    const std::size_t cl = g.find("Content-Length: ");
    return cl != std::string::npos && cl < h && g.size() >= h + 4 + std::stoul(g.substr(cl + 16));
  });
  ::close(fd);
  return got;
}

// The documented error body, with its code.
void expect_refusal(const std::string& response, int status, const std::string& says) {
  EXPECT_EQ(status_of(response), status) << response;
  const json e = json::parse(body_of(response), nullptr, false);
  ASSERT_TRUE(e.is_object() && e.contains("error")) << response;
  EXPECT_EQ(e["error"]["code"], status) << response;
  EXPECT_NE(e["error"]["message"].get<std::string>().find(says), std::string::npos) << response;
}

TEST(HttpFront, RawMalformedRequestsGetTheJsonRefusal) {
  TestFront f;
  expect_refusal(one_exchange(f.port, "POST /echo HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400, "Content-Length '-1'");
  expect_refusal(one_exchange(f.port, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"), 411, "Content-Length");
  expect_refusal(one_exchange(f.port, "GET /echo HTTP/2.0\r\n\r\n"), 505, "HTTP version 2.0");
  expect_refusal(one_exchange(f.port, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello\r\n\r\n", 24)), 400, "malformed");
  expect_refusal(one_exchange(f.port, "GET /" + std::string(9000, 'u') + " HTTP/1.1\r\n\r\n"), 414, "request line is longer");
  expect_refusal(one_exchange(f.port, "GET / HTTP/1.1\r\nCookie: " + std::string(20000, 'c') + "\r\n\r\n"), 431, "head is longer");
  expect_refusal(one_exchange(f.port, "GET /nothing HTTP/1.1\r\n\r\n"), 404, "no /nothing");
  const std::string ok = one_exchange(f.port, echo_request("{\"a\": 1}"));
  EXPECT_EQ(status_of(ok), 200) << ok;
  EXPECT_EQ(json::parse(body_of(ok))["bytes"], 8) << "still serving";
}

// Connections that drip their heads (slowloris), or stop inside their bodies, hold no thread:
// the others are answered meanwhile, and each dripping one is closed with a 408 at its deadline.
TEST(HttpFront, SlowClientsDoNotStarveTheOthersAndAreTimedOut) {
  HttpLimits l;
  l.header_timeout = 4;
  l.body_timeout = 4;
  l.idle_timeout = 4;
  TestFront f(l);
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_to(f.port);
    ASSERT_GE(fd, 0);
    send_all(fd, i % 2 ? "POST /echo HTTP/1.1\r\nHost: x\r\nX-Drip: " : "POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"half\"");
    slow.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) {
    const std::string got = one_exchange(f.port, echo_request("ping"), 5);
    ASSERT_EQ(status_of(got), 200) << got;
  }
  // answered while every dripping client still waits for its deadline: none has heard a byte
  // (a server with a thread per connection and fewer threads than 200 answers after the 408s)
  std::vector<pollfd> waiting;
  for (int fd : slow) waiting.push_back(pollfd{fd, POLLIN, 0});
  EXPECT_EQ(::poll(waiting.data(), waiting.size(), 0), 0) << "the 20 were answered only after the drippers were let go";
  for (std::size_t i = 0; i < slow.size(); ++i) {
    if (i % 2) send_all(slow[i], "a");  // one more byte: the head's deadline is from its first byte, not its last
    const std::string got = receive_all(slow[i], 15);
    expect_refusal(got, 408, i % 2 ? "head did not arrive within" : "body did not arrive within");
    ::close(slow[i]);
  }
  // an idle keep-alive connection is closed without a word
  const int idle = connect_to(f.port);
  EXPECT_EQ(receive_all(idle, 15), "");
  ::close(idle);
  EXPECT_EQ(f.front->connections(), 0);
}

// A body larger than the limit is refused from its Content-Length, before a byte of it is read;
// the bodies held at once have a budget, past which a request is answered 503.
TEST(HttpFront, BodiesAreBoundedBeforeTheyAreRead) {
  HttpLimits l;
  l.max_body = 1 << 20;
  l.body_budget = 2 << 20;
  TestFront f(l);
  const auto t0 = std::chrono::steady_clock::now();
  expect_refusal(one_exchange(f.port, "POST /echo HTTP/1.1\r\nContent-Length: 104857600\r\n\r\n"), 413,
                 "body of 104857600 bytes is larger than the 1048576 bytes");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0)
      << "refused without waiting for the body (its deadline is 60 s)";
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {  // two bodies of 1 MiB declared, half sent: the budget is spent
    held.push_back(connect_to(f.port));
    send_all(held.back(), "POST /echo HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n" + std::string(1000, 'x'));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_refusal(one_exchange(f.port, echo_request(std::string(100, 'y'))), 503, "bytes of request bodies now");
  send_all(held[0], std::string((1 << 20) - 1000, 'x'));  // one completes: its budget comes back when it is answered
  const std::string first = receive(held[0], 10, [](const std::string& g) { return g.find("}") != std::string::npos; });
  EXPECT_EQ(status_of(first), 200) << first.substr(0, 200);
  EXPECT_EQ(status_of(one_exchange(f.port, echo_request(std::string(100, 'y')))), 200);
  for (int fd : held) ::close(fd);
}

TEST(HttpFront, ConnectionsPastTheLimitAreAnswered503) {
  HttpLimits l;
  l.max_connections = 4;
  TestFront f(l);
  std::vector<int> open;
  for (int i = 0; i < 4; ++i) open.push_back(connect_to(f.port));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_refusal(one_exchange(f.port, echo_request("x")), 503, "4 connections open");
  ::close(open.back());
  open.pop_back();
  std::string got;
  for (int i = 0; i < 50 && status_of(got) != 200; ++i) {  // the closed one's place is free once the front sees it go
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    got = one_exchange(f.port, echo_request("x"));
  }
  EXPECT_EQ(status_of(got), 200) << got;
  for (int fd : open) ::close(fd);
}

// Clients that send their request and shut their side (half-close) are answered, every time.
TEST(HttpFront, HalfClosingClientsGetTheirAnswer) {
  TestFront f;
  for (int i = 0; i < 20; ++i) {
    const int fd = connect_to(f.port);
    send_all(fd, echo_request("{\"n\": " + std::to_string(i) + "}"));
    ::shutdown(fd, SHUT_WR);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string got = receive_all(fd, 5);
    ::close(fd);
    ASSERT_EQ(status_of(got), 200) << "try " << i << ": " << got;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 4.5) << "answered, then closed (not at the 5 s idle timeout)";
    EXPECT_EQ(json::parse(body_of(got))["body"], "{\"n\": " + std::to_string(i) + "}");
  }
}

TEST(HttpFront, PipelinedHeadAndExpectContinueRequestsAreAnsweredInOrder) {
  TestFront f;
  const int fd = connect_to(f.port);
  send_all(fd, echo_request("one") + echo_request("two") + "HEAD /echo HTTP/1.1\r\n\r\n" + echo_request("three", "Connection: close\r\n"));
  const std::string got = receive_all(fd, 5);
  ::close(fd);
  const std::size_t a = got.find("\"body\":\"one\""), b = got.find("\"body\":\"two\""), c = got.find("\"body\":\"three\"");
  ASSERT_NE(a, std::string::npos) << got;
  ASSERT_NE(b, std::string::npos) << got;
  ASSERT_NE(c, std::string::npos) << got;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_EQ(got.find("\"method\":\"HEAD\""), std::string::npos) << "HEAD: the head alone";
  EXPECT_NE(got.find("Content-Length: 37\r\n\r\nHTTP/1.1"), std::string::npos) << got;
  // Expect: 100-continue: the interim answer, then the body, then the answer
  const int e = connect_to(f.port);
  send_all(e, "POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  EXPECT_EQ(receive(e, 5, [](const std::string& g) { return g.size() >= 25; }), "HTTP/1.1 100 Continue\r\n\r\n");
  send_all(e, "body");
  EXPECT_EQ(status_of(receive(e, 5, [](const std::string& g) { return g.find("}") != std::string::npos; })), 200);
  ::close(e);
}

// A client that stops reading a stream is dropped after the write timeout, and its answer told.
TEST(HttpFront, AnAnswerNobodyReadsIsDropped) {
  HttpLimits l;
  l.write_timeout = 1;
  TestFront f(l);
  const int fd = connect_to(f.port);
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  send_all(fd, "GET /stream HTTP/1.1\r\n\r\n");
  for (int i = 0; i < 100 && f.gone.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(f.gone.load(), 1);
  ::close(fd);
}

// Raw random bytes, whole or cut anywhere, with and without a valid request's prefix: each
// connection ends with an answer or a close within its deadlines, and the front still serves.
TEST(HttpFront, RandomBytesNeverHangOrCrashTheFront) {
  HttpLimits l;
  l.header_timeout = 1;
  l.body_timeout = 1;
  l.idle_timeout = 1;
  TestFront f(l);
  rng::Stream s(20261126, "http raw bytes");
  const std::string prefixes[] = {"", "GET / HTTP/1.1\r\n", "POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\n", "POST /echo HTTP/1.0\r\n"};
  std::vector<std::thread> clients;
  std::atomic<int> answered{0}, closed{0};
  for (int t = 0; t < 4; ++t)
    clients.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const std::uint64_t k = static_cast<std::uint64_t>(t * 1000 + i);
        std::string bytes = prefixes[(k * 7) % 4];
        const std::size_t n = static_cast<std::size_t>(s.uniform_f64(k) * 300);
        for (std::size_t j = 0; j < n; ++j) {
          const double u = s.uniform_f64(k * 1000003 + j);
          bytes += u < 0.1 ? '\n' : u < 0.2 ? '\r' : u < 0.3 ? ':' : u < 0.35 ? ' ' : static_cast<char>(static_cast<int>(u * 1e6) % 256);
        }
        if (k % 3 == 0) bytes += "\r\n\r\n";
        const int fd = connect_to(f.port);
        send_all(fd, bytes);
        if (k % 5 == 0) ::shutdown(fd, SHUT_WR);
        const std::string got = receive_all(fd, 8);
        ::close(fd);
        (status_of(got) > 0 ? answered : closed)++;
        if (status_of(got) >= 400) {
          const json e = json::parse(body_of(got), nullptr, false);
          EXPECT_TRUE(e.is_object() && e.contains("error")) << got;
        }
      }
    });
  for (auto& c : clients) c.join();
  EXPECT_EQ(answered + closed, 200);
  EXPECT_GT(answered.load(), 100);
  EXPECT_EQ(status_of(one_exchange(f.port, echo_request("after"))), 200);
}

// A port in use is an error that names it, not a server that never answers.
TEST(HttpFront, AFailureToStartIsAnError) {
  TestFront f;
  serve::HttpFront other({}, [](serve::HttpRequest&&, const std::shared_ptr<serve::Reply>&) {}, [](int, const std::string&) { return ""; });
  EXPECT_THROW_MSG(other.bind("127.0.0.1", f.port), "serve: cannot bind to 127.0.0.1:" + std::to_string(f.port));
  EXPECT_THROW_MSG(other.bind("no.such.host.invalid", 0), "serve: cannot bind to no.such.host.invalid");
}

}  // namespace
}  // namespace bitgrad::test
