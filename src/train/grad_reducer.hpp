// The gradient-reducer seam: the step hands every micro-batch's parameter gradients (and loss
// sum) to one GradReducer, which leaves the step's gradients in the parameters' .grad. The
// local reducer combines micro-batches by the batch rule's pairwise tree (numerics.md, "batch
// rule"); a data-parallel reducer continues the same tree across processes.
#pragma once

#include <cstdint>
#include <vector>

#include "bitgrad/optim.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::train {

class GradReducer {
 public:
  virtual ~GradReducer() = default;
  // Starts a step of `micro_batches` micro-batches over these parameters.
  virtual void begin(const optim::NamedTensors& params, std::int64_t micro_batches) = 0;
  // After micro-batch m's backward (m = 0, 1, ... in order): takes its gradients and loss sum.
  virtual void add(const optim::NamedTensors& params, float loss_sum) = 0;
  // After the last: the step's gradients are in .grad; returns the step's loss sum.
  virtual float finish(const optim::NamedTensors& params) = 0;
};

// One process: micro-batches combined by the pairwise tree (left + right). With one
// micro-batch the gradients stay where backward left them.
class LocalGradReducer final : public GradReducer {
 public:
  void begin(const optim::NamedTensors& params, std::int64_t micro_batches) override;
  void add(const optim::NamedTensors& params, float loss_sum) override;
  float finish(const optim::NamedTensors& params) override;

 private:
  struct AddTensors {
    Tensor operator()(const Tensor& a, const Tensor& b) const;
  };
  using Tree = kern::PairwiseStack<Tensor, AddTensors>;
  std::int64_t micro_batches_ = 1;
  std::vector<Tree> trees_;  // one per parameter
  kern::PairwiseStack<float> loss_;
};

}  // namespace bitgrad::train
