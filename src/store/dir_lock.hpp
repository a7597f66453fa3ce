// An exclusive lock on a run or study directory (flock on DIR/.lock, which holds the owner's
// pid): held while a run trains or a study computes, released when the last copy goes, and by
// the system when the process dies (kill -9 included), so a stale lock cannot exist.
#pragma once

#include <string>

namespace bitgrad::store {

class DirLock {
 public:
  // Creates the directory if needed; throws, naming the holder's pid, when another process
  // holds it.
  DirLock(const std::string& dir, const std::string& who);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace bitgrad::store
