// Graph nodes (internal). A node records one differentiable op: its backward function (a
// plain function pointer, no std::function), the edges to its inputs, the tensors it saved
// and a typed payload of the op's other saved values. Nodes come from a pool and are
// reference counted: a tensor holds its producer node, a node holds its input nodes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
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

// The saved values of an op other than tensors, as the struct its op family declares beside
// its backward (ConvGeom, SliceSaved, ...). Stored inline: nodes are pooled, and a
// std::variant would make autograd name every op's struct. So a struct must be trivially
// copyable (nothing to destroy on reset) and fit kBytes. A tag per type is kept with it and
// checked on every read: a wrong type or a missing payload fails instead of reading stale bytes.
class Payload {
 public:
  static constexpr std::size_t kBytes = 96;

  template <class T>
  void set(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "a payload holds plain values (tensors go in Node::save)");
    static_assert(sizeof(T) <= kBytes && alignof(T) <= alignof(std::max_align_t), "payload too large: raise kBytes");
    ::new (static_cast<void*>(bytes_)) T(v);
    tag_ = &tag_of<T>;
  }
  template <class T>
  const T* get() const {
    return tag_ == &tag_of<T> ? std::launder(reinterpret_cast<const T*>(bytes_)) : nullptr;
  }
  void clear() { tag_ = nullptr; }

 private:
  template <class T>
  static inline char tag_of = 0;  // its address names T (not const: never merged with another)
  alignas(std::max_align_t) unsigned char bytes_[kBytes];
  const char* tag_ = nullptr;
};

// A slice's gradient waiting to be placed: g goes to [start, start + len) of `axis` of a tensor
// of shape `full` (the engine sets it: the input's shape as the consumer recorded it).
struct PlacedGrad {
  Tensor g;
  int axis = 0;
  std::int64_t start = 0;
  Shape full;
};

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

  Payload saved_values;  // the payload: set_payload / payload
  // State that is neither a tensor nor plain values (a checkpoint's recompute function);
  // dropped with the saved tensors
  std::shared_ptr<void> owned;

  Shape out_shape;
  DType out_dtype = DType::f32;
  CallSite site;      // where the op was called
  std::string label;  // the label scope when it was recorded
  Tensor grad;  // gradient of the output, accumulated during backward
  // slices' gradients on disjoint ranges of one axis, arrived before any other contribution and
  // not yet added (the engine places them all in one pass when the node runs or more arrives)
  std::vector<PlacedGrad> placed;

  Edge& input(int i) { return i < kInlineInputs ? in[i] : more_in[static_cast<std::size_t>(i - kInlineInputs)]; }
  const Shape& input_shape(int i) const {
    return i < kInlineInputs ? in_shape[i] : more_in_shape[static_cast<std::size_t>(i - kInlineInputs)];
  }
  // Saves a detached alias of t (no history: no reference cycle through the output).
  void save(int slot, const Tensor& t);
  // The saved tensor, checked against in-place modification since it was saved.
  const Tensor& saved_tensor(int slot) const;

  template <class T>
  void set_payload(const T& v) {
    saved_values.set(v);
  }
  // The payload recorded by the forward; fails (naming the op) if it is of another type.
  template <class T>
  const T& payload() const {
    const T* p = saved_values.get<T>();
    if (!p) payload_mismatch();
    return *p;
  }
  [[noreturn]] void payload_mismatch() const;
};

// From a backward function (a slice's, step 1): g, the gradient of the slice [start, start +
// len) of `axis` of input `input`, to be placed in zeros of the input's shape. The engine adds it
// as it would add place_in_zeros(g) in its turn, but slices of disjoint ranges that reach a node
// before anything else are placed together in one pass (no zeros written and added for each).
// False outside a backward walk (the caller then places it itself).
bool add_placed_gradient(int input, const Tensor& g, int axis, std::int64_t start);
// From a backward function: hands the engine one part of the gradient of input `input`; the
// engine adds the parts in the order handed over, as if each came from its own node (a
// checkpoint forwards its segment's contributions one by one, so sums keep their order).
void add_gradient_part(int input, const Tensor& g);
// Like grad(), but every contribution that reaches an input, unsummed, in arrival order.
std::vector<std::vector<Tensor>> grad_parts(const Tensor& root, const Tensor& seed, const std::vector<Tensor>& inputs,
                                            std::string* unlisted, bool retain_graph = false);

Node* allocate_node();  // refs == 0; wrap in NodePtr
// Times a thread took the node pool's shared lock to allocate or free a node (its own list was
// empty with nodes in the reserve, or full, or it was ending): for the test that threads
// recording their own graphs never do.
std::uint64_t node_pool_locked_calls();
void reset_node(Node* n);  // drops edges, saved tensors and the payload (after a backward without retain_graph)

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
