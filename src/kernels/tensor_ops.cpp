#include "kernels/tensor_ops.hpp"

namespace bitgrad::kern {

Tensor contiguous(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous_copy(); }

Tensor add_same_shape(const Tensor& a, const Tensor& b) {
  BITGRAD_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), "add", "internal: gradient shapes differ ",
                a.shape().str(), " vs ", b.shape().str());
  Tensor ac = contiguous(a), bc = contiguous(b);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  BITGRAD_DISPATCH_FLOAT(a.dtype(), "add", T, [&] {
    active<T>().binary(Binary::add, Bcast::same, ac.data<T>(), bc.data<T>(), out_ptr<T>(out), 1, out.numel());
  });
  return out;
}

}  // namespace bitgrad::kern
