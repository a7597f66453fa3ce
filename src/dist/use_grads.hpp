// A step's parameter gradients by use (numerics.md §10 "Uses", §18, §20): every contribution that
// reaches a parameter in a piece's backward is one use of it; the same use of every piece of a
// tree node is combined by the pairwise tree, the nodes of every rank by the tree above them,
// and only then are a parameter's uses added, in arrival order. Each use's sum over the batch is
// then the whole batch's, so a parameter used twice (a tied head, a module called twice) gets
// the bits of one piece whatever the split. Shared by the training step's reducer
// (train/grad_reducer.cpp) and the combine of a step a caller writes (dist::GradientCombiner).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitgrad/autograd.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::dist {

class UseGrads {
 public:
  // A new step for `params` parameters. apart: each use on its own (above); otherwise a piece's
  // uses are added first and their sum is what the tree combines (a per-block graph, §42, whose
  // pieces are its leaves).
  void begin(std::size_t params, bool apart);
  // One piece's uses per parameter, from autograd::backward_uses. Returns the first thing that
  // keeps the uses from giving the whole batch's bits ("" when none): a use that is not one sum
  // over the piece's samples by the batch rule (`checked`: a SampleCountCheck ran), or a
  // parameter with other numbers of uses in two pieces.
  std::string add_piece(const std::vector<std::vector<autograd::Use>>& uses, const std::vector<Tensor>& params, bool checked);
  // Ends the current tree node (its pieces so far).
  void end_node();
  std::size_t nodes() const { return node_grads_.size(); }
  std::int64_t pieces() const { return pieces_; }
  // The most uses parameter i had in one piece of this rank (0: no piece reached it).
  std::uint32_t uses_of(std::size_t i) const { return i < count_.size() ? count_[i] : 0; }
  // Sets .grad of every parameter with counts[i] > 0 (the most uses over every rank): the tree
  // over `leaves` of the nodes (every rank's, in order), per use, then the uses added. With
  // comm null, this process holds every node; otherwise tree_allreduce over the ranks. Every
  // rank passes the same counts.
  void finish(const std::vector<std::uint32_t>& counts, Comm* comm, const std::vector<std::vector<Range>>& nodes, std::int64_t leaves,
              const std::vector<Tensor>& params, const std::string& what);
  void clear();

 private:
  struct AddTensors {
    Tensor operator()(const Tensor& a, const Tensor& b) const;
  };
  using Tree = kern::PairwiseStack<Tensor, AddTensors>;
  bool apart_ = true;
  std::int64_t pieces_ = 0;                                   // in the current node
  std::vector<std::vector<Tree>> trees_;                      // per parameter, per use: the node's pieces
  std::vector<std::uint32_t> count_;                          // per parameter: the most uses in a piece
  std::vector<std::int64_t> first_;                           // per parameter: uses in its first piece that reached it (-1: none yet)
  std::vector<std::vector<std::vector<Tensor>>> node_grads_;  // per node, per parameter, per use (undefined: zeros)
};

}  // namespace bitgrad::dist
