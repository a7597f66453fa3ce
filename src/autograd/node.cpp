// Node pool and reference counting. Releasing a long chain of nodes is iterative (a
// pending list), so a graph of any depth is freed without deep recursion.
#include "autograd/node.hpp"

#include <mutex>

#include "bitgrad/autograd.hpp"

namespace bitgrad::autograd {
namespace {

struct NodePool {
  std::mutex mu;
  std::vector<Node*> free;
  std::atomic<std::size_t> live{0};
};
NodePool& pool() {
  static NodePool* p = new NodePool();  // never destroyed: nodes may die during teardown
  return *p;
}

thread_local std::vector<Node*> t_pending;
thread_local bool t_draining = false;

void recycle(Node* n) {
  // everything that can own other nodes is cleared; destructors may queue more nodes
  for (auto& e : n->in) e = Edge{};
  n->more_in.clear();
  n->more_in_shape.clear();
  for (auto& s : n->saved) s = Tensor();
  n->grad = Tensor();
  n->saved_values.clear();
  n->owned.reset();
  n->op = "";
  n->backward = nullptr;
  n->released = false;
  n->visit = 0;
  n->n_inputs = 0;
  NodePool& p = pool();
  p.live.fetch_sub(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(p.mu);
  p.free.push_back(n);
}

void release(Node* n) {
  t_pending.push_back(n);
  if (t_draining) return;
  t_draining = true;
  while (!t_pending.empty()) {
    Node* x = t_pending.back();
    t_pending.pop_back();
    recycle(x);
  }
  t_draining = false;
}

}  // namespace

NodePtr::NodePtr(Node* n) : n_(n) {
  if (n_) n_->refs.fetch_add(1, std::memory_order_relaxed);
}
NodePtr::NodePtr(const NodePtr& o) : n_(o.n_) {
  if (n_) n_->refs.fetch_add(1, std::memory_order_relaxed);
}
NodePtr::~NodePtr() {
  if (n_ && n_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) release(n_);
}

Node* allocate_node() {
  NodePool& p = pool();
  Node* n = nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.free.empty()) {
      n = p.free.back();
      p.free.pop_back();
    }
  }
  if (!n) n = new Node();
  p.live.fetch_add(1, std::memory_order_relaxed);
  return n;
}

void reset_node(Node* n) {
  // drop what the node holds now (used by backward without retain_graph); the node object
  // itself lives on until its last reference goes
  for (auto& e : n->in) e = Edge{};
  n->more_in.clear();
  for (auto& s : n->saved) s = Tensor();
  n->grad = Tensor();
  n->saved_values.clear();
  n->owned.reset();
  n->released = true;
}

void Node::save(int slot, const Tensor& t) {
  saved[slot] = Tensor::view_of(t, t.shape(), t.strides(), t.offset());
  saved_version[slot] = t.storage()->version();
}

const Tensor& Node::saved_tensor(int slot) const {
  const Tensor& t = saved[slot];
  if (t.defined() && t.storage()->version() != saved_version[slot])
    detail::fail_as<StateError>(op, "a tensor saved for the backward pass was modified in place after it was saved (version ",
                 saved_version[slot], ", now ", t.storage()->version(), "); clone it before modifying it");
  return t;
}

void Node::payload_mismatch() const {
  detail::fail(op, "internal: the backward reads a saved payload of another type than the forward recorded (or none)");
}

AutogradMeta& meta(const Tensor& t) {
  TensorImpl& impl = t.impl();
  if (!impl.autograd) impl.autograd = std::make_shared<AutogradMeta>();
  return *impl.autograd;
}

AutogradMeta* meta_if(const Tensor& t) { return t.defined() ? t.impl().autograd.get() : nullptr; }

std::size_t live_nodes() { return pool().live.load(); }

const char* producer(const Tensor& t) {
  AutogradMeta* m = meta_if(t);
  return (m && m->grad_fn) ? m->grad_fn->op : "";
}

}  // namespace bitgrad::autograd
