#include "train/grad_reducer.hpp"

#include <cstring>

#include "bitgrad/ops.hpp"
#include "dist/tree_allreduce.hpp"
#include "kernels/tensor_ops.hpp"
#include "train/trainer.hpp"

namespace bitgrad::train {

Tensor TreeGradReducer::AddTensors::operator()(const Tensor& a, const Tensor& b) const { return kern::add_same_shape(a, b); }

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
  keep_in_place_ = layout.world == 1 && pieces_.size() == 1 && pieces_[0] == 1;
  trees_.assign(params.size(), Tree{});
  loss_ = {};
  node_grads_.clear();
  node_loss_.clear();
}

void TreeGradReducer::add(const optim::NamedTensors& params, float loss_sum) {
  BITGRAD_CHECK(node_ < pieces_.size(), "gradient reducer", "more pieces than the layout holds");
  loss_.push(loss_sum);
  if (!keep_in_place_)
    for (std::size_t i = 0; i < params.size(); ++i) {
      Tensor p = params[i].second;
      Tensor g = p.grad();
      if (g.defined()) trees_[i].push(g);
      p.zero_grad();
    }
  if (++piece_ < pieces_[node_]) return;
  // the node is complete
  node_loss_.push_back(loss_.total());
  loss_ = {};
  if (!keep_in_place_) {
    std::vector<Tensor> g(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      g[i] = trees_[i].total();
      trees_[i].clear();
    }
    node_grads_.push_back(std::move(g));
  }
  ++node_;
  piece_ = 0;
}

float TreeGradReducer::finish(const optim::NamedTensors& params) {
  BITGRAD_CHECK(node_ == pieces_.size(), "gradient reducer", "finish after ", node_, " of ", pieces_.size(), " nodes");
  const dist::StepLayout& lay = *layout_;
  const std::vector<dist::Range> all = lay.all_nodes();
  auto add_float = [](float a, float b) { return a + b; };
  if (lay.world == 1) {
    stop_ = stop_requested();
    std::vector<float> losses = node_loss_;
    const float loss = dist::evaluate_tree(lay.leaves, all, losses, add_float);
    if (keep_in_place_) return loss;
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::vector<Tensor> vals;
      for (auto& node : node_grads_) vals.push_back(node[i]);
      if (!vals[0].defined()) continue;
      Tensor p = params[i].second;
      p.set_grad(dist::evaluate_tree(lay.leaves, all, vals, AddTensors{}));
    }
    node_grads_.clear();
    return loss;
  }

  // MPI: the node losses, which parameters have gradients and the stop request, from every rank
  dist::Comm& comm = *comm_;
  std::string mine(sizeof(std::int32_t) + node_loss_.size() * sizeof(float) + params.size(), '\0');
  const std::int32_t stop = stop_requested();
  std::memcpy(mine.data(), &stop, sizeof stop);
  if (!node_loss_.empty()) std::memcpy(mine.data() + sizeof stop, node_loss_.data(), node_loss_.size() * sizeof(float));
  for (std::size_t i = 0; i < params.size(); ++i)
    for (const auto& node : node_grads_)
      if (node[i].defined()) mine[sizeof stop + node_loss_.size() * sizeof(float) + i] = 1;
  const std::vector<std::string> got = comm.allgather(mine, "the step's losses");
  std::vector<float> losses;
  std::vector<char> has_grad(params.size(), 0);
  stop_ = 0;
  for (int r = 0; r < lay.world; ++r) {
    const std::string& g = got[static_cast<std::size_t>(r)];
    const std::size_t k = lay.nodes[static_cast<std::size_t>(r)].size();
    BITGRAD_CHECK(g.size() == sizeof stop + k * sizeof(float) + params.size(), "data parallel", "rank ", r,
                  " sent a malformed step record (a different model?)");
    std::int32_t s;
    std::memcpy(&s, g.data(), sizeof s);
    stop_ = std::max<int>(stop_, s);
    for (std::size_t j = 0; j < k; ++j) {
      float v;
      std::memcpy(&v, g.data() + sizeof s + j * sizeof(float), sizeof v);
      losses.push_back(v);
    }
    for (std::size_t i = 0; i < params.size(); ++i) has_grad[i] |= g[sizeof s + k * sizeof(float) + i];
  }
  const float loss = dist::evaluate_tree(lay.leaves, all, losses, add_float);

  // the gradients: each node's as one flat vector (parameters in order; those without a
  // gradient anywhere left out), combined by the tree across ranks
  std::int64_t len = 0;
  DType dt = DType::f32;
  bool first = true;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (has_grad[i]) {
      const Tensor& p = params[i].second;
      BITGRAD_CHECK(first || p.dtype() == dt, "data parallel", "parameters of different dtypes (", dtype_name(dt), ", ",
                    dtype_name(p.dtype()), ") are not supported");
      dt = p.dtype();
      first = false;
      len += p.numel();
    }
  std::vector<Tensor> flat;
  for (auto& node : node_grads_) {
    Tensor f = Tensor::zeros(Shape{len}, dt);
    std::int64_t off = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!has_grad[i]) continue;
      const std::int64_t n = params[i].second.numel();
      if (node[i].defined()) {
        Tensor dst = Tensor::view_of(f, node[i].shape(), contiguous_strides(node[i].shape()), off);
        dst.copy_from(node[i]);
      }
      off += n;
    }
    flat.push_back(f);
  }
  node_grads_.clear();
  Tensor total = dist::tree_allreduce(comm, lay.nodes, lay.leaves, flat, len, dt, "the gradient combine");
  std::int64_t off = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!has_grad[i]) continue;
    Tensor p = params[i].second;
    Tensor g = Tensor::empty(p.shape(), dt);
    g.copy_from(Tensor::view_of(total, p.shape(), contiguous_strides(p.shape()), off));
    p.set_grad(g);
    off += p.numel();
  }
  return loss;
}

}  // namespace bitgrad::train
