// A test seam, not part of bitgrad: `bitgrad train` with a fault injected, for the replica-check
// test (train_ranks_test.cpp). Under mpirun each rank runs
//   fault_train RANK:STEP CONFIG OUT STEPS REPLICA_CHECK_EVERY
// and rank RANK flips the lowest bit of the first parameter's first element after step STEP,
// through a RunObserver; the production loop knows nothing of it. Errors are printed the way
// the CLI prints them (rank 0 reports a collective error once, exit code 2).
#include <cstdio>
#include <iostream>
#include <string>

#include "bitgrad/bitgrad.hpp"
#include "train/trainer.hpp"

namespace {

using namespace bitgrad;

class FaultFlip : public train::RunObserver {
 public:
  FaultFlip(int rank, std::int64_t step) : rank_(rank), step_(step) {}
  void begin(const store::RunDir*, train::Session&, std::int64_t) override {}
  void end_step(std::int64_t step, const train::Session& session, const train::Session::StepOut&) override {
    if (step != step_ || session.rank() != rank_) return;
    Tensor p = session.params().front().second;  // a handle: shares the parameter's storage
    BITGRAD_DISPATCH_FLOAT(p.dtype(), "fault", T, [&] { reinterpret_cast<unsigned char*>(p.mutable_data<T>())[0] ^= 1; });
  }

 private:
  int rank_;
  std::int64_t step_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: fault_train RANK:STEP CONFIG OUT STEPS REPLICA_CHECK_EVERY\n");
    return 2;
  }
  int rank = -1;
  long long step = -1;
  if (std::sscanf(argv[1], "%d:%lld", &rank, &step) != 2) {
    std::fprintf(stderr, "fault_train: RANK:STEP expected, got '%s'\n", argv[1]);
    return 2;
  }
  int me = 0;
  try {
    me = dist::world_rank();
    train::RunOptions o;
    o.out = argv[3];
    o.steps = std::stoll(argv[4]);
    o.replica_check_every = std::stoll(argv[5]);
    o.progress = 0;
    FaultFlip flip(rank, step);
    train::run(train::load_config(argv[2]), o, std::cout, {&flip});
  } catch (const dist::CollectiveError& e) {
    std::cout.flush();
    if (me == 0) std::fprintf(stderr, "bitgrad: error: %s\n", e.what());
    dist::finalize();
    return 2;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::fprintf(stderr, "bitgrad: error: rank %d: %s\n", me, e.what());
    std::fflush(stderr);
    dist::abort_job(2);
    return 2;
  }
  dist::finalize();
  return 0;
}
