#include "train/grad_reducer.hpp"

#include <cstring>

#include "bitgrad/ops.hpp"
#include "train/trainer.hpp"

namespace bitgrad::train {

void TreeGradReducer::begin(const optim::NamedTensors& params, const dist::StepLayout& layout, int rank) {
  layout_ = &layout;
  rank_ = rank;
  node_ = 0;
  piece_ = 0;
  pieces_.clear();
  for (const dist::Range& n : layout.nodes[static_cast<std::size_t>(rank)]) {
    const std::int64_t rows = layout.row_of(n.end) - layout.row_of(n.begin);
    pieces_.push_back((rows + layout.piece_rows - 1) / layout.piece_rows);
  }
  tensors_.clear();
  for (const auto& [name, t] : params) tensors_.push_back(t);
  // a per-block graph's pieces are its leaves: their uses are added first (numerics §42)
  grads_.begin(params.size(), !layout.per_block);
  loss_ = {};
  node_loss_.clear();
  mismatch_.clear();
}

void TreeGradReducer::add(const optim::NamedTensors& params, const std::vector<std::vector<autograd::Use>>& uses, float loss_sum, bool checked) {
  BITGRAD_CHECK(node_ < pieces_.size(), "gradient reducer", "more pieces than the layout holds");
  BITGRAD_CHECK(params.size() == tensors_.size(), "gradient reducer", "a piece of ", params.size(), " parameters in a step of ", tensors_.size());
  loss_.push(loss_sum);
  const std::string problem = grads_.add_piece(uses, tensors_, checked);
  if (mismatch_.empty()) mismatch_ = problem;
  if (++piece_ < pieces_[node_]) return;
  // the node is complete
  node_loss_.push_back(loss_.total());
  loss_ = {};
  grads_.end_node();
  ++node_;
  piece_ = 0;
}

float TreeGradReducer::finish(const optim::NamedTensors& params) {
  BITGRAD_CHECK(node_ == pieces_.size(), "gradient reducer", "finish after ", node_, " of ", pieces_.size(), " nodes");
  const dist::StepLayout& lay = *layout_;
  const std::vector<dist::Range> all = lay.all_nodes();
  auto add_float = [](float a, float b) { return a + b; };
  std::vector<std::uint32_t> counts(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) counts[i] = grads_.uses_of(i);
  if (lay.world == 1) {
    stop_ = stop_requested();
    std::vector<float> losses = node_loss_;
    const float loss = dist::evaluate_tree(lay.leaves, all, losses, add_float);
    grads_.finish(counts, nullptr, lay.nodes, lay.leaves, tensors_, "the gradient combine");
    return loss;
  }

  // MPI: the node losses, each parameter's uses and the stop request, from every rank
  dist::Comm& comm = *comm_;
  const std::size_t head = sizeof(std::int32_t) + node_loss_.size() * sizeof(float);
  std::string mine(head + params.size() * sizeof(std::uint32_t), '\0');
  const std::int32_t stop = stop_requested();
  std::memcpy(mine.data(), &stop, sizeof stop);
  if (!node_loss_.empty()) std::memcpy(mine.data() + sizeof stop, node_loss_.data(), node_loss_.size() * sizeof(float));
  for (std::size_t i = 0; i < params.size(); ++i) std::memcpy(mine.data() + head + i * sizeof(std::uint32_t), &counts[i], sizeof(std::uint32_t));
  const std::vector<std::string> got = comm.allgather(mine, "the step's losses");
  std::vector<float> losses;
  std::vector<std::uint32_t> all_counts(params.size(), 0);
  stop_ = 0;
  for (int r = 0; r < lay.world; ++r) {
    const std::string& g = got[static_cast<std::size_t>(r)];
    const std::size_t k = lay.nodes[static_cast<std::size_t>(r)].size();
    const std::size_t h = sizeof stop + k * sizeof(float);
    BITGRAD_CHECK(g.size() == h + params.size() * sizeof(std::uint32_t), "data parallel", "rank ", r,
                  " sent a malformed step record (a different model?)");
    std::int32_t s;
    std::memcpy(&s, g.data(), sizeof s);
    stop_ = std::max<int>(stop_, s);
    for (std::size_t j = 0; j < k; ++j) {
      float v;
      std::memcpy(&v, g.data() + sizeof s + j * sizeof(float), sizeof v);
      losses.push_back(v);
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::uint32_t c;
      std::memcpy(&c, g.data() + h + i * sizeof c, sizeof c);
      if (all_counts[i] && c && c != all_counts[i] && mismatch_.empty())
        mismatch_ = "parameter '" + params[i].first + "' was used " + std::to_string(all_counts[i]) + " time(s) on one rank and " +
                    std::to_string(c) + " on another";
      all_counts[i] = std::max(all_counts[i], c);
    }
  }
  const float loss = dist::evaluate_tree(lay.leaves, all, losses, add_float);
  grads_.finish(all_counts, &comm, lay.nodes, lay.leaves, tensors_, "the gradient combine");
  return loss;
}

}  // namespace bitgrad::train
