#include "ops/op_util.hpp"

#include <algorithm>

#include "platform/thread_state.hpp"

namespace bitgrad::ops {
namespace {
// Creation numbers, a Lamport clock per thread: a node's number is above its inputs' and above
// every node its thread made before, so the backward walk's descending order is a topological
// order even for a graph built on several threads, and a graph built on one thread is walked
// in creation order. No shared counter: threads recording ops never touch the same line (the
// clock is ThreadState::op_clock).

Node* make(const char* op, autograd::BackwardFn fn, const Tensor* const* in, int n, Tensor& out, CallSite site) {
  Node* node = autograd::allocate_node();
  node->op = op;
  node->site = site;
  node->label = current_label();
  node->backward = fn;
  node->n_inputs = n;
  std::uint64_t seq = thread_state().op_clock;
  if (n > autograd::kInlineInputs) {
    node->more_in.resize(static_cast<std::size_t>(n - autograd::kInlineInputs));
    node->more_in_shape.resize(static_cast<std::size_t>(n - autograd::kInlineInputs));
  }
  for (int i = 0; i < n; ++i) {
    const Tensor& t = *in[i];
    autograd::Edge& e = node->input(i);
    if (i < autograd::kInlineInputs) node->in_shape[i] = t.shape();
    else node->more_in_shape[static_cast<std::size_t>(i - autograd::kInlineInputs)] = t.shape();
    if (!t.requires_grad()) continue;
    autograd::AutogradMeta* m = autograd::meta_if(t);
    if (m && m->grad_fn) {
      e.node = m->grad_fn;
      seq = std::max(seq, m->grad_fn->seq);
    } else {
      e.leaf = t.impl_ptr();
    }
  }
  node->seq = thread_state().op_clock = seq + 1;
  node->out_shape = out.shape();
  node->out_dtype = out.dtype();
  out.impl().requires_grad = true;
  autograd::meta(out).grad_fn = autograd::NodePtr(node);
  return node;
}
}  // namespace

Node* record(const char* op, autograd::BackwardFn fn, std::initializer_list<const Tensor*> inputs, Tensor& out, CallSite site) {
  autograd::emit_forward(op, out, site);
  if (!grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor* t : inputs) any = any || (t->defined() && t->requires_grad());
  if (!any) return nullptr;
  return make(op, fn, inputs.begin(), static_cast<int>(inputs.size()), out, site);
}

Node* record(const char* op, autograd::BackwardFn fn, const std::vector<Tensor>& inputs, Tensor& out, CallSite site) {
  autograd::emit_forward(op, out, site);
  if (!grad_enabled()) return nullptr;
  bool any = false;
  for (const Tensor& t : inputs) any = any || t.requires_grad();
  if (!any) return nullptr;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  return make(op, fn, ptrs.data(), static_cast<int>(ptrs.size()), out, site);
}

void check_float(const char* op, const Tensor& t) {
  BITGRAD_CHECK(t.defined(), op, "an input tensor is undefined");
  BITGRAD_CHECK(is_floating(t.dtype()), op, "expected a floating dtype (f32 or f64), got ", dtype_name(t.dtype()),
                " for a tensor of shape ", t.shape().str());
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  check_float(op, a);
  check_float(op, b);
  BITGRAD_CHECK(a.dtype() == b.dtype(), op, "dtypes differ: ", dtype_name(a.dtype()), " ", a.shape().str(), " and ",
                dtype_name(b.dtype()), " ", b.shape().str());
}

std::vector<int> normalize_axes(const Shape& s, std::vector<int> axes, const char* op) {
  for (int& a : axes) a = s.normalize_axis(a, op);
  std::sort(axes.begin(), axes.end());
  BITGRAD_CHECK(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), op, "an axis is repeated");
  return axes;
}

Shape keepdim_shape(const Shape& s, const std::vector<int>& axes) {
  Shape k = s;
  for (int a : axes) k[a] = 1;
  return k;
}

Tensor scalar_like(const Tensor& ref, double v) { return Tensor::scalar(v, ref.dtype()); }

Tensor fresh_copy(const Tensor& x) { return x.is_contiguous() ? x.contiguous_copy() : kern::contiguous(x); }

namespace {
// Row rule over the trailing `L` elements of each of R rows of a contiguous tensor.
Tensor sum_rows_raw(const Tensor& xc, std::int64_t R, std::int64_t L, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, xc.dtype());
  BITGRAD_DISPATCH_FLOAT(xc.dtype(), "sum", T, [&] { kern::active<T>().sum_rows(xc.data<T>(), R, L, kern::out_ptr<T>(out)); });
  return out;
}
Tensor sum_cols_raw(const Tensor& xc, std::int64_t R, std::int64_t C, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, xc.dtype());
  BITGRAD_DISPATCH_FLOAT(xc.dtype(), "sum", T, [&] { kern::active<T>().sum_cols(xc.data<T>(), R, C, kern::out_ptr<T>(out)); });
  return out;
}
// x with the axes `moved` placed last (stable), as a contiguous copy
Tensor move_last(const Tensor& x, const std::vector<int>& moved) {
  std::vector<int> perm;
  for (int d = 0; d < x.ndim(); ++d)
    if (std::find(moved.begin(), moved.end(), d) == moved.end()) perm.push_back(d);
  for (int d : moved) perm.push_back(d);
  Shape sh, st;
  for (int d : perm) {
    sh.push_back(x.shape()[d]);
    st.push_back(x.strides()[d]);
  }
  return kern::contiguous(Tensor::view_of(x, sh, st, x.offset()));
}
}  // namespace

Tensor reduce_sum(const Tensor& x, std::vector<int> axes) {
  check_float("sum", x);
  axes = normalize_axes(x.shape(), axes, "sum");
  const Shape& s = x.shape();
  Shape kept;
  for (int d = 0; d < s.ndim(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(s[d]);
  if (axes.empty()) return kern::contiguous(x).contiguous_copy();
  if (s.ndim() == 1) {
    autograd::SampleCountCheck::note("a sum over a 1-d tensor", s[0], s, false);
    return sum_rows_raw(kern::contiguous(x), 1, s[0], kept);
  }
  const bool has0 = axes.front() == 0;
  std::vector<int> rest(axes.begin() + (has0 ? 1 : 0), axes.end());
  Tensor cur = x;
  Shape cur_shape = s;
  if (!rest.empty()) {
    // stage 1: the row rule over the reduced axes other than 0
    std::int64_t L = 1;
    for (int d : rest) L *= s[d];
    Shape after;
    for (int d = 0; d < s.ndim(); ++d)
      if (std::find(rest.begin(), rest.end(), d) == rest.end()) after.push_back(s[d]);
    const bool middle = rest.back() - rest.front() + 1 == static_cast<int>(rest.size()) && rest.back() < s.ndim() - 1;
    if (middle && !kern::perturbation_active()) {
      // a run of axes before the last: the rule down the middle of [A, L, K], nothing moved
      std::int64_t A = 1, K = 1;
      for (int d = 0; d < rest.front(); ++d) A *= s[d];
      for (int d = rest.back() + 1; d < s.ndim(); ++d) K *= s[d];
      Tensor xc = kern::contiguous(x);
      cur = Tensor::empty(after, x.dtype());
      BITGRAD_DISPATCH_FLOAT(x.dtype(), "sum", T, [&] { kern::active<T>().sum_mid(xc.data<T>(), A, L, K, kern::out_ptr<T>(cur)); });
    } else {
      Tensor moved = move_last(x, rest);
      cur = sum_rows_raw(moved, moved.numel() / (L ? L : 1), L, after);
    }
    if (L == 0) cur.fill_(0.0);
    cur_shape = after;
  }
  if (!has0) return cur;
  // stage 2: the batch rule over axis 0
  Tensor cc = kern::contiguous(cur);
  const std::int64_t R = cur_shape[0];
  autograd::SampleCountCheck::note("a sum over axis 0", R, s);
  Tensor out = sum_cols_raw(cc, R, R ? cc.numel() / R : cur_shape.without(0).numel(), kept);
  autograd::SampleCountCheck::summed(out, R);
  return out;
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const Shape& gs = g.shape();
  const int lead = gs.ndim() - shape.ndim();
  BITGRAD_CHECK(lead >= 0, "sum_to", "internal: cannot reduce ", gs.str(), " to ", shape.str());
  std::vector<int> axes;
  for (int d = 0; d < gs.ndim(); ++d) {
    if (d < lead) axes.push_back(d);
    else if (shape[d - lead] == 1 && gs[d] != 1) axes.push_back(d);
  }
  Tensor r = reduce_sum(g, axes);
  return Tensor::view_of(r, shape, contiguous_strides(shape), r.offset());
}

std::string list_text(const std::vector<int>& v) {
  std::string r = "[";
  for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

}  // namespace bitgrad::ops
