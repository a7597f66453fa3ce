// Activations with parameters (the BITGRAD_PARAM_OPS lines of bitgrad/op_list.hpp) and prelu,
// forward and backward side by side. Shapes: y [..] has x's shape; prelu's slope broadcasts to
// x's shape. Orders and gradients: numerics.md §32.
#include <cmath>

#include "ops/op_util.hpp"
#include "tensor/strided.hpp"

namespace bitgrad {
namespace {
using autograd::Node;
using kern::UnaryP;

struct ParamSaved {
  double a, b;
};

// x [..] -> gx [..]: act_grad_p on the saved x with the forward's parameters
template <UnaryP P>
void param_bw(Node& n, const Tensor& g, Tensor* gi) {
  const ParamSaved& p = n.payload<ParamSaved>();
  const Tensor x = kern::contiguous(n.saved_tensor(0));
  const Tensor gc = kern::contiguous(g);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), kern::op_name(P), T, [&] {
    kern::active<T>().act_grad_p(P, x.data<T>(), gc.data<T>(), kern::out_ptr<T>(out), x.numel(), p.a, p.b);
  });
  gi[0] = out;
}

// y [..] = op(x; a, b); parameters must be finite (celu's alpha also nonzero: it divides)
Tensor param_op(UnaryP op, const Tensor& x, double a, double b, autograd::BackwardFn bw, CallSite site) {
  const char* name = kern::op_name(op);
  ops::check_float(name, x);
  BITGRAD_CHECK(std::isfinite(a) && std::isfinite(b), name, "parameters must be finite, got ", a, " and ", b);
  BITGRAD_CHECK(!(op == UnaryP::celu && a == 0.0), name, "alpha must be nonzero (it divides x)");
  const Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), name, T, [&] {
    kern::active<T>().unary_p(op, xc.data<T>(), kern::out_ptr<T>(y), x.numel(), a, b);
  });
  if (Node* n = ops::record(name, bw, {&x}, y, site)) {
    n->save(0, x);
    n->set_payload(ParamSaved{a, b});
  }
  return y;
}

// ---- prelu: y = x where x > 0, else x * slope (in T; NaN passes on) -----------------------------
// gx = g where x > 0, else g * slope; gslope = the sum down to slope's shape (§6) of
// (+0 where x > 0, else g * x)
void prelu_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor x = kern::contiguous(n.saved_tensor(0));
  const Shape& s = x.shape();
  const Tensor sv = expand(n.saved_tensor(1).detach(), s);
  const Tensor gc = kern::contiguous(g);
  Tensor gx = Tensor::empty(s, x.dtype()), gs = Tensor::empty(s, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "prelu backward", T, [&] {
    const T *px = x.data<T>(), *ps = sv.data<T>(), *pg = gc.data<T>();
    T *qx = kern::out_ptr<T>(gx), *qs = kern::out_ptr<T>(gs);
    const Shape cs = contiguous_strides(s);
    detail::for_each_strided2(s, cs, sv.strides(), [&](std::int64_t o, std::int64_t is) {
      const bool pos = px[o] > T(0);
      qx[o] = kern::canon(pos ? pg[o] : pg[o] * ps[is]);
      qs[o] = kern::canon(pos ? T(0) : pg[o] * px[o]);
    });
  });
  if (n.in[0].needs_grad()) gi[0] = gx;
  if (n.in[1].needs_grad()) gi[1] = ops::sum_to(gs, n.in_shape[1]);
}

}  // namespace

#define BITGRAD_OPLIST_DEFINE_PARAM(name, cost, nparams, a, da, b, db, ...)                             \
  Tensor name(const Tensor& x, BITGRAD_OPLIST_PARAMS_DEF(nparams, a, b), CallSite site) {              \
    return param_op(UnaryP::name, x, BITGRAD_OPLIST_PARAMS_ARGS(nparams, a, b), param_bw<UnaryP::name>, site); \
  }
BITGRAD_PARAM_OPS(BITGRAD_OPLIST_DEFINE_PARAM)
#undef BITGRAD_OPLIST_DEFINE_PARAM

Tensor prelu(const Tensor& x, const Tensor& slope, CallSite site) {
  ops::check_float("prelu", x);
  ops::check_same_dtype("prelu", x, slope);
  const Shape s = broadcast_shapes(x.shape(), slope.shape(), "prelu");
  BITGRAD_CHECK(s == x.shape(), "prelu", "slope of shape ", slope.shape().str(), " must broadcast to x's shape ", x.shape().str());
  const Tensor xc = kern::contiguous(x);
  const Tensor sv = expand(slope.detach(), s);
  Tensor y = Tensor::empty(s, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "prelu", T, [&] {
    const T *px = xc.data<T>(), *ps = sv.data<T>();
    T* py = kern::out_ptr<T>(y);
    detail::for_each_strided2(s, contiguous_strides(s), sv.strides(), [&](std::int64_t o, std::int64_t is) {
      py[o] = kern::canon(px[o] > T(0) ? px[o] : px[o] * ps[is]);
    });
  });
  if (Node* n = ops::record("prelu", prelu_bw, {&x, &slope}, y, site)) {
    n->save(0, x);
    n->save(1, slope);
  }
  return y;
}

}  // namespace bitgrad
