// Losses, forward and backward side by side.
//   cross_entropy: logits [N, C], targets i64 [N] -> per-sample l_n = log(s_n) - (x_t - m_n)
//     mean: batch rule over the N losses, / N;  backward: (softmax - onehot) * (g / N)
//   sequences: logits [N, T, C], targets i64 [N, T] -> l_nt, as PyTorch's [N, C, T] cross_entropy
//     none: [N, T];  sum: batch rule over N of s_n = rowrule_t(l_nt);  mean: that sum / (N * T)
//     backward: (softmax - onehot) * g_nt, * g, * (g / (N * T))
//   the trainer's sum of sample means (cross_entropy_sample_means): batch rule over N of s_n / T
//     (a sample is one sequence);  backward: (softmax - onehot) * (g / T)
//   mse_loss: input, target [N, ..] -> per-sample row rule of (a-b)^2 (fma), batch rule over N,
//     / numel;  backward: (a - b) * ((g * 2) / numel), and its negation for the target
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct LossSaved {
  Reduction reduction;
  bool sample_means = false;  // sequences: each sample's positions averaged (the trainer's loss)
};

// batch rule over a vector of per-sample values [N] -> scalar
Tensor batch_sum(const Tensor& v) {
  Tensor out = Tensor::empty(Shape{}, v.dtype());
  BITGRAD_DISPATCH_FLOAT(v.dtype(), "loss", T, [&] { kern::active<T>().sum_cols(v.data<T>(), v.numel(), 1, kern::out_ptr<T>(out)); });
  return out;
}

// saved 0 = logits (contiguous), 1 = targets; payload LossSaved
void xent_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor& x = n.saved_tensor(0);
  const Tensor& t = n.saved_tensor(1);
  const bool seq = x.ndim() == 3;
  const std::int64_t N = x.shape()[0], P = seq ? x.shape()[1] : 1, C = x.shape()[x.ndim() - 1];
  const Reduction red = n.payload<LossSaved>().reduction;
  const bool sample_means = n.payload<LossSaved>().sample_means;
  Tensor gx = Tensor::empty(x.shape(), x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "cross_entropy", T, [&] {
    const T* px = x.data<T>();
    const std::int64_t* pt = t.data<std::int64_t>();
    T* pg = kern::out_ptr<T>(gx);
    if (red == Reduction::none) {  // g [N] or [N, T]: one value a row
      kern::active<T>().xent_grad_rows(px, pt, N * P, C, T(1), pg);
      Tensor gc = kern::contiguous(g);
      kern::active<T>().binary(kern::Binary::mul, kern::Bcast::col, pg, gc.data<T>(), pg, N * P, C);
    } else {
      const T gs = static_cast<T>(g.item());
      T scale = gs;
      if (sample_means) scale = gs / static_cast<T>(P);
      else if (red == Reduction::mean) scale = gs / static_cast<T>(N * P);
      kern::active<T>().xent_grad_rows(px, pt, N * P, C, scale, pg);
    }
  });
  gi[0] = gx;
}

// saved 0 = input, 1 = target (both contiguous); payload LossSaved
void mse_bw(Node& n, const Tensor& g, Tensor* gi) {
  const Tensor& a = n.saved_tensor(0);
  const Tensor& b = n.saved_tensor(1);
  const Reduction red = n.payload<LossSaved>().reduction;
  Tensor d = sub(a, b);
  Tensor ga;
  if (red == Reduction::none) {
    ga = mul(d, mul(g, 2.0));
  } else {
    double c = g.item() * 2.0;
    Tensor cs = Tensor::scalar(c, g.dtype());  // (g * 2) in the dtype, then / count
    if (red == Reduction::mean) cs = div(cs, static_cast<double>(a.numel()));
    ga = mul(d, cs);
  }
  if (n.in[0].needs_grad()) gi[0] = ga;
  if (n.in[1].needs_grad()) gi[1] = neg(ga);
}

Tensor cross_entropy_impl(const Tensor& logits, const Tensor& targets, Reduction reduction, bool sample_means, CallSite site) {
  ops::check_float("cross_entropy", logits);
  BITGRAD_CHECK(logits.ndim() == 2 || logits.ndim() == 3, "cross_entropy", "logits must be [N, C] or sequences [N, T, C], got ",
                logits.shape().str());
  const bool seq = logits.ndim() == 3;
  const std::int64_t N = logits.shape()[0], P = seq ? logits.shape()[1] : 1, C = logits.shape()[logits.ndim() - 1];
  BITGRAD_CHECK(C > 0, "cross_entropy", "logits have no classes (shape ", logits.shape().str(), ")");
  BITGRAD_CHECK(!seq || P > 0, "cross_entropy", "sequences of no positions (shape ", logits.shape().str(), ")");
  const Shape want = seq ? Shape{N, P} : Shape{N};
  BITGRAD_CHECK(targets.defined() && targets.dtype() == DType::i64 && targets.shape() == want, "cross_entropy", "targets must be i64 ",
                want.str(), " for logits ", logits.shape().str(), ", got ", targets.defined() ? dtype_name(targets.dtype()) : "undefined", " ",
                targets.defined() ? targets.shape().str() : "");
  Tensor tc = kern::contiguous(targets);
  const std::int64_t* pt = tc.data<std::int64_t>();
  for (std::int64_t i = 0; i < N * P; ++i)
    BITGRAD_CHECK(pt[i] >= 0 && pt[i] < C, "cross_entropy", "target ", pt[i], " of ", seq ? "position " : "sample ", seq ? i % P : i,
                  seq ? " of sample " + std::to_string(i / P) : std::string(), " is out of range [0, ", C, ")");
  BITGRAD_CHECK(reduction != Reduction::mean || N > 0, "cross_entropy", "mean over an empty batch");
  Tensor x = kern::contiguous(logits);
  // per-sample values [N] (positions [N, T] for a sequence's none)
  const bool positions = seq && reduction == Reduction::none;
  Tensor per = Tensor::empty(positions ? Shape{N, P} : Shape{N}, logits.dtype());
  BITGRAD_DISPATCH_FLOAT(logits.dtype(), "cross_entropy", T, [&] {
    const auto& k = kern::active<T>();
    if (!seq || positions) {
      k.xent_rows(x.data<T>(), pt, N * P, C, kern::out_ptr<T>(per));
      return;
    }
    std::vector<T> pos(static_cast<std::size_t>(N * P));
    k.xent_rows(x.data<T>(), pt, N * P, C, pos.data());
    T* pp = kern::out_ptr<T>(per);
    k.sum_rows(pos.data(), N, P, pp);  // a sample's positions by the row rule
    if (sample_means)
      for (std::int64_t i = 0; i < N; ++i) pp[i] = kern::canon(pp[i] / static_cast<T>(P));
  });
  Tensor y;
  {
    NoGradGuard ng;
    if (reduction == Reduction::none) y = per;
    else if (reduction == Reduction::sum) y = batch_sum(per);
    else y = div(batch_sum(per), static_cast<double>(N * P));
  }
  if (Node* n = ops::record("cross_entropy", xent_bw, {&logits}, y, site)) {
    n->save(0, x);
    n->save(1, tc);
    n->set_payload(LossSaved{reduction, sample_means});
  }
  return y;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction, CallSite site) {
  return cross_entropy_impl(logits, targets, reduction, false, site);
}

Tensor cross_entropy_sample_means(const Tensor& logits, const Tensor& targets, CallSite site) {
  return cross_entropy_impl(logits, targets, Reduction::sum, logits.ndim() == 3, site);
}


Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction, CallSite site) {
  ops::check_same_dtype("mse_loss", input, target);
  BITGRAD_CHECK(input.shape() == target.shape(), "mse_loss", "input ", input.shape().str(), " and target ",
                target.shape().str(), " must have the same shape");
  Tensor a = kern::contiguous(input), b = kern::contiguous(target);
  Tensor y;
  {
    NoGradGuard ng;
    if (reduction == Reduction::none) {
      Tensor d = sub(a, b);
      y = mul(d, d);
    } else {
      BITGRAD_CHECK(reduction != Reduction::mean || a.numel() > 0, "mse_loss", "mean over an empty tensor");
      const std::int64_t N = a.ndim() == 0 ? 1 : a.shape()[0];
      const std::int64_t L = N ? a.numel() / N : 0;
      Tensor per = Tensor::empty(Shape{N}, a.dtype());
      BITGRAD_DISPATCH_FLOAT(a.dtype(), "mse_loss", T, [&] {
        kern::active<T>().sumsq_rows(a.data<T>(), b.data<T>(), N, L, kern::out_ptr<T>(per));
      });
      y = batch_sum(per);
      if (reduction == Reduction::mean) y = div(y, static_cast<double>(a.numel()));
    }
  }
  if (Node* n = ops::record("mse_loss", mse_bw, {&input, &target}, y, site)) {
    n->save(0, a);
    n->save(1, b);
    n->set_payload(LossSaved{reduction});
  }
  return y;
}

}  // namespace bitgrad
