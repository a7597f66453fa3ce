// Data parallel over MPI (docs/distributed.md): `mpirun -n P bitgrad train CONFIG`, or
// train::run / instruments::train called on every rank of an mpirun job, trains with P ranks
// and gives the bits of one process (contract T6). MPI starts on the first call below when the
// process was launched by mpirun; otherwise there is one rank and nothing starts.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/error.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad::dist {

// An error every rank raises alike (a refused start-up, a replica mismatch): rank 0 reports it
// once, and every rank exits 2.
struct CollectiveError : Error {
  using Error::Error;
};

bool launched_by_mpirun();  // from the environment mpirun sets; starts nothing
int world_size();
int world_rank();
std::string host_name();
// Ends the whole job with this exit code (MPI_Abort) when there are several ranks; returns
// otherwise. For an error one rank met alone: the others would wait for it in vain.
void abort_job(int code);
// MPI_Finalize, once; a no-op without MPI.
void finalize();

}  // namespace bitgrad::dist

// ---- data parallel and gradient accumulation in a loop of one's own (Python's
// bitgrad.distributed and bitgrad.accumulate; numerics.md §18, §20). The pieces the training step
// uses, for a caller that writes its own step: the layout of a batch over the ranks, the bytes
// every rank exchanges, and the gradient combine by the canonical tree. ----
namespace bitgrad::dist {

// Starts MPI when launched by mpirun (as the CLI does: MPI_Init_thread, FUNNELED; the calls then
// come from this thread) and returns the world size; 1 without mpirun. Idempotent. An MPI that
// another library (mpi4py) started first is used as it is.
int init();
// Whether this build can run data parallel (linked with MPI).
bool have_mpi();
// Whether MPI was started (by init, or by a training run under mpirun).
bool initialized();
// Seconds a rank waits for the others before an error names the wait (default 300,
// BITGRAD_DIST_TIMEOUT).
void set_timeout(double seconds);
// Every rank's bytes, in rank order; rank `root`'s bytes on every rank. `what` names the
// exchange in a timeout error. One rank: no MPI at all.
std::vector<std::string> allgather_bytes(const std::string& mine, const std::string& what);
void broadcast_bytes(std::string& bytes, int root, const std::string& what);

// One step's plan over the ranks (numerics.md §20): the batch's tree leaves (32-sample blocks,
// or whole micro-batches when those are not a power-of-two number of blocks), rank r's shard of
// them, and the forward/backward pieces (at most a micro-batch) of each of its tree nodes.
struct StepPlan {
  using Rows = std::pair<std::int64_t, std::int64_t>;  // [begin, end)
  std::int64_t rows = 0;       // samples in the whole batch (every rank)
  std::int64_t leaf_rows = 0;  // samples per tree leaf (the last leaf may be short)
  std::int64_t leaves = 0;
  int world = 1, rank = 0;
  Rows shard;                                 // this rank's samples (what its loader builds)
  std::vector<std::vector<Rows>> rank_nodes;  // every rank's tree nodes, as leaf ranges
  std::vector<std::vector<Rows>> pieces;      // per node of this rank: its pieces, as batch rows
  // Whether every micro-batch is a complete subtree of the batch's tree (contract T5): then the
  // step has the bits of the whole batch in one piece; otherwise those of the tree over
  // micro-batches, which is what `bitgrad train --accumulate` computes too.
  bool whole_batch = true;
};
// `rows` samples of a configured batch of `batch_size` in `accumulate` micro-batches over
// `world` ranks (the short last batch of an epoch has fewer rows).
// per_block: each piece one leaf (a model that keeps its samples apart without the batch rule on
// axis 0: an imported graph whose onnx::SampleAnalysis says per_block, numerics.md §42).
StepPlan plan_step(std::int64_t rows, std::int64_t batch_size, std::int64_t accumulate, int world, int rank, bool per_block = false);
// Micro-batches of the sizes given, in one process: one tree node whose pieces are the
// micro-batches (whole_batch when every one but the last holds the same power-of-two number of
// 32-sample blocks and the last no more).
StepPlan plan_micro_batches(const std::vector<std::int64_t>& sizes);
// Why a configured batch cannot be split over `world` ranks ("": it can).
std::string plan_problem(std::int64_t batch_size, std::int64_t accumulate, int world);
// The loader's leaf size for a configured batch (LoaderOptions::leaf_rows).
std::int64_t leaf_rows(std::int64_t batch_size, std::int64_t accumulate);

// The gradient combine of a step written by the caller: after each piece's loss sum S, backward
// of S / divisor; the pieces of a node are combined by the pairwise tree, the nodes of every
// rank by the tree above them (tree_allreduce over MPI), and every rank ends with the batch's
// gradient in .grad — the bits of one process (T5, T6). Each use of a parameter (every
// contribution that reaches it in a backward: a tied head, a module called twice) is combined
// on its own and the uses are added last, in arrival order (numerics.md §10 "Uses"). A parameter
// no piece reached on any rank keeps no gradient; one reached by some pieces counts zeros for
// the others.
class GradientCombiner {
 public:
  explicit GradientCombiner(std::vector<Tensor> params);
  ~GradientCombiner();
  GradientCombiner(const GradientCombiner&) = delete;
  GradientCombiner& operator=(const GradientCombiner&) = delete;
  // Backward of loss_sum / divisor (the piece's summed loss over the batch's divisor, as the
  // training step), then takes the parameters' gradients (leaving .grad empty). Throws when a
  // parameter held a gradient before the step's first piece (zero_grad first). rows > 0: the
  // piece's samples, checked against every sum over samples its backward takes
  // (autograd::SampleCountCheck); the step's first mismatch is sample_mismatch().
  void backward(const Tensor& loss_sum, double divisor, std::int64_t rows = 0);
  // This step's (or, after finish, the last step's) first sum over samples that was not the
  // batch rule over its piece's samples; "" when none was.
  const std::string& sample_mismatch() const;
  // Ends this rank's current tree node (its pieces so far).
  void end_node();
  // Pieces added to the current node, and nodes ended, since the step began.
  std::int64_t pieces() const;
  std::int64_t nodes() const;
  // Combines by the plan (its rank_nodes and leaves; this rank must have ended as many nodes as
  // the plan gives it), sets every reached parameter's .grad, and returns the batch's loss sum
  // (0-d, the loss's dtype); the next backward starts a new step.
  Tensor finish(const StepPlan& plan);
  // Forgets a step in progress.
  void reset();
  // An imported graph run per 32-sample block (numerics.md §42): a piece's uses of a parameter
  // are added before the tree, not kept apart (set between steps).
  void set_per_block(bool on);
  bool per_block() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> p_;
};

}  // namespace bitgrad::dist
