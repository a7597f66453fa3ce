// Raw loopback connections for the server tests: bytes in, bytes out, with deadlines, so that a
// test can drip, half-close or walk away as a hostile client does.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace bitgrad::test {

// A connection to 127.0.0.1:port, or -1.
inline int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
  std::size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<std::size_t>(n);
  }
  return true;
}

// What arrives until the peer closes, `until` holds of what arrived, or `seconds` pass.
template <class Until>
std::string receive(int fd, double seconds, Until until) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  char buf[65536];
  while (!until(got)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<std::size_t>(n));
  }
  return got;
}
inline std::string receive_all(int fd, double seconds) {
  return receive(fd, seconds, [](const std::string&) { return false; });
}

// The status of an HTTP response's first line ("HTTP/1.1 200 OK" -> 200), or -1.
inline int status_of(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

// The body of the first response in `response` (its Content-Length bytes, or all the rest).
inline std::string body_of(const std::string& response) {
  const std::size_t head = response.find("\r\n\r\n");
  if (head == std::string::npos) return "";
  const std::size_t cl = response.find("Content-Length: ");
  if (cl == std::string::npos || cl > head) return response.substr(head + 4);
  return response.substr(head + 4, std::stoul(response.substr(cl + 16)));
}

}  // namespace bitgrad::test
