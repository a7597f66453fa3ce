// layer_norm over the last dimension, forward and backward side by side.
//   x [R.., D], gamma [D], beta [D] -> y [R.., D]
//   per row: mean = rowrule(x)/D; d = x - mean; var = rowrule(fma(d, d))/D;
//            rstd = 1/sqrt(var + eps); xhat = d*rstd; y = xhat*gamma + beta
//   backward: gx = g*gamma; a = rowrule(gx)/D; b = rowrule(fma(gx, xhat))/D;
//             dx = rstd*((gx - a) - xhat*b); dgamma = batch rule over rows of g*xhat;
//             dbeta = batch rule over rows of g (x of 3+ dimensions: per sample, then over
//             the samples)
//   (the rows run on the kernel table: layer_norm_rows, layer_norm_grad_rows)
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct LayerNormSaved {
  std::int64_t R, D;     // x as [R, D]
  std::int64_t samples;  // the leading dimension of x of 3 or more dimensions, else R
};
// gamma and beta gradients: the batch rule over the rows of each sample, then over the samples
template <class T>
void sum_over_samples(const T* v, std::int64_t R, std::int64_t D, std::int64_t samples, T* out, DType dt) {
  autograd::SampleCountCheck::note("layer norm's gamma/beta gradient", samples, Shape{R, D});
  if (samples == R) return kern::active<T>().sum_cols(v, R, D, out);
  const std::int64_t rows = R / samples;
  ops::batch_rule_over_samples<T>(samples, D, dt, [&](std::int64_t n, T* part) { kern::active<T>().sum_cols(v + n * rows * D, rows, D, part); },
                                  out);
}

// saved: 0 x (contiguous), 1 gamma, 2 rstd [R], 3 mean [R]
void layer_norm_bw(Node& n, const Tensor& g, Tensor* gi) {
  const LayerNormSaved& s = n.payload<LayerNormSaved>();
  const std::int64_t R = s.R, D = s.D;
  const Tensor& x = n.saved_tensor(0);
  const Tensor& gamma = n.saved_tensor(1);
  const Tensor& rstd = n.saved_tensor(2);
  const Tensor& mean = n.saved_tensor(3);
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "layer_norm", T, [&] {
    const T *px = x.data<T>(), *pg = gc.data<T>(), *pr = rstd.data<T>(), *pm = mean.data<T>();
    const T* pga = gamma.defined() ? gamma.data<T>() : nullptr;
    Tensor xhat = Tensor::empty(Shape{R, D}, g.dtype());
    T* ph = kern::out_ptr<T>(xhat);
    // xhat = (x - mean_row) * rstd_row, each operation rounded: two passes of the elementwise
    // kernel (vector units, threads) with the row's value broadcast
    const kern::Table<T>& tb = kern::active<T>();
    tb.binary(kern::Binary::sub, kern::Bcast::col, px, pm, ph, R, D);
    tb.binary(kern::Binary::mul, kern::Bcast::col, ph, pr, ph, R, D);
    if (n.in[0].needs_grad()) {
      Tensor dx = Tensor::empty(n.in_shape[0], g.dtype());
      kern::active<T>().layer_norm_grad_rows(pg, ph, pga, pr, R, D, kern::out_ptr<T>(dx));
      gi[0] = dx;
    }
    if (n.n_inputs > 1 && n.in[1].needs_grad()) {
      Tensor prod = Tensor::empty(Shape{R, D}, g.dtype());
      T* pp = kern::out_ptr<T>(prod);
      tb.binary(kern::Binary::mul, kern::Bcast::same, pg, ph, pp, R, D);
      Tensor dg = Tensor::empty(Shape{D}, g.dtype());
      sum_over_samples(pp, R, D, s.samples, kern::out_ptr<T>(dg), g.dtype());
      gi[1] = dg;
      autograd::SampleCountCheck::summed(dg, s.samples);
    }
    if (n.n_inputs > 2 && n.in[2].needs_grad()) {
      Tensor dbeta = Tensor::empty(Shape{D}, g.dtype());
      sum_over_samples(pg, R, D, s.samples, kern::out_ptr<T>(dbeta), g.dtype());
      gi[2] = dbeta;
      autograd::SampleCountCheck::summed(dbeta, s.samples);
    }
  });
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, CallSite site) {
  ops::check_float("layer_norm", x);
  BITGRAD_CHECK(x.ndim() >= 1, "layer_norm", "needs at least one dimension");
  const std::int64_t D = x.shape()[x.ndim() - 1];
  BITGRAD_CHECK(D > 0, "layer_norm", "the last dimension is empty (shape ", x.shape().str(), ")");
  BITGRAD_CHECK(eps >= 0, "layer_norm", "eps must be >= 0, got ", eps);
  for (const Tensor* p : {&gamma, &beta}) {
    if (!p->defined()) continue;
    ops::check_same_dtype("layer_norm", x, *p);
    BITGRAD_CHECK(p->ndim() == 1 && p->shape()[0] == D, "layer_norm", "gamma and beta must be [", D, "] for input ",
                  x.shape().str(), ", got ", p->shape().str());
  }
  const std::int64_t R = x.numel() / D;
  Tensor xc = kern::contiguous(x);
  Tensor gc = gamma.defined() ? kern::contiguous(gamma) : Tensor();
  Tensor bc = beta.defined() ? kern::contiguous(beta) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty(Shape{R}, x.dtype()), mean = Tensor::empty(Shape{R}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "layer_norm", T, [&] {
    const T* px = xc.data<T>();
    const T* pga = gc.defined() ? gc.data<T>() : nullptr;
    const T* pbe = bc.defined() ? bc.data<T>() : nullptr;
    kern::active<T>().layer_norm_rows(px, pga, pbe, R, D, static_cast<T>(eps), kern::out_ptr<T>(y), kern::out_ptr<T>(mean),
                                      kern::out_ptr<T>(rstd));
  });
  std::vector<Tensor> in{x};
  if (gamma.defined() || beta.defined()) in.push_back(gamma.defined() ? gamma : Tensor::zeros(Shape{D}, x.dtype()));
  if (beta.defined()) in.push_back(beta);
  if (Node* n = ops::record("layer_norm", layer_norm_bw, in, y, site)) {
    n->save(0, xc);
    if (gc.defined()) n->save(1, gc);
    n->save(2, rstd);
    n->save(3, mean);
    n->set_payload(LayerNormSaved{R, D, ops::samples_of(x, R)});
  }
  return y;
}

}  // namespace bitgrad
