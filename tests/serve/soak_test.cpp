// The soak of `bitgrad serve` (docs/serving.md "Limits"): for BITGRAD_SOAK_SECONDS (6 in the
// suite, `make soak` runs longer), honest clients compare every answer's bytes with the one the
// request gets alone, while others drip their requests, half-close, vanish mid-stream, hold
// heads open past the deadline and send random bytes. At the end every honest answer matched,
// every hostile connection ended, and the server answers as at the start.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>
#include <vector>

#include "bitgrad/rng.hpp"
#include "serve/serve.hpp"
#include "support/serving.hpp"
#include "support/sockets.hpp"

namespace bitgrad::test {
namespace {

double soak_seconds() {
  const char* s = std::getenv("BITGRAD_SOAK_SECONDS");
  return s ? std::atof(s) : 6.0;
}

std::string raw_post(const std::string& body, const std::string& extra = "") {
  return "POST /v1/completions HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra + "\r\n" + body;
}

TEST(ServeSoak, HonestAnswersKeepTheirBytesBesideHostileClients) {
  serve::ServeOptions o;
  o.max_batch = 4;
  o.max_queue = 256;
  o.max_tokens = 100000;
  o.http.header_timeout = 1;
  o.http.body_timeout = 1;
  o.http.idle_timeout = 1;
  o.http.write_timeout = 2;
  Running r(gpt_run(), o);
  // the answers alone, first: streamed and not, greedy and drawn
  std::vector<std::string> requests;
  for (int i = 0; i < 8; ++i)
    requests.push_back(completion(i % 2 ? "Keep it " : "A", 4 + 3 * i, i % 3 == 0 ? 0.0 : 0.8, i % 4 == 1 ? 5 : 0, static_cast<std::uint64_t>(50 + i), i % 3 == 2));
  std::vector<std::string> alone;
  for (const std::string& q : requests) {
    const Reply a = post(r, "/v1/completions", q);
    ASSERT_EQ(a.status, 200) << a.body;
    alone.push_back(a.body);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(soak_seconds());
  auto running = [&] { return std::chrono::steady_clock::now() < until; };
  std::map<std::string, std::atomic<int>> count;
  for (const char* k : {"honest", "mismatch", "dripped", "half-closed", "vanished", "held open", "timed out", "random", "busy"}) count[k] = 0;
  std::vector<std::thread> clients;
  for (int h = 0; h < 3; ++h)  // honest, through the HTTP client: bytes compared with the answer alone
    clients.emplace_back([&, h] {
      for (std::size_t i = static_cast<std::size_t>(h); running(); i += 3) {
        const Reply a = post(r, "/v1/completions", requests[i % requests.size()]);
        if (a.status == 503) {
          ++count["busy"];
          continue;
        }
        ++count[a.body == alone[i % requests.size()] ? "honest" : "mismatch"];
        EXPECT_EQ(a.body, alone[i % requests.size()]) << "request " << i % requests.size() << " status " << a.status;
      }
    });
  clients.emplace_back([&] {  // drips a request in pieces, inside the deadline: the answer alone's bytes
    for (std::size_t i = 0; running(); ++i) {
      const std::size_t k = (i * 2) % requests.size();  // the non-streamed ones
      if (requests[k].find("\"stream\":true") != std::string::npos) continue;
      const std::string bytes = raw_post(requests[k]);
      const int fd = connect_to(r.server->port());
      for (std::size_t at = 0; at < bytes.size(); at += 16) {
        send_all(fd, bytes.substr(at, 16));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const std::string got = receive(fd, 30, [](const std::string& g) { return g.find("}}") != std::string::npos; });
      ::close(fd);
      ++count[body_of(got) == alone[k] ? "dripped" : "mismatch"];
      EXPECT_EQ(body_of(got), alone[k]) << got;
    }
  });
  clients.emplace_back([&] {  // sends and half-closes: answered, then closed
    for (std::size_t i = 1; running(); ++i) {
      const std::size_t k = (i * 3) % requests.size();
      if (requests[k].find("\"stream\":true") != std::string::npos) continue;
      const int fd = connect_to(r.server->port());
      send_all(fd, raw_post(requests[k]));
      ::shutdown(fd, SHUT_WR);
      const std::string got = receive_all(fd, 30);
      ::close(fd);
      ++count[body_of(got) == alone[k] ? "half-closed" : "mismatch"];
      EXPECT_EQ(body_of(got), alone[k]) << got;
    }
  });
  clients.emplace_back([&] {  // starts a long stream, reads a little, vanishes
    for (std::uint64_t i = 0; running(); ++i) {
      const int fd = connect_to(r.server->port());
      send_all(fd, raw_post(completion("A", 100000, 1, 0, 900 + i, true)));
      receive(fd, 10, [](const std::string& g) { return g.find("data: ") != std::string::npos; });
      ::close(fd);
      ++count["vanished"];
    }
  });
  clients.emplace_back([&] {  // holds heads open past the deadline: 408 each
    while (running()) {
      std::vector<int> fds;
      for (int k = 0; k < 20; ++k) {
        fds.push_back(connect_to(r.server->port()));
        send_all(fds.back(), "POST /v1/completions HTTP/1.1\r\nHost: slow\r\n");
      }
      ++count["held open"];
      for (int fd : fds) {
        if (status_of(receive_all(fd, 10)) == 408) ++count["timed out"];
        ::close(fd);
      }
    }
  });
  clients.emplace_back([&] {  // random bytes, some after a valid head
    rng::Stream s(7, "soak bytes");
    for (std::uint64_t i = 0; running(); ++i) {
      std::string bytes = i % 2 ? "POST /v1/completions HTTP/1.1\r\nContent-Length: 40\r\n\r\n" : "";
      for (std::uint64_t j = 0; j < 60; ++j) bytes += static_cast<char>(static_cast<int>(s.uniform_f64(i * 64 + j) * 256));
      const int fd = connect_to(r.server->port());
      send_all(fd, bytes);
      ::shutdown(fd, SHUT_WR);
      receive_all(fd, 10);
      ::close(fd);
      ++count["random"];
    }
  });
  for (auto& c : clients) c.join();
  std::string summary;
  for (auto& [k, v] : count) summary += " " + k + " " + std::to_string(v.load());
  std::printf("soak %.0f s:%s\n", soak_seconds(), summary.c_str());
  EXPECT_EQ(count["mismatch"].load(), 0);
  EXPECT_GT(count["honest"].load(), 0);
  EXPECT_GT(count["dripped"].load(), 0);
  EXPECT_GT(count["half-closed"].load(), 0);
  EXPECT_GT(count["vanished"].load(), 0);
  EXPECT_EQ(count["timed out"].load(), 20 * count["held open"].load()) << "every held head ends with a 408";
  // afterwards: the connections close, the vanished streams' slots are free, the answers unchanged
  for (int i = 0; i < 100 && r.server->connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(r.server->connections(), 0);
  for (std::size_t k = 0; k < requests.size(); ++k) EXPECT_EQ(post(r, "/v1/completions", requests[k]).body, alone[k]);
}

}  // namespace
}  // namespace bitgrad::test
