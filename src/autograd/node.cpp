// Node pool and reference counting. Releasing a long chain of nodes is iterative (a
// pending list), so a graph of any depth is freed without deep recursion.
#include "autograd/node.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "bitgrad/autograd.hpp"

namespace bitgrad::autograd {
namespace {

// Free nodes are kept per thread, so recording an op takes no lock and writes no shared
// counter: sessions on two threads never wait on each other's nodes. A node freed on another
// thread than its maker's joins the freeing thread's list; a list past kKeep nodes, and the list
// of a thread that ends, go to the reserve, which a thread with none left draws from (the only
// locked path, never taken by a thread that makes and frees its own graphs).
constexpr std::size_t kKeep = 16384, kDraw = 256;

struct Reserve {
  std::mutex mu;
  std::vector<Node*> free;
  std::atomic<std::size_t> count{0};  // free.size(), read without the lock
  std::int64_t retired_live = 0;      // the live counts of the threads that ended
  std::uint64_t locked_calls = 0;     // allocations and frees that took `mu`
  std::vector<struct ThreadNodes*> threads;
};
Reserve& reserve() {
  static Reserve* r = new Reserve();  // never destroyed: nodes may die during teardown
  return *r;
}

thread_local bool t_nodes_gone = false;  // trivially destructible: readable through a thread's exit

struct ThreadNodes {
  std::vector<Node*> free;
  // made minus recycled on this thread (negative where it frees others' nodes): written by its
  // thread alone, read by live_nodes()
  std::atomic<std::int64_t> live{0};
  ThreadNodes() {
    Reserve& r = reserve();
    std::lock_guard<std::mutex> lock(r.mu);
    r.threads.push_back(this);
  }
  ~ThreadNodes() {
    Reserve& r = reserve();
    std::lock_guard<std::mutex> lock(r.mu);
    r.free.insert(r.free.end(), free.begin(), free.end());
    r.count.store(r.free.size(), std::memory_order_relaxed);
    r.retired_live += live.load(std::memory_order_relaxed);
    r.threads.erase(std::find(r.threads.begin(), r.threads.end(), this));
    t_nodes_gone = true;
  }
  void count(std::int64_t d) { live.store(live.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }
};
ThreadNodes& mine() {
  thread_local ThreadNodes t;
  return t;
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
  n->placed.clear();
  n->saved_values.clear();
  n->owned.reset();
  n->op = "";
  n->backward = nullptr;
  n->released = false;
  n->visit = 0;
  n->n_inputs = 0;
  if (!t_nodes_gone) {
    ThreadNodes& t = mine();
    t.count(-1);
    if (t.free.size() < kKeep) {
      t.free.push_back(n);
      return;
    }
  }
  Reserve& r = reserve();
  std::lock_guard<std::mutex> lock(r.mu);
  ++r.locked_calls;
  if (t_nodes_gone) --r.retired_live;
  r.free.push_back(n);
  r.count.store(r.free.size(), std::memory_order_relaxed);
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
  if (t_nodes_gone) {  // a thread's last destructors
    Reserve& r = reserve();
    std::lock_guard<std::mutex> lock(r.mu);
    ++r.locked_calls;
    ++r.retired_live;
    if (r.free.empty()) return new Node();
    Node* n = r.free.back();
    r.free.pop_back();
    r.count.store(r.free.size(), std::memory_order_relaxed);
    return n;
  }
  ThreadNodes& t = mine();
  t.count(1);
  if (t.free.empty() && reserve().count.load(std::memory_order_relaxed) > 0) {
    Reserve& r = reserve();
    std::lock_guard<std::mutex> lock(r.mu);
    ++r.locked_calls;
    const std::size_t k = std::min(kDraw, r.free.size());
    t.free.insert(t.free.end(), r.free.end() - static_cast<std::ptrdiff_t>(k), r.free.end());
    r.free.resize(r.free.size() - k);
    r.count.store(r.free.size(), std::memory_order_relaxed);
  }
  if (t.free.empty()) return new Node();
  Node* n = t.free.back();
  t.free.pop_back();
  return n;
}

void reset_node(Node* n) {
  // drop what the node holds now (used by backward without retain_graph); the node object
  // itself lives on until its last reference goes
  for (auto& e : n->in) e = Edge{};
  n->more_in.clear();
  for (auto& s : n->saved) s = Tensor();
  n->grad = Tensor();
  n->placed.clear();
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

std::uint64_t node_pool_locked_calls() {
  Reserve& r = reserve();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.locked_calls;
}

std::size_t live_nodes() {
  Reserve& r = reserve();
  std::lock_guard<std::mutex> lock(r.mu);
  std::int64_t n = r.retired_live;
  for (const ThreadNodes* t : r.threads) n += t->live.load(std::memory_order_relaxed);
  return static_cast<std::size_t>(n);
}

const char* producer(const Tensor& t) {
  AutogradMeta* m = meta_if(t);
  return (m && m->grad_fn) ? m->grad_fn->op : "";
}

}  // namespace bitgrad::autograd
