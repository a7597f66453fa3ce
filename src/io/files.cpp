// Atomic writes: temporary file in the same directory, fsync, rename, fsync of the directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "bitgrad/fingerprint.hpp"
#include "bitgrad/io.hpp"

namespace bitgrad::io {
namespace {
[[noreturn]] void sys_fail(const std::string& what, const std::string& path, int err = errno) {
  const std::string msg = "io: " + what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) throw NotFoundError(msg);
  throw Error(msg);
}
std::string dir_of(const std::string& path) {
  auto p = path.find_last_of('/');
  return p == std::string::npos ? "." : (p == 0 ? "/" : path.substr(0, p));
}
}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  // a device, FIFO or directory is no file to replace (a temporary renamed over /dev/full would
  // replace the device): refused by name
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw Error("io: cannot write " + path + ": it is " +
                (S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) ? "a character device" : S_ISBLK(st.st_mode) ? "a block device"
                 : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file") +
                "; bitgrad writes files atomically (a temporary beside it, renamed over it)");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) sys_fail("cannot create", tmp);
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;  // what close and unlink might overwrite
      ::close(fd);
      ::unlink(tmp.c_str());
      sys_fail("cannot write", tmp, err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    sys_fail("cannot sync", tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    sys_fail("cannot rename into", path, err);
  }
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path, std::uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block the open
  if (fd < 0) sys_fail("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    sys_fail("cannot stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file";
    throw Error("io: " + path + " is " + kind + ", not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw Error("io: " + path + " is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(max_bytes) + " such a file may have");
  }
  std::string out(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      sys_fail("cannot read", path);
    }
    if (n == 0) break;  // shrank while read: what there is
    done += static_cast<std::size_t>(n);
  }
  out.resize(done);
  ::close(fd);
  return out;
}

void make_dirs(const std::string& path) {
  std::string cur(!path.empty() && path[0] == '/' ? 1 : 0, '/');
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur.append(part).push_back('/');
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) sys_fail("cannot create directory", cur);
  }
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string file_hash(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read " + path + " to hash it");
  Fingerprint h;
  char buf[1 << 16];
  while (f) {
    f.read(buf, sizeof buf);
    if (f.gcount() > 0) h.add_bytes(buf, static_cast<std::size_t>(f.gcount()));
  }
  return h.digest().hex();
}

}  // namespace bitgrad::io
