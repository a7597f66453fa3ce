// The ranks of a data-parallel run: MPI_COMM_WORLD when the process was started by mpirun
// (and bitgrad was built with MPI), otherwise one rank. Every wait has a deadline: a rank that
// died or hangs makes the others fail with an error naming the wait, not hang. Only bytes move
// here (sends, receives, gathers, broadcasts); no floating-point reduction is ever left to MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitgrad/dist.hpp"

namespace bitgrad::dist {

class Comm {
 public:
  // The process's communicator; the first call starts MPI when launched by mpirun.
  static Comm& world();
  // Whether this process was started by mpirun with more than one rank (environment only).
  static bool launched_by_mpirun();
  // Whether world() has started MPI (or found it started).
  static bool mpi_started();

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }
  const std::string& host() const { return host_; }

  // Seconds a rank waits for the others before it gives up (default 300, BITGRAD_DIST_TIMEOUT).
  double timeout() const { return timeout_; }
  void set_timeout(double seconds) { timeout_ = seconds; }

  // Non-blocking point-to-point messages, completed together by wait_all.
  struct Message {
    int peer;
    void* data;
    std::int64_t bytes;
  };
  // Sends `sends`, receives `recvs` (sizes known to both sides), waits for all. `what` names the
  // exchange in a timeout error.
  void exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs, const std::string& what);
  // Every rank's bytes, in rank order.
  std::vector<std::string> allgather(const std::string& mine, const std::string& what);
  // Rank `root`'s bytes on every rank.
  void broadcast(std::string& bytes, int root, const std::string& what);
  // Ends the job with this exit code on every rank (MPI_Abort); returns only with one rank.
  void abort(int code);
  // Leaves MPI cleanly (at exit of a run that reached its end).
  void finalize();
  // Whether the ranks have agreed to start a run (train/dist_sync.hpp); a rank that fails
  // before that tells the others through the same exchange.
  bool started() const { return started_; }
  void set_started() { started_ = true; }

  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

 private:
  Comm();
  ~Comm();
  void wait(void* requests, int n, const std::string& what);
  int rank_ = 0, size_ = 1;
  bool mpi_ = false, finalized_ = false, started_ = false;
  bool owned_ = true;  // MPI was started here, so it is finalized here
  double timeout_ = 300;
  std::string host_;
};

// Whether this build can run data parallel (linked with MPI).
bool have_mpi();

}  // namespace bitgrad::dist
