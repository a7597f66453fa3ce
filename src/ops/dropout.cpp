// dropout and embedding, forward and backward side by side.
//   dropout: y[k] = x[k] * s where s = 1/(1-p) if stream.uniform(first + k) >= p, else 0
//     (s rounded once to the dtype); dx = g * s with the same mask
//   embedding: weight [num, dim], indices [N, ..] -> [N, .., dim] = index_select(weight, 0, flat indices);
//     the gradient of each weight row: per sample the sum of its uses in index order, then the
//     batch rule over the samples (kern::index_add_rows_by_sample; 1-d indices: one per sample)
#include "kernels/index.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// The mask scale of every element, 0 or 1/(1-p): element k keeps (scale 1/(1-p)) where uniform(first + k) >= p: the f32 uniform for f32 tensors
// (and for an f64 tensor with an f32 run's masks, the float64 shadow), else the f64 one
// (kern::Table::dropout_mask). The elements are independent, so threads split them freely (in
// chunks of 2^13 elements, about 10 microseconds: a thread woken for much less costs more).
Tensor dropout_scale(const Shape& s, DType dt, double p, const rng::Stream& stream, std::uint64_t first, bool f32_mask) {
  Tensor m = Tensor::empty(s, dt);
  BITGRAD_DISPATCH_FLOAT(dt, "dropout", T, [&] {
    T* pm = kern::out_ptr<T>(m);
    const T keep = static_cast<T>(1.0 / (1.0 - p));
    const kern::Table<T>& tb = kern::active<T>();
    kern::parallel_for(m.numel(), 1 << 13, [&](std::int64_t b, std::int64_t e) {
      tb.dropout_mask(stream, first + static_cast<std::uint64_t>(b), e - b, p, sizeof(T) == 4 || f32_mask, keep, pm + b);
    });
  });
  return m;
}

void dropout_bw(Node& n, const Tensor& g, Tensor* gi) { gi[0] = mul(g, n.saved_tensor(0)); }

struct EmbeddingSaved {
  std::int64_t samples, per;  // the indices as [samples, per]
};
// saved: 0 = the indices, flat
void embedding_bw(Node& n, const Tensor& g, Tensor* gi) {
  const EmbeddingSaved& s = n.payload<EmbeddingSaved>();
  const Shape& ws = n.in_shape[0];
  Tensor gc = kern::contiguous(g);
  Tensor dw = Tensor::empty(ws, g.dtype());
  autograd::SampleCountCheck::note("embedding's gradient", s.samples, Shape{s.samples, s.per});
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "embedding", T, [&] {
    kern::index_add_rows_by_sample(gc.data<T>(), s.samples, s.per, ws[1], n.saved_tensor(0).data<std::int64_t>(), ws[0], kern::out_ptr<T>(dw));
  });
  gi[0] = dw;
  autograd::SampleCountCheck::summed(dw, s.samples);
}

}  // namespace

Tensor dropout(const Tensor& x, double p, const rng::Stream& stream, std::uint64_t first_index, bool f32_mask, CallSite site) {
  ops::check_float("dropout", x);
  BITGRAD_CHECK(p >= 0.0 && p < 1.0, "dropout", "probability must be in [0, 1), got ", p);
  if (p == 0.0) return x;
  Tensor scale = dropout_scale(x.shape(), x.dtype(), p, stream, first_index, f32_mask);
  Tensor y;
  {
    NoGradGuard ng;
    y = mul(x, scale);
  }
  if (Node* n = ops::record("dropout", dropout_bw, {&x}, y, site)) n->save(0, scale);
  return y;
}

Tensor embedding(const Tensor& weight, const Tensor& indices, CallSite site) {
  ops::check_float("embedding", weight);
  BITGRAD_CHECK(weight.ndim() == 2, "embedding", "the weight must be [num, dim], got ", weight.shape().str());
  BITGRAD_CHECK(indices.defined() && indices.dtype() == DType::i64, "embedding", "indices must be an i64 tensor");
  Tensor flat = kern::contiguous(reshape(indices, Shape{indices.numel()}, site));
  Shape out = indices.shape();
  out.push_back(weight.shape()[1]);
  Tensor y;
  {
    NoGradGuard ng;  // its own node below: the backward adds sample by sample
    y = reshape(index_select(weight, 0, flat, site), out, site).contiguous_copy();
  }
  if (Node* n = ops::record("embedding", embedding_bw, {&weight}, y, site)) {
    n->save(0, flat);
    const std::int64_t samples = indices.ndim() >= 2 ? indices.shape()[0] : std::max<std::int64_t>(indices.numel(), 1);
    n->set_payload(EmbeddingSaved{samples, samples > 0 ? indices.numel() / samples : 0});
  }
  return y;
}

}  // namespace bitgrad
