// A caller's differentiable function (Python's bitgrad.autograd.Function, as torch's): its forward
// ran without recording and gave y; one node with the function's inputs records it, and its
// backward is the caller's: backward(g) -> one gradient per input (undefined: none), each checked
// against its input's shape and dtype. The ops inside run under the engine's sample check like any
// op's backward, so a parameter's gradient the function computes is one sum over the samples only
// where those ops say so (autograd::SampleCountCheck).
// Shapes: y any; inputs any; backward(g [y's shape]) -> [input i's shape] each.
#include <functional>
#include <memory>
#include <string>

#include "autograd/node.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct Custom {
  std::string name;
  std::function<std::vector<Tensor>(const Tensor&)> backward;
  std::vector<DType> dtypes;
};

void custom_bw(Node& n, const Tensor& g, Tensor* gi) {
  const auto& c = *static_cast<const Custom*>(n.owned.get());
  std::vector<Tensor> got = c.backward(g);
  BITGRAD_CHECK(static_cast<int>(got.size()) == n.n_inputs, c.name.c_str(), "backward returned ", got.size(),
                " gradient(s); forward took ", n.n_inputs, " tensor input(s): return one per input (None where there is none)");
  for (int i = 0; i < n.n_inputs; ++i) {
    const Tensor& t = got[static_cast<std::size_t>(i)];
    if (!t.defined() || !n.input(i).needs_grad()) continue;
    BITGRAD_CHECK(t.shape() == n.input_shape(i) && t.dtype() == c.dtypes[static_cast<std::size_t>(i)], c.name.c_str(),
                  "backward's gradient ", i, " is ", dtype_name(t.dtype()), " ", t.shape().str(), "; input ", i, " is ",
                  dtype_name(c.dtypes[static_cast<std::size_t>(i)]), " ", n.input_shape(i).str());
    gi[i] = t;
  }
}
}  // namespace

Tensor custom_function(const std::string& name, const std::vector<Tensor>& inputs, const Tensor& y,
                       std::function<std::vector<Tensor>(const Tensor&)> backward, CallSite site) {
  BITGRAD_CHECK(y.defined(), name.c_str(), "forward returned an undefined tensor");
  BITGRAD_CHECK(static_cast<bool>(backward), name.c_str(), "no backward function");
  for (std::size_t i = 0; i < inputs.size(); ++i) BITGRAD_CHECK(inputs[i].defined(), name.c_str(), "input ", i, " is undefined");
  Tensor out = y.detach();  // the node's own output (what forward made keeps no history)
  auto c = std::make_shared<Custom>();
  c->name = name;
  c->backward = std::move(backward);
  for (const Tensor& t : inputs) c->dtypes.push_back(t.dtype());
  if (Node* n = ops::record("function", custom_bw, inputs, out, site)) {
    n->label = n->label.empty() ? name : n->label + "/" + name;
    n->owned = std::move(c);
  }
  return out;
}

}  // namespace bitgrad
