// Graph nodes (internal). A node records one differentiable op: its backward function (a
// plain function pointer, no std::function), the edges to its inputs, the tensors it saved
// and a small payload of integers / doubles / shapes. Nodes come from a pool and are
// reference counted: a tensor holds its producer node, a node holds its input nodes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bitgrad/autograd.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad::autograd {

struct Node;

// Intrusive reference to a node.
class NodePtr {
 public:
  NodePtr() = default;
  explicit NodePtr(Node* n);
  NodePtr(const NodePtr& o);
  NodePtr(NodePtr&& o) noexcept : n_(o.n_) { o.n_ = nullptr; }
  NodePtr& operator=(NodePtr o) noexcept {
    std::swap(n_, o.n_);
    return *this;
  }
  ~NodePtr();
  Node* get() const { return n_; }
  Node* operator->() const { return n_; }
  Node& operator*() const { return *n_; }
  explicit operator bool() const { return n_ != nullptr; }

 private:
  Node* n_ = nullptr;
};

// An input of a node that needs a gradient: produced by a node, or a leaf.
struct Edge {
  NodePtr node;
  std::shared_ptr<TensorImpl> leaf;
  bool needs_grad() const { return node || leaf; }
};

// grad_in[i] receives the gradient for input i (leave undefined for inputs that need none)
using BackwardFn = void (*)(Node& node, const Tensor& grad_out, Tensor* grad_in);

inline constexpr int kInlineInputs = 4;
inline constexpr int kMaxSaved = 4;

struct Node {
  const char* op = "";
  BackwardFn backward = nullptr;
  std::uint64_t seq = 0;
  std::atomic<std::uint32_t> refs{0};
  bool released = false;  // freed by a backward without retain_graph
  std::uint64_t visit = 0;

  int n_inputs = 0;
  Edge in[kInlineInputs];
  Shape in_shape[kInlineInputs];
  std::vector<Edge> more_in;        // inputs past kInlineInputs (concat)
  std::vector<Shape> more_in_shape;

  Tensor saved[kMaxSaved];
  std::uint64_t saved_version[kMaxSaved] = {};

  std::int64_t iv[8] = {};
  double dv[4] = {};
  Shape sv[2];

  Shape out_shape;
  DType out_dtype = DType::f32;
  CallSite site;      // where the op was called
  std::string label;  // the label scope when it was recorded
  Tensor grad;  // gradient of the output, accumulated during backward

  Edge& input(int i) { return i < kInlineInputs ? in[i] : more_in[static_cast<std::size_t>(i - kInlineInputs)]; }
  const Shape& input_shape(int i) const {
    return i < kInlineInputs ? in_shape[i] : more_in_shape[static_cast<std::size_t>(i - kInlineInputs)];
  }
  // Saves a detached alias of t (no history: no reference cycle through the output).
  void save(int slot, const Tensor& t);
  // The saved tensor, checked against in-place modification since it was saved.
  const Tensor& saved_tensor(int slot) const;
};

Node* allocate_node();  // refs == 0; wrap in NodePtr
void reset_node(Node* n);  // drops edges and saved tensors (iteratively), returns it to the pool

struct AutogradMeta {
  NodePtr grad_fn;
  Tensor grad;         // accumulated gradient of a leaf
  std::string label;
  Tensor bw_acc;       // this backward's contributions to a leaf
  std::uint64_t bw_epoch = 0;
};

AutogradMeta& meta(const Tensor& t);           // creates it if missing
AutogradMeta* meta_if(const Tensor& t);        // nullptr if none

}  // namespace bitgrad::autograd
