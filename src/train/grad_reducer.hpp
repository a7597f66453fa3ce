// The gradient-reducer seam: the step hands every piece's parameter gradients (and loss sum)
// to one GradReducer, which leaves the step's gradients in the parameters' .grad. The step's
// layout (dist/plan.hpp) says which nodes of the batch rule's pairwise tree this rank computes
// and in how many forward/backward pieces; the reducer combines each node's pieces by the
// pairwise tree, then the nodes of every rank by the tree above them (numerics.md §18).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitgrad/optim.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "dist/use_grads.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::train {

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Starts a step laid out as `layout`, of which this process is rank `rank`.
  virtual void begin(const optim::NamedTensors& params, const dist::StepLayout& layout, int rank) = 0;
  // After each piece's backward (this rank's pieces in order): takes its parameters' uses
  // (autograd::backward_uses, in the parameters' order; `checked`: under a SampleCountCheck of
  // the piece's rows) and its loss sum.
  virtual void add(const optim::NamedTensors& params, const std::vector<std::vector<autograd::Use>>& uses, float loss_sum, bool checked) = 0;
  // After the last: the step's gradients are in .grad on every rank; returns the step's loss sum.
  virtual float finish(const optim::NamedTensors& params) = 0;
  // The stop request agreed on by every rank in finish() (0: none): the ranks stop together.
  virtual int stop_signal() const = 0;
  // The step's first use of a parameter that keeps it from the whole batch's bits ("": none).
  virtual const std::string& mismatch() const = 0;
};

// The canonical reducer: in one process (comm null or of size 1) the nodes are combined here;
// over MPI by dist::tree_allreduce. Each use of a parameter is combined on its own and the uses
// are added last (dist::UseGrads, numerics.md §10 "Uses").
class TreeGradReducer final : public GradReducer {
 public:
  explicit TreeGradReducer(dist::Comm* comm = nullptr) : comm_(comm) {}
  void begin(const optim::NamedTensors& params, const dist::StepLayout& layout, int rank) override;
  void add(const optim::NamedTensors& params, const std::vector<std::vector<autograd::Use>>& uses, float loss_sum, bool checked) override;
  float finish(const optim::NamedTensors& params) override;
  int stop_signal() const override { return stop_; }
  const std::string& mismatch() const override { return mismatch_; }

 private:
  dist::Comm* comm_;
  const dist::StepLayout* layout_ = nullptr;
  int rank_ = 0, stop_ = 0;
  std::vector<std::int64_t> pieces_;  // per node of this rank
  std::size_t node_ = 0;
  std::int64_t piece_ = 0;
  std::vector<Tensor> tensors_;
  dist::UseGrads grads_;
  kern::PairwiseStack<float> loss_;
  std::vector<float> node_loss_;
  std::string mismatch_;
};

}  // namespace bitgrad::train
