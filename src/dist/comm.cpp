#include "dist/comm.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#ifdef BITGRAD_HAVE_MPI
#include <mpi.h>
#endif

#include "io/format.hpp"

namespace bitgrad::dist {
namespace {

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

bool g_mpi_started = false;  // set once, by the thread that starts MPI

}  // namespace

bool have_mpi() {
#ifdef BITGRAD_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool Comm::mpi_started() { return g_mpi_started; }

bool Comm::launched_by_mpirun() { return env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1)) > 1; }

Comm& Comm::world() {
  static Comm* c = new Comm();  // never destroyed: MPI must not be finalized by a static destructor
  return *c;
}

Comm::Comm() : host_(hostname()) {
  if (const char* t = std::getenv("BITGRAD_DIST_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (!end || *end || !(v > 0 && v <= 1e7))
      throw Error(std::string("BITGRAD_DIST_TIMEOUT must be a number of seconds in (0, 1e7], got '") + printable_excerpt(t) + "'");
    timeout_ = v;
  }
  if (!launched_by_mpirun()) return;
#ifdef BITGRAD_HAVE_MPI
  int provided = 0, already = 0;
  // Only the training thread calls MPI (kernel and loader threads never do). An MPI another
  // library started first (mpi4py in a Python program) is used as it is, and left for it to end.
  MPI_Initialized(&already);
  if (already) owned_ = false;
  else if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) throw Error("data parallel: MPI_Init failed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  mpi_ = true;
  g_mpi_started = true;
#else
  throw Error("data parallel: started by mpirun with " + std::to_string(env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", 1))) +
              " ranks, but this bitgrad was built without MPI (install libopenmpi-dev and rebuild)");
#endif
}

Comm::~Comm() = default;

bool launched_by_mpirun() { return Comm::launched_by_mpirun(); }
int world_size() { return launched_by_mpirun() ? Comm::world().size() : 1; }
int world_rank() { return launched_by_mpirun() ? Comm::world().rank() : 0; }
std::string host_name() { return hostname(); }
void abort_job(int code) {
  if (launched_by_mpirun()) Comm::world().abort(code);
}
void finalize() {
  if (launched_by_mpirun()) Comm::world().finalize();
}

void Comm::finalize() {
#ifdef BITGRAD_HAVE_MPI
  if (mpi_ && !finalized_) {
    finalized_ = true;
    if (owned_) MPI_Finalize();
  }
#endif
}

void Comm::abort(int code) {
#ifdef BITGRAD_HAVE_MPI
  if (mpi_ && !finalized_) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  (void)code;
}

#ifdef BITGRAD_HAVE_MPI
namespace {
void check(int rc, const char* call, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(std::string("data parallel: ") + call + " failed in " + what + ": " + msg);
}
}  // namespace
#endif

// Polls: busily at first (a message on the way arrives within microseconds), then yielding the
// core (on an oversubscribed machine the rank we wait for may need it), and after 50 ms with
// pauses of up to 1 ms (a slower rank: an evaluation or a checkpoint on rank 0).
void Comm::wait(void* requests, int n, const std::string& what) {
#ifdef BITGRAD_HAVE_MPI
  auto* req = static_cast<MPI_Request*>(requests);
  const auto t0 = std::chrono::steady_clock::now();
  long pause_ns = 0;
  for (long spins = 0;; ++spins) {
    int done = 0;
    check(MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE), "MPI_Testall", what);
    if (done) return;
    if (spins < 100) continue;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > timeout_) {
      // cancelled and freed, so that no late message lands in buffers the unwinding frees
      for (int i = 0; i < n; ++i)
        if (req[i] != MPI_REQUEST_NULL) {
          MPI_Cancel(&req[i]);
          MPI_Request_free(&req[i]);
        }
      throw Error(io::strprintf("data parallel: rank %d (%s) waited %.0f s in %s without an answer from the other ranks: one of them "
                                "has died, hangs or is far slower (the limit is --dist-timeout / BITGRAD_DIST_TIMEOUT)",
                                rank_, host_.c_str(), waited, what.c_str()));
    }
    if (waited < 0.05) {
      ::sched_yield();
      continue;
    }
    pause_ns = pause_ns < 1000000 ? pause_ns + 10000 : pause_ns;
    timespec ts{0, pause_ns};
    ::nanosleep(&ts, nullptr);
  }
#else
  (void)requests, (void)n, (void)what;
#endif
}

void Comm::exchange(const std::vector<Message>& sends, const std::vector<Message>& recvs, const std::string& what) {
  if (sends.empty() && recvs.empty()) return;
#ifdef BITGRAD_HAVE_MPI
  BITGRAD_CHECK(mpi_, "data parallel", "exchange without MPI");
  std::vector<MPI_Request> req;
  req.reserve(sends.size() + recvs.size());
  // messages larger than 1 GiB go in parts (MPI counts are int); receives are posted first
  const std::int64_t part = std::int64_t{1} << 30;
  auto post = [&](const Message& m, bool send) {
    std::int64_t off = 0;
    do {
      req.emplace_back();
      char* p = static_cast<char*>(m.data) + off;
      const int count = static_cast<int>(std::min(part, m.bytes - off));
      check(send ? MPI_Isend(p, count, MPI_BYTE, m.peer, 7, MPI_COMM_WORLD, &req.back())
                 : MPI_Irecv(p, count, MPI_BYTE, m.peer, 7, MPI_COMM_WORLD, &req.back()),
            send ? "MPI_Isend" : "MPI_Irecv", what);
      off += part;
    } while (off < m.bytes);
  };
  for (const Message& m : recvs) post(m, false);
  for (const Message& m : sends) post(m, true);
  wait(req.data(), static_cast<int>(req.size()), what);
#else
  (void)what;
  throw Error("data parallel: exchange without MPI");
#endif
}

std::vector<std::string> Comm::allgather(const std::string& mine, const std::string& what) {
  if (size_ == 1) return {mine};
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(size_));
  std::int64_t my = static_cast<std::int64_t>(mine.size());
  std::vector<Message> sends, recvs;
  for (int r = 0; r < size_; ++r)
    if (r != rank_) {
      sends.push_back({r, &my, sizeof my});
      recvs.push_back({r, &sizes[static_cast<std::size_t>(r)], sizeof my});
    }
  exchange(sends, recvs, what);
  sizes[static_cast<std::size_t>(rank_)] = my;
  std::vector<std::string> all(static_cast<std::size_t>(size_));
  sends.clear();
  recvs.clear();
  std::string copy = mine;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) {
      all[static_cast<std::size_t>(r)] = mine;
      continue;
    }
    all[static_cast<std::size_t>(r)].resize(static_cast<std::size_t>(sizes[static_cast<std::size_t>(r)]));
    sends.push_back({r, copy.data(), my});
    recvs.push_back({r, all[static_cast<std::size_t>(r)].data(), sizes[static_cast<std::size_t>(r)]});
  }
  exchange(sends, recvs, what);
  return all;
}

void Comm::broadcast(std::string& bytes, int root, const std::string& what) {
  if (size_ == 1) return;
  std::int64_t n = static_cast<std::int64_t>(bytes.size());
  std::vector<Message> sends, recvs;
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r)
      if (r != root) sends.push_back({r, &n, sizeof n});
  } else {
    recvs.push_back({root, &n, sizeof n});
  }
  exchange(sends, recvs, what);
  if (rank_ != root) bytes.resize(static_cast<std::size_t>(n));
  for (auto& m : sends) m = {m.peer, bytes.data(), n};
  for (auto& m : recvs) m = {m.peer, bytes.data(), n};
  exchange(sends, recvs, what);
}

}  // namespace bitgrad::dist
