// The autograd members of Tensor.
#include "autograd/node.hpp"
#include "bitgrad/autograd.hpp"

namespace bitgrad {
namespace autograd {
void run_backward(const Tensor& root, const Tensor& seed, bool retain_graph);
}

Tensor& Tensor::set_requires_grad(bool on) {
  autograd::AutogradMeta* m = autograd::meta_if(*this);
  BITGRAD_CHECK_STATE(!(m && m->grad_fn), "set_requires_grad", "only leaf tensors can change requires_grad; this one is the output of '",
                m ? m->grad_fn->op : "", "' (use detach() for a leaf copy)");
  BITGRAD_CHECK(!on || is_floating(dtype()), "set_requires_grad", "only f32 and f64 tensors can require grad, got ",
                dtype_name(dtype()));
  impl().requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const {
  autograd::AutogradMeta* m = autograd::meta_if(*this);
  return !(m && m->grad_fn);
}

Tensor Tensor::grad() const {
  autograd::AutogradMeta* m = autograd::meta_if(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  if (g.defined()) {
    BITGRAD_CHECK(g.shape() == shape() && g.dtype() == dtype(), "set_grad", "gradient of shape ", g.shape().str(), " ",
                  dtype_name(g.dtype()), " does not match the tensor's ", shape().str(), " ", dtype_name(dtype()));
  }
  autograd::meta(*this).grad = g;
}

void Tensor::zero_grad() {
  if (autograd::AutogradMeta* m = autograd::meta_if(*this)) m->grad = Tensor();
}

Tensor Tensor::detach() const { return view_of(*this, shape(), strides(), offset()); }

void Tensor::backward(const Tensor& seed, bool retain_graph) const { autograd::run_backward(*this, seed, retain_graph); }

const std::string& Tensor::label() const {
  static const std::string empty;
  autograd::AutogradMeta* m = autograd::meta_if(*this);
  return m ? m->label : empty;
}

Tensor& Tensor::set_label(const std::string& label) {
  autograd::meta(*this).label = label;
  return *this;
}

}  // namespace bitgrad
