// round_to: a mixed-precision operand or result (docs/numerics.md §24).
//   x [any] -> y [same]: every element rounded to the precision's 16-bit format (to nearest, or
//   stochastically from stream.u32(first + k)) and kept exactly in x's dtype;
//   dx = g rounded to nearest in the same format (the gradient of a low-precision activation is
//   a low-precision tensor, as in autocast training), or dx = g (round_grad false: a parameter's
//   low-precision copy, whose gradient reaches the f32 master unrounded, so that summing
//   micro-batches or ranks stays the batch's own sum, T5/T6). Rounding's derivative is 0 almost
//   everywhere: both are the straight-through choice, not a derivative.
#include "bitgrad/half.hpp"
#include "kernels/lowp.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

Tensor rounded(const Tensor& x, Precision p, const rng::Stream* stream, std::uint64_t first) {
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "round_to", T, [&] {
    kern::round_to_precision(xc.data<T>(), kern::out_ptr<T>(y), x.numel(), p, stream, first);
  });
  return y;
}

struct RoundSaved {
  Precision p;
  bool round_grad;
};
void round_to_bw(Node& n, const Tensor& g, Tensor* gi) {
  const RoundSaved& s = n.payload<RoundSaved>();
  gi[0] = s.round_grad ? rounded(g, s.p, nullptr, 0) : g;
}

}  // namespace

Tensor round_to(const Tensor& x, Precision p, const rng::Stream* stochastic, std::uint64_t first_index, bool round_grad, CallSite site) {
  ops::check_float("round_to", x);
  if (p == Precision::fp32) return x;
  Tensor y;
  {
    NoGradGuard ng;
    y = rounded(x, p, stochastic, first_index);
  }
  if (Node* n = ops::record("round_to", round_to_bw, {&x}, y, site)) n->set_payload(RoundSaved{p, round_grad});
  return y;
}

}  // namespace bitgrad
