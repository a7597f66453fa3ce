#include "dist/use_grads.hpp"

#include "dist/tree_allreduce.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::dist {

Tensor UseGrads::AddTensors::operator()(const Tensor& a, const Tensor& b) const { return kern::add_same_shape(a, b); }

void UseGrads::clear() {
  trees_.assign(trees_.size(), {});
  count_.assign(count_.size(), 0);
  first_.assign(first_.size(), -1);
  node_grads_.clear();
  pieces_ = 0;
}

void UseGrads::begin(std::size_t params, bool apart) {
  apart_ = apart;
  trees_.assign(params, {});
  count_.assign(params, 0);
  first_.assign(params, -1);
  node_grads_.clear();
  pieces_ = 0;
}

std::string UseGrads::add_piece(const std::vector<std::vector<autograd::Use>>& uses, const std::vector<Tensor>& params, bool checked) {
  BITGRAD_CHECK(uses.size() == params.size() && params.size() == trees_.size(), "gradient combine", "a piece's uses of ", uses.size(),
                " parameters for a step of ", trees_.size());
  std::string problem;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const std::vector<autograd::Use>& u = uses[i];
    std::vector<Tensor> vals;
    if (apart_) {
      for (const autograd::Use& x : u) {
        vals.push_back(x.grad);
        if (checked && !x.proven && problem.empty())
          problem = "parameter " + std::to_string(i) + " " + params[i].shape().str() + " received a gradient from '" + x.op + "'" +
                    (x.label.empty() ? std::string() : " in " + x.label) +
                    " that is not one sum over the piece's samples by the batch rule (an op after the sum, or two uses added "
                    "before they reach it)";
      }
    } else if (!u.empty()) {
      vals.push_back(autograd::sum_uses(u));
    }
    const std::size_t m = vals.size();
    std::vector<Tree>& t = trees_[i];
    if (m > 0) {
      if (first_[i] < 0) first_[i] = static_cast<std::int64_t>(m);
      else if (first_[i] != static_cast<std::int64_t>(m) && problem.empty())
        problem = "parameter " + std::to_string(i) + " " + params[i].shape().str() + " was used " + std::to_string(first_[i]) +
                  " time(s) in one piece and " + std::to_string(m) + " in another, so its uses cannot be combined one by one";
    }
    // a use first met in this piece: the node's pieces before it gave zeros; a use this piece
    // lacks gives zeros
    while (t.size() < m) {
      t.emplace_back();
      for (std::int64_t k = 0; k < pieces_; ++k) t.back().push(Tensor::zeros(params[i].shape(), params[i].dtype()));
    }
    for (std::size_t k = 0; k < t.size(); ++k) t[k].push(k < m ? vals[k] : Tensor::zeros(params[i].shape(), params[i].dtype()));
    count_[i] = std::max<std::uint32_t>(count_[i], static_cast<std::uint32_t>(m));
  }
  ++pieces_;
  return problem;
}

void UseGrads::end_node() {
  BITGRAD_CHECK(pieces_ > 0, "gradient combine", "a tree node without a piece");
  std::vector<std::vector<Tensor>> g(trees_.size());
  for (std::size_t i = 0; i < trees_.size(); ++i) {
    for (Tree& t : trees_[i]) g[i].push_back(t.total());
    trees_[i].clear();
  }
  node_grads_.push_back(std::move(g));
  pieces_ = 0;
}

void UseGrads::finish(const std::vector<std::uint32_t>& counts, Comm* comm, const std::vector<std::vector<Range>>& nodes, std::int64_t leaves,
                      const std::vector<Tensor>& params, const std::string& what) {
  BITGRAD_CHECK(pieces_ == 0, "gradient combine", pieces_, " piece(s) after the last node's end");
  BITGRAD_CHECK(counts.size() == params.size(), "gradient combine", "use counts of ", counts.size(), " parameters for ", params.size());
  std::vector<Range> all;
  for (const auto& n : nodes) all.insert(all.end(), n.begin(), n.end());
  // taken out of node_grads_: a gradient held nowhere else becomes .grad without a copy
  auto node_value = [&](std::size_t j, std::size_t i, std::size_t k) {
    std::vector<Tensor>& u = node_grads_[j][i];
    return k < u.size() && u[k].defined() ? std::move(u[k]) : Tensor::zeros(params[i].shape(), params[i].dtype());
  };
  // the uses' totals of parameter i added in arrival order, into storage of its own
  auto set = [&](std::size_t i, std::vector<Tensor>& totals) {
    std::vector<autograd::Use> us(totals.size());
    for (std::size_t k = 0; k < totals.size(); ++k) us[k].grad = std::move(totals[k]);
    Tensor p = params[i];
    p.set_grad(autograd::sum_uses(std::move(us)));
  };
  if (!comm) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      std::vector<Tensor> totals;
      for (std::uint32_t k = 0; k < counts[i]; ++k) {
        std::vector<Tensor> vals;
        for (std::size_t j = 0; j < node_grads_.size(); ++j) vals.push_back(node_value(j, i, k));
        totals.push_back(evaluate_tree(leaves, all, vals, AddTensors{}));
      }
      if (!totals.empty()) set(i, totals);
    }
    clear();
    return;
  }
  // every node's uses as one flat vector (parameters in order, each use in order; parameters
  // without a use anywhere left out), combined by the tree across ranks
  std::int64_t len = 0;
  DType dt = DType::f32;
  bool first = true;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (counts[i]) {
      BITGRAD_CHECK(first || params[i].dtype() == dt, "data parallel", "parameters of different dtypes (", dtype_name(dt), ", ",
                    dtype_name(params[i].dtype()), ") are not supported");
      dt = params[i].dtype();
      first = false;
      len += params[i].numel() * static_cast<std::int64_t>(counts[i]);
    }
  std::vector<Tensor> flat;
  for (std::size_t j = 0; j < node_grads_.size(); ++j) {
    Tensor f = Tensor::zeros(Shape{len}, dt);
    std::int64_t off = 0;
    for (std::size_t i = 0; i < params.size(); ++i)
      for (std::uint32_t k = 0; k < counts[i]; ++k) {
        const std::vector<Tensor>& u = node_grads_[j][i];
        if (k < u.size() && u[k].defined()) Tensor::view_of(f, u[k].shape(), contiguous_strides(u[k].shape()), off).copy_from(u[k]);
        off += params[i].numel();
      }
    flat.push_back(f);
  }
  node_grads_.clear();
  const Tensor total = tree_allreduce(*comm, nodes, leaves, flat, len, dt, what);
  std::int64_t off = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<Tensor> totals;
    for (std::uint32_t k = 0; k < counts[i]; ++k) {
      totals.push_back(Tensor::view_of(total, params[i].shape(), contiguous_strides(params[i].shape()), off));
      off += params[i].numel();
    }
    if (!totals.empty()) set(i, totals);
  }
  clear();
}

}  // namespace bitgrad::dist
