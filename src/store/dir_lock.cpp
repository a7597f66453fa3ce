#include "store/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bitgrad/error.hpp"
#include "bitgrad/io.hpp"

namespace bitgrad::store {

DirLock::DirLock(const std::string& dir, const std::string& who) {
  io::make_dirs(dir);
  const std::string file = dir + "/.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(who + ": cannot create " + file + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK) throw Error(who + ": cannot lock " + file + ": " + std::strerror(err));
    std::string holder(pid, n > 0 ? static_cast<std::size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    throw Error(who + ": " + dir + " is in use by another bitgrad process" + (holder.empty() ? "" : " (pid " + holder + ")") +
                "; wait for it to finish or choose another directory");
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    // the lock holds without the pid; only the message of a second process loses it
  }
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace bitgrad::store
