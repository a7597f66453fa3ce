// The HTTP/1.1 front (serve/http.hpp): the head parser, the answers' bytes, the event loop and
// its workers. The loop owns every connection; other threads reach one only by posting bytes
// to the outbox, which wakes the loop through an eventfd.
#include "serve/http.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "bitgrad/error.hpp"

namespace bitgrad::serve {
namespace {
using Clock = std::chrono::steady_clock;

bool tchar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

const char* reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
  }
}
}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return &v;
  return nullptr;
}

HttpHead parse_head(std::string_view in, const HttpLimits& limits) {
  HttpHead h;
  auto refuse = [&h](int status, std::string why) {
    h.state = HttpHead::State::refused;
    h.status = status;
    h.why = std::move(why);
    return h;
  };
  // empty lines before a request line are skipped (RFC 9112 2.2), a few of them
  std::size_t start = 0;
  while (start < in.size() && start < 8 && (in[start] == '\r' || in[start] == '\n')) ++start;
  const std::size_t eol = in.find('\n', start);
  if (eol == std::string_view::npos) {
    if (in.size() - start > limits.max_target) return refuse(414, "the request line is longer than " + std::to_string(limits.max_target) + " bytes");
    return h;
  }
  if (eol - start > limits.max_target) return refuse(414, "the request line is longer than " + std::to_string(limits.max_target) + " bytes");
  std::string_view line = in.substr(start, eol - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return refuse(400, "a malformed request line (expected 'METHOD /path HTTP/1.1')");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1), version = line.substr(sp2 + 1);
  if (method.empty() || method.size() > 32 || !std::all_of(method.begin(), method.end(), [](char c) { return tchar(static_cast<unsigned char>(c)); }))
    return refuse(400, "a malformed request method");
  if (target.empty() || target.front() != '/' ||
      !std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
    return refuse(400, "a malformed request target (expected a path starting with '/')");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && std::isdigit(static_cast<unsigned char>(version[5])) && version[6] == '.' &&
        std::isdigit(static_cast<unsigned char>(version[7])))
      return refuse(505, "HTTP version " + std::string(version.substr(5)) + " is not served (HTTP/1.1 and HTTP/1.0 are)");
    return refuse(400, "a malformed HTTP version in the request line");
  }
  h.request.method = std::string(method);
  h.request.target = std::string(target);
  h.request.path = std::string(target.substr(0, target.find('?')));
  h.request.version = std::string(version);
  h.keep_alive = version == "HTTP/1.1";
  // the headers, up to an empty line
  std::size_t at = eol + 1;
  for (;;) {
    if (at - start > limits.max_head) return refuse(431, "the request's head is longer than " + std::to_string(limits.max_head) + " bytes");
    const std::size_t nl = in.find('\n', at);
    if (nl == std::string_view::npos) {
      if (in.size() - start > limits.max_head) return refuse(431, "the request's head is longer than " + std::to_string(limits.max_head) + " bytes");
      return HttpHead{};
    }
    std::string_view l = in.substr(at, nl - at);
    at = nl + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty()) break;
    if (l.front() == ' ' || l.front() == '\t') return refuse(400, "a folded header line (obsolete line folding is not taken)");
    const std::size_t colon = l.find(':');
    if (colon == std::string_view::npos || colon == 0) return refuse(400, "a malformed header line (expected 'Name: value')");
    const std::string_view name = l.substr(0, colon), value = trim(l.substr(colon + 1));
    if (!std::all_of(name.begin(), name.end(), [](char c) { return tchar(static_cast<unsigned char>(c)); }))
      return refuse(400, "a malformed header name '" + std::string(name.substr(0, 64)) + "'");
    if (!std::all_of(value.begin(), value.end(), [](char c) {
          const auto u = static_cast<unsigned char>(c);
          return u == '\t' || (u >= 0x20 && u != 0x7f);
        }))
      return refuse(400, "a control character in the value of header '" + std::string(name) + "'");
    if (h.request.headers.size() >= limits.max_headers)
      return refuse(431, "more than " + std::to_string(limits.max_headers) + " header lines");
    h.request.headers.emplace_back(lower(name), std::string(value));
  }
  if (at - start > limits.max_head) return refuse(431, "the request's head is longer than " + std::to_string(limits.max_head) + " bytes");
  h.bytes = at;
  // the body's framing: Content-Length only (one value; chunked request bodies are refused)
  bool has_length = false;
  for (const auto& [k, v] : h.request.headers) {
    if (k == "content-length") {
      if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return refuse(400, "Content-Length '" + v.substr(0, 32) + "' is not a whole number of bytes");
      const std::int64_t n = std::stoll(v);
      if (has_length && n != h.content_length) return refuse(400, "two different Content-Length headers");
      h.content_length = n;
      has_length = true;
    } else if (k == "transfer-encoding") {
      if (has_length || h.request.header("content-length")) return refuse(400, "both Transfer-Encoding and Content-Length");
      return refuse(411, "send the body with a Content-Length (Transfer-Encoding '" + v.substr(0, 32) + "' is not taken)");
    } else if (k == "connection") {
      std::string_view rest = v;
      while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        const std::string token = lower(trim(rest.substr(0, comma)));
        if (token == "close") h.keep_alive = false;
        if (token == "keep-alive" && version == "HTTP/1.0") h.keep_alive = true;
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      }
    } else if (k == "expect") {
      if (lower(v) != "100-continue") return refuse(417, "Expect '" + v.substr(0, 32) + "' is not taken (100-continue is)");
      h.expect_continue = true;
    }
  }
  if (h.content_length > limits.max_body)
    return refuse(413, "the body of " + std::to_string(h.content_length) + " bytes is larger than the " + std::to_string(limits.max_body) +
                           " bytes the server takes");
  h.state = HttpHead::State::complete;
  return h;
}

std::string serialize_response(const HttpResponse& r, bool chunked, bool close, bool head_only) {
  std::string s = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  s += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [k, v] : r.headers) s += k + ": " + v + "\r\n";
  s += chunked ? std::string("Transfer-Encoding: chunked\r\n") : "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  if (close) s += "Connection: close\r\n";
  s += "\r\n";
  if (!chunked && !head_only) s += r.body;
  return s;
}

// ---- the outbox: bytes for a connection, from any thread to the loop

struct Outbox {
  struct Post {
    std::uint64_t conn;
    std::string bytes;
    bool last;  // the answer's last bytes
  };
  std::mutex mu;
  std::vector<Post> posts;
  bool closed = false;
  int wake = -1;  // eventfd
  void put(std::uint64_t conn, std::string bytes, bool last) {
    std::lock_guard<std::mutex> l(mu);
    if (closed) return;
    posts.push_back(Post{conn, std::move(bytes), last});
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake, &one, sizeof one);  // EAGAIN: already awake
  }
};

struct Reply::State {
  std::mutex mu;
  bool began = false, ended = false, gone = false;
  std::function<void()> on_gone;
};

Reply::Reply(std::shared_ptr<Outbox> box, std::uint64_t conn, bool head_only, bool keep_alive)
    : box_(std::move(box)), conn_(conn), head_only_(head_only), keep_alive_(keep_alive), st_(std::make_shared<State>()) {}

void Reply::post(std::string bytes, bool last) { box_->put(conn_, std::move(bytes), last); }

void Reply::send(const HttpResponse& r) {
  std::lock_guard<std::mutex> l(st_->mu);
  if (st_->began || st_->ended) return;
  st_->began = st_->ended = true;
  post(serialize_response(r, false, !keep_alive_, head_only_), true);
}

void Reply::begin_stream(const HttpResponse& head) {
  std::lock_guard<std::mutex> l(st_->mu);
  if (st_->began) return;
  st_->began = true;
  post(serialize_response(head, true, !keep_alive_, head_only_), false);
}

void Reply::write(std::string_view bytes) {
  std::lock_guard<std::mutex> l(st_->mu);
  if (!st_->began || st_->ended || bytes.empty() || head_only_) return;
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  std::string chunk = size;
  chunk.append(bytes);
  chunk += "\r\n";
  post(std::move(chunk), false);
}

void Reply::end() {
  std::lock_guard<std::mutex> l(st_->mu);
  if (!st_->began || st_->ended) return;
  st_->ended = true;
  post(head_only_ ? std::string() : std::string("0\r\n\r\n"), true);
}

void Reply::on_gone(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> l(st_->mu);
    if (!st_->gone) {
      st_->on_gone = std::move(f);
      return;
    }
  }
  f();
}

bool Reply::gone() const {
  std::lock_guard<std::mutex> l(st_->mu);
  return st_->gone;
}

void Reply::went_away() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> l(st_->mu);
    if (st_->gone || st_->ended) return;
    st_->gone = true;
    f = std::move(st_->on_gone);
  }
  if (f) f();
}

// ---- the workers: a fixed pool, tasks as data

namespace {
class Workers {
 public:
  void start(int n) {
    try {
      for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
    } catch (const std::system_error& e) {
      stop();
      throw Error("serve: cannot start the " + std::to_string(n) + " worker threads of the HTTP front (" + e.what() + ")");
    }
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  void stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
      tasks_.clear();
    }
    cv_.notify_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
    threads_.clear();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stopping_ || !tasks_.empty(); });
        if (stopping_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

constexpr std::uint64_t kListen = ~std::uint64_t{0}, kWake = ~std::uint64_t{0} - 1;
constexpr std::size_t kPipelined = 64 << 10;  // bytes read ahead while a request is answered
constexpr std::size_t kReadSlice = 256 << 10;  // bytes read from one connection per wake (fairness)
constexpr double kLinger = 2;                  // seconds a closing connection's input is drained

struct Conn {
  enum class Phase { idle, head, body, answering, lingering } phase = Phase::idle;
  int fd = -1;
  std::uint64_t id = 0;
  std::string in, out;
  std::size_t out_at = 0;
  Clock::time_point deadline, write_mark;
  HttpHead head;
  std::int64_t reserved = 0;  // bytes of the body budget
  bool peer_eof = false, keep_alive = true, answered = false, close_after = false, counted = false;
  int served = 0;
  std::uint32_t events = 0;
  std::shared_ptr<Reply> reply;
};
}  // namespace

struct HttpFront::Impl {
  HttpLimits limits;
  Handler handler;
  ErrorBody error_body;
  std::shared_ptr<Outbox> box = std::make_shared<Outbox>();
  Workers workers;
  int ep = -1, listen_fd = -1, reserve_fd = -1;
  int max_conns = 0;
  std::map<std::uint64_t, Conn> conns;
  std::uint64_t next_id = 1;
  std::int64_t budget_used = 0;
  std::atomic<bool> stopping{false};
  std::atomic<std::int64_t> unanswered{0}, open{0};
  std::mutex stop_mu;
  bool stopped = false;

  void set_events(Conn& c) {
    const bool want_in = c.phase == Conn::Phase::lingering || (!c.peer_eof && (c.phase != Conn::Phase::answering || c.in.size() < kPipelined));
    const std::uint32_t ev = (want_in ? EPOLLIN : 0u) | (c.out_at < c.out.size() ? EPOLLOUT : 0u);
    if (ev == c.events) return;
    epoll_event e{};
    e.events = ev;
    e.data.u64 = c.id;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &e);
    c.events = ev;
  }

  void release(Conn& c) {
    budget_used -= c.reserved;
    c.reserved = 0;
  }

  // The connection is gone (or dropped): its answer, if unfinished, is told.
  void drop(std::uint64_t id) {
    auto it = conns.find(id);
    if (it == conns.end()) return;
    Conn& c = it->second;
    // counted out before the close: a client that has seen its end of file never reads a count
    // that still holds its connection
    --open;
    if (c.counted) --unanswered;
    ::close(c.fd);
    release(c);
    std::shared_ptr<Reply> r = c.answered ? nullptr : c.reply;
    conns.erase(it);
    if (r) r->went_away();
  }

  // A refusal the front makes itself: the JSON body, then the connection closes.
  void refuse(Conn& c, int status, const std::string& why) {
    HttpResponse r;
    r.status = status;
    r.body = error_body(status, why);
    if (status == 503) r.headers.emplace_back("Retry-After", "1");
    c.out.append(serialize_response(r, false, true, false));
    release(c);
    c.phase = Conn::Phase::answering;
    c.answered = true;
    c.close_after = true;
    c.reply = nullptr;
    c.write_mark = Clock::now();
  }

  void flush(Conn& c) {
    while (c.out_at < c.out.size()) {
      const ssize_t n = ::send(c.fd, c.out.data() + c.out_at, c.out.size() - c.out_at, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_at += static_cast<std::size_t>(n);
        c.write_mark = Clock::now();
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      } else {
        drop(c.id);  // EPIPE, ECONNRESET: the client went away
        return;
      }
    }
    if (c.out_at == c.out.size()) {
      c.out.clear();
      c.out_at = 0;
      if (c.answered && c.phase == Conn::Phase::answering) {
        if (c.counted) {
          --unanswered;
          c.counted = false;
        }
        if (c.close_after) {  // a lingering close: the client reads the answer before our FIN
          ::shutdown(c.fd, SHUT_WR);
          c.phase = Conn::Phase::lingering;
          c.deadline = Clock::now() + seconds(kLinger);
        } else {
          c.phase = Conn::Phase::idle;
          c.answered = false;
          c.reply = nullptr;
          c.deadline = Clock::now() + seconds(limits.idle_timeout);
          advance(c);  // a request that came pipelined
          return;
        }
      }
    }
    set_events(c);
  }

  // Reads what the socket has; false when the connection was dropped.
  bool receive(Conn& c) {
    char buf[16384];
    std::size_t got = 0;
    while (got < kReadSlice) {
      if (c.phase == Conn::Phase::answering && c.in.size() >= kPipelined) break;
      const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        got += static_cast<std::size_t>(n);
        if (c.phase != Conn::Phase::lingering) c.in.append(buf, static_cast<std::size_t>(n));
      } else if (n == 0) {
        c.peer_eof = true;
        if (c.phase == Conn::Phase::lingering) {
          drop(c.id);
          return false;
        }
        break;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else {
        drop(c.id);
        return false;
      }
    }
    return true;
  }

  // Moves the connection's request on: its head, its body, then the handler.
  void advance(Conn& c) {
    if (c.phase == Conn::Phase::idle || c.phase == Conn::Phase::head) {
      if (c.in.empty()) {
        if (c.peer_eof) return drop(c.id);
        return set_events(c);
      }
      if (c.phase == Conn::Phase::idle) {
        c.phase = Conn::Phase::head;
        c.deadline = Clock::now() + seconds(limits.header_timeout);
      }
      HttpHead h = parse_head(c.in, limits);
      if (h.state == HttpHead::State::incomplete) {
        if (c.peer_eof) refuse(c, 400, "the connection ended inside a request's head");
      } else if (h.state == HttpHead::State::refused) {
        refuse(c, h.status, h.why);
      } else if (budget_used + h.content_length > limits.body_budget) {
        refuse(c, 503, "the server holds " + std::to_string(budget_used) + " bytes of request bodies now (at most " +
                           std::to_string(limits.body_budget) + "); retry");
      } else {
        c.reserved = h.content_length;
        budget_used += c.reserved;
        c.head = std::move(h);
        c.phase = Conn::Phase::body;
        c.deadline = Clock::now() + seconds(limits.body_timeout);
        if (c.head.expect_continue && c.in.size() < c.head.bytes + static_cast<std::size_t>(c.head.content_length))
          c.out.append("HTTP/1.1 100 Continue\r\n\r\n");
      }
    }
    if (c.phase == Conn::Phase::body) {
      const std::size_t need = c.head.bytes + static_cast<std::size_t>(c.head.content_length);
      if (c.in.size() >= need) {
        HttpRequest req = std::move(c.head.request);
        req.body = c.in.substr(c.head.bytes, static_cast<std::size_t>(c.head.content_length));
        c.in.erase(0, need);
        ++c.served;
        c.keep_alive = c.head.keep_alive && c.served < limits.max_requests && !c.peer_eof;
        c.close_after = !c.keep_alive;
        c.phase = Conn::Phase::answering;
        c.answered = false;
        c.counted = true;
        ++unanswered;
        c.write_mark = Clock::now();
        c.reply = std::make_shared<Reply>(box, c.id, req.method == "HEAD", c.keep_alive);
        workers.post([this, req = std::move(req), reply = c.reply]() mutable {
          try {
            handler(std::move(req), reply);
          } catch (const std::exception& e) {
            HttpResponse r;
            r.status = 500;
            r.body = error_body(500, e.what());
            reply->send(r);
          }
        });
      } else if (c.peer_eof) {
        refuse(c, 400, "the connection ended inside a request's body");
      }
    }
    if (c.out_at < c.out.size()) return flush(c);
    set_events(c);
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if ((errno == EMFILE || errno == ENFILE) && reserve_fd >= 0) {  // out of descriptors: the spare one takes and closes it
          ::close(reserve_fd);
          fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd >= 0) ::close(fd);
          reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          continue;
        }
        return;  // EAGAIN, or an error the next wake retries
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (open.load() >= max_conns + 64) {  // far past the limit: no answer at all
        ::close(fd);
        continue;
      }
      Conn c;
      c.fd = fd;
      c.id = next_id++;
      c.deadline = Clock::now() + seconds(limits.idle_timeout);
      c.write_mark = Clock::now();
      epoll_event e{};
      e.data.u64 = c.id;
      e.events = EPOLLIN;
      c.events = EPOLLIN;
      if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) {
        ::close(fd);
        continue;
      }
      const bool over = open.load() >= max_conns;
      Conn& placed = conns.emplace(c.id, std::move(c)).first->second;
      ++open;
      if (over) {
        refuse(placed, 503, "the server has " + std::to_string(max_conns) + " connections open (its limit); retry");
        flush(placed);
      }
    }
  }

  void apply_posts() {
    std::vector<Outbox::Post> posts;
    {
      std::lock_guard<std::mutex> l(box->mu);
      posts.swap(box->posts);
    }
    for (Outbox::Post& p : posts) {
      auto it = conns.find(p.conn);
      if (it == conns.end()) continue;
      Conn& c = it->second;
      if (c.phase != Conn::Phase::answering || c.answered) continue;
      if (c.out.empty()) c.write_mark = Clock::now();
      c.out.append(p.bytes);
      if (p.last) {
        c.answered = true;
        release(c);
        if (c.peer_eof) c.close_after = true;
      }
      flush(c);
    }
  }

  void sweep() {
    const auto now = Clock::now();
    std::vector<std::uint64_t> quiet, late_head, late_body, stuck;
    for (auto& [id, c] : conns) {
      if (c.out_at < c.out.size() && now - c.write_mark > seconds(limits.write_timeout)) stuck.push_back(id);
      else if ((c.phase == Conn::Phase::idle || c.phase == Conn::Phase::lingering) && now > c.deadline) quiet.push_back(id);
      else if (c.phase == Conn::Phase::head && now > c.deadline) late_head.push_back(id);
      else if (c.phase == Conn::Phase::body && now > c.deadline) late_body.push_back(id);
    }
    for (auto id : stuck) drop(id);
    for (auto id : quiet) drop(id);
    for (auto id : late_head) {
      Conn& c = conns.at(id);
      refuse(c, 408, "the request's head did not arrive within " + std::to_string(static_cast<int>(limits.header_timeout)) + " s");
      flush(c);
    }
    for (auto id : late_body) {
      Conn& c = conns.at(id);
      refuse(c, 408, "the request's body did not arrive within " + std::to_string(static_cast<int>(limits.body_timeout)) + " s");
      flush(c);
    }
  }

  void loop() {
    std::vector<epoll_event> evs(256);
    auto last_sweep = Clock::now();
    while (!stopping.load()) {
      const int n = ::epoll_wait(ep, evs.data(), static_cast<int>(evs.size()), 100);
      if (n < 0 && errno != EINTR) throw Error(std::string("serve: epoll_wait failed: ") + std::strerror(errno));
      for (int i = 0; i < n; ++i) {
        const std::uint64_t id = evs[i].data.u64;
        const std::uint32_t ev = evs[i].events;
        if (id == kListen) {
          accept_all();
        } else if (id == kWake) {
          std::uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(box->wake, &count, sizeof count);
          apply_posts();
        } else {
          auto it = conns.find(id);
          if (it == conns.end()) continue;
          if (ev & EPOLLERR) {
            drop(id);
            continue;
          }
          if (ev & EPOLLIN) {
            if (!receive(it->second)) continue;
            it = conns.find(id);
            if (it == conns.end()) continue;
            if (it->second.phase != Conn::Phase::lingering) advance(it->second);
          }
          // both directions closed (or reset): no answer can reach the client any more
          if (ev & EPOLLHUP) {
            drop(id);
            continue;
          }
          it = conns.find(id);
          if (it != conns.end() && (ev & EPOLLOUT)) flush(it->second);
        }
      }
      if (Clock::now() - last_sweep > std::chrono::milliseconds(100)) {
        sweep();
        last_sweep = Clock::now();
      }
    }
    // stopped: every connection closes; answers still running are told their client is gone
    std::vector<std::uint64_t> ids;
    for (auto& [id, c] : conns) ids.push_back(id);
    for (auto id : ids) drop(id);
  }
};

HttpFront::HttpFront(const HttpLimits& limits, Handler handler, ErrorBody error_body) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  BITGRAD_CHECK(limits.max_connections >= 1 && limits.workers >= 1 && limits.max_body >= 0 && limits.body_budget >= limits.max_body &&
                    limits.max_requests >= 1,
                "serve", "the HTTP limits need max_connections >= 1, workers >= 1 and body_budget >= max_body >= 0");
  s.limits = limits;
  s.handler = std::move(handler);
  s.error_body = std::move(error_body);
  // each connection is a descriptor: the soft limit goes up to the hard one, and the connection
  // limit stays below it with room for the run's files
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t want = std::min<rlim_t>(rl.rlim_max, static_cast<rlim_t>(limits.max_connections) + 256);
    if (rl.rlim_cur < want) {
      rl.rlim_cur = want;
      ::setrlimit(RLIMIT_NOFILE, &rl);
      ::getrlimit(RLIMIT_NOFILE, &rl);
    }
    const auto room = rl.rlim_cur == RLIM_INFINITY ? static_cast<rlim_t>(limits.max_connections) + 256 : rl.rlim_cur;
    s.max_conns = static_cast<int>(std::max<rlim_t>(1, std::min<rlim_t>(static_cast<rlim_t>(limits.max_connections), room > 192 ? room - 192 : 1)));
  } else {
    s.max_conns = limits.max_connections;
  }
  s.ep = ::epoll_create1(EPOLL_CLOEXEC);
  s.box->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  s.reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (s.ep < 0 || s.box->wake < 0) throw Error(std::string("serve: cannot create the HTTP front's event loop (") + std::strerror(errno) + ")");
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kWake;
  ::epoll_ctl(s.ep, EPOLL_CTL_ADD, s.box->wake, &e);
  s.workers.start(limits.workers);
}

HttpFront::~HttpFront() {
  stop();
  Impl& s = *impl_;
  for (auto& [id, c] : s.conns) ::close(c.fd);
  {
    std::lock_guard<std::mutex> l(s.box->mu);
    s.box->closed = true;
    ::close(s.box->wake);
  }
  for (int fd : {s.ep, s.listen_fd, s.reserve_fd})
    if (fd >= 0) ::close(fd);
}

int HttpFront::bind(const std::string& host, int port) {
  Impl& s = *impl_;
  const std::string where = host + ":" + (port == 0 ? std::string("(a free port)") : std::to_string(port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0) throw Error("serve: cannot bind to " + where + ": " + ::gai_strerror(gai));
  std::string last = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      last = std::strerror(errno);
      ::close(fd);
      continue;
    }
    s.listen_fd = fd;
    break;
  }
  ::freeaddrinfo(res);
  if (s.listen_fd < 0) throw Error("serve: cannot bind to " + where + ": " + last);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = kListen;
  if (::epoll_ctl(s.ep, EPOLL_CTL_ADD, s.listen_fd, &e) != 0) throw Error(std::string("serve: cannot watch the listening socket: ") + std::strerror(errno));
  return bound;
}

void HttpFront::run() { impl_->loop(); }

void HttpFront::stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> l(s.stop_mu);
  if (s.stopped) return;
  s.stopped = true;
  s.stopping = true;
  {
    std::lock_guard<std::mutex> b(s.box->mu);
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(s.box->wake, &one, sizeof one);
  }
  s.workers.stop();
}

void HttpFront::post(std::function<void()> task) { impl_->workers.post(std::move(task)); }

std::int64_t HttpFront::in_flight() const { return impl_->unanswered.load(); }

std::int64_t HttpFront::connections() const { return impl_->open.load(); }

int HttpFront::max_connections() const { return impl_->max_conns; }

}  // namespace bitgrad::serve
