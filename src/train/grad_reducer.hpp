// The gradient-reducer seam: the step hands every piece's parameter gradients (and loss sum)
// to one GradReducer, which leaves the step's gradients in the parameters' .grad. The step's
// layout (dist/plan.hpp) says which nodes of the batch rule's pairwise tree this rank computes
// and in how many forward/backward pieces; the reducer combines each node's pieces by the
// pairwise tree, then the nodes of every rank by the tree above them (numerics.md §18).
#pragma once

#include <cstdint>
#include <vector>

#include "bitgrad/optim.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::train {

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Starts a step laid out as `layout`, of which this process is rank `rank`.
  virtual void begin(const optim::NamedTensors& params, const dist::StepLayout& layout, int rank) = 0;
  // After each piece's backward (this rank's pieces in order): takes its gradients and loss sum.
  virtual void add(const optim::NamedTensors& params, float loss_sum) = 0;
  // After the last: the step's gradients are in .grad on every rank; returns the step's loss sum.
  virtual float finish(const optim::NamedTensors& params) = 0;
  // The stop request agreed on by every rank in finish() (0: none): the ranks stop together.
  virtual int stop_signal() const = 0;
};

// The canonical reducer: in one process (comm null or of size 1) the nodes are combined here;
// over MPI by dist::tree_allreduce. With one node of one piece the gradients stay where
// backward left them.
class TreeGradReducer final : public GradReducer {
 public:
  explicit TreeGradReducer(dist::Comm* comm = nullptr) : comm_(comm) {}
  void begin(const optim::NamedTensors& params, const dist::StepLayout& layout, int rank) override;
  void add(const optim::NamedTensors& params, float loss_sum) override;
  float finish(const optim::NamedTensors& params) override;
  int stop_signal() const override { return stop_; }

 private:
  struct AddTensors {
    Tensor operator()(const Tensor& a, const Tensor& b) const;
  };
  using Tree = kern::PairwiseStack<Tensor, AddTensors>;
  dist::Comm* comm_;
  const dist::StepLayout* layout_ = nullptr;
  int rank_ = 0, stop_ = 0;
  std::vector<std::int64_t> pieces_;  // per node of this rank
  std::size_t node_ = 0;
  std::int64_t piece_ = 0;
  bool keep_in_place_ = false;
  std::vector<Tree> trees_;  // the current node's pieces, one per parameter
  kern::PairwiseStack<float> loss_;
  std::vector<std::vector<Tensor>> node_grads_;  // per node of this rank, per parameter (undefined: none)
  std::vector<float> node_loss_;
};

}  // namespace bitgrad::train
