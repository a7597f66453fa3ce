// More losses (numerics.md §30), forward and backward side by side.
//   pointwise losses: input, target [N, ..] (same shape) -> l [N, ..], each element's value and
//     derivatives in f64, rounded once; backward ga = round(da * g), gb = round(db * g) per element
//     (l1, smooth_l1, huber, kl_div, binary_cross_entropy[_with_logits])
//   nll_loss: log_probs [N, C, d..], targets [N, d..] -> l = -(w[t] * x[n, t, d..]), +0 where ignored
//   softmax_cross_entropy: log_softmax over axis 1, then nll_loss (and label smoothing)
//   reductions: sum = per sample (axis 0) by the row rule, then the batch rule over samples
//     (loss_sum); mean = that / numel, or / (the same sum of the weights) for the class losses
// The reductions and the class losses are compositions of recorded ops, so their backwards are
// those ops' backwards.
#include <cmath>
#include <limits>

#include "bitgrad/math.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// The sum of a per-element loss over the batch: per sample (index of axis 0) the row rule over
// its elements, then the batch rule over the samples (numerics.md §3): contract T5 holds.
Tensor loss_sum(const Tensor& l, CallSite site) {
  const std::int64_t N = l.ndim() ? l.shape()[0] : 1;
  const std::int64_t L = N ? l.numel() / N : 0;
  return sum(reshape(l, Shape{N, L}, site), site);
}
Tensor reduce_loss(const Tensor& l, Reduction r, const char* op, CallSite site) {
  if (r == Reduction::none) return l;
  if (r == Reduction::sum) return loss_sum(l, site);
  BITGRAD_CHECK(l.numel() > 0, op, "mean over an empty tensor (shape ", l.shape().str(), ")");
  return div(loss_sum(l, site), static_cast<double>(l.numel()), site);
}

enum class Pw : std::uint8_t { l1, smooth_l1, huber, kl, kl_log, bce, bce_logits };
struct PwSaved {
  Pw kind;
  double p;  // beta (smooth_l1), delta (huber)
};

double sgn(double d) { return d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0; }
double clamp100(double v) { return v < -100.0 ? -100.0 : v; }  // PyTorch's clamp of BCE's logs (NaN passes)
double softplus_neg(double a) {  // log(1 + e^-a) = log1p(e^-|a|) + max(-a, 0)
  return math::log1p(math::exp(-std::fabs(a))) + (a < 0 ? -a : 0.0);
}

// value and derivatives of one element (a: input, b: target, w: pos_weight)
struct Pt {
  double v, da, db;
};
Pt pointwise(Pw k, double a, double b, double w, double p) {
  const double d = a - b, z = std::fabs(d);
  switch (k) {
    case Pw::l1: return {z, sgn(d), -sgn(d)};
    case Pw::smooth_l1: {
      if (p == 0 || z >= p) return {z - 0.5 * p, sgn(d), -sgn(d)};
      return {0.5 * z * z / p, d / p, -d / p};
    }
    case Pw::huber: {
      if (z >= p) return {p * (z - 0.5 * p), p * sgn(d), -p * sgn(d)};
      return {0.5 * z * z, d, -d};
    }
    case Pw::kl: {  // xlogy(b, b) - b a
      const double lb = b > 0 ? math::log(b) : 0.0;
      return {(b == 0 ? 0.0 : b * math::log(b)) - b * a, -b, b > 0 ? lb + 1.0 - a : -a};
    }
    case Pw::kl_log: {  // e^b (b - a)
      const double eb = math::exp(b);
      return {eb * (b - a), -eb, eb * ((b - a) + 1.0)};
    }
    case Pw::bce: {
      const double la = clamp100(math::log(a)), l1a = clamp100(math::log1p(-a));
      const double den = (1.0 - a) * a;
      return {-(b * la + (1.0 - b) * l1a), (a - b) / (den > 1e-12 ? den : 1e-12), math::log1p(-a) - math::log(a)};
    }
    case Pw::bce_logits: {
      const double sp = softplus_neg(a), lw = 1.0 + (w - 1.0) * b;
      return {(1.0 - b) * a + lw * sp, (1.0 - b) - lw * math::sigmoid(-a), -a + (w - 1.0) * sp};
    }
  }
  return {0, 0, 0};
}

// saved 0 = input, 1 = target, 2 = pos_weight expanded (bce_logits) (all contiguous)
void pointwise_bw(Node& n, const Tensor& g, Tensor* gi) {
  const PwSaved& s = n.payload<PwSaved>();
  const Tensor& a = n.saved_tensor(0);
  const Tensor& b = n.saved_tensor(1);
  const Tensor& w = n.saved_tensor(2);
  Tensor gc = kern::contiguous(g);
  Tensor ga = Tensor::empty(a.shape(), a.dtype()), gb = Tensor::empty(a.shape(), a.dtype());
  BITGRAD_DISPATCH_FLOAT(a.dtype(), "loss", T, [&] {
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    const T* pg = gc.data<T>();
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      const Pt r = pointwise(s.kind, pa[i], pb[i], pw ? static_cast<double>(pw[i]) : 1.0, s.p);
      kern::out_ptr<T>(ga)[i] = kern::canon(static_cast<T>(r.da * static_cast<double>(pg[i])));
      kern::out_ptr<T>(gb)[i] = kern::canon(static_cast<T>(r.db * static_cast<double>(pg[i])));
    }
  });
  if (n.in[0].needs_grad()) gi[0] = ga;
  if (n.in[1].needs_grad()) gi[1] = gb;
}

Tensor pointwise_loss(const char* op, Pw kind, const Tensor& input, const Tensor& target, const Tensor& pos_weight, double p,
                      CallSite site) {
  ops::check_same_dtype(op, input, target);
  BITGRAD_CHECK(input.shape() == target.shape(), op, "input ", input.shape().str(), " and target ", target.shape().str(),
                " must have the same shape");
  Tensor a = kern::contiguous(input), b = kern::contiguous(target), w;
  if (pos_weight.defined()) {
    ops::check_same_dtype(op, input, pos_weight);
    Shape bs = broadcast_shapes(input.shape(), pos_weight.shape(), op);
    BITGRAD_CHECK(bs == input.shape(), op, "pos_weight ", pos_weight.shape().str(), " does not broadcast to the input ",
                  input.shape().str());
    NoGradGuard ng;
    w = expand(pos_weight.detach(), input.shape()).contiguous_copy();
  }
  Tensor l = Tensor::empty(a.shape(), a.dtype());
  BITGRAD_DISPATCH_FLOAT(a.dtype(), op, T, [&] {
    const T* pw = w.defined() ? w.data<T>() : nullptr;
    for (std::int64_t i = 0; i < a.numel(); ++i)
      kern::out_ptr<T>(l)[i] = kern::canon(static_cast<T>(pointwise(kind, a.data<T>()[i], b.data<T>()[i], pw ? static_cast<double>(pw[i]) : 1.0, p).v));
  });
  if (Node* n = ops::record(op, pointwise_bw, {&input, &target}, l, site)) {
    n->save(0, a);
    n->save(1, b);
    if (w.defined()) n->save(2, w);
    n->set_payload(PwSaved{kind, p});
  }
  return l;
}

Tensor weighted(const Tensor& l, const Tensor& weight, const char* op, CallSite site) {
  if (!weight.defined()) return l;
  ops::check_same_dtype(op, l, weight);
  BITGRAD_CHECK(broadcast_shapes(l.shape(), weight.shape(), op) == l.shape(), op, "weight ", weight.shape().str(),
                " does not broadcast to the input ", l.shape().str());
  return mul(l, weight.detach(), site);
}

// ---- class losses -----------------------------------------------------------------------------
struct ClassTargets {
  Tensor safe;    // i64 [N, 1, d..]: the target, 0 where ignored (an index gather can take)
  Tensor valid;   // u8 [N, d..]
  Tensor wt;      // dtype [N, d..]: the target's weight (1 without weights), +0 where ignored
  Tensor wsum;    // scalar: wt summed per sample by the row rule, then by the batch rule
};

ClassTargets class_targets(const char* op, const Tensor& x, const Tensor& targets, const Tensor& weight, std::int64_t ignore_index) {
  ops::check_float(op, x);
  BITGRAD_CHECK(x.ndim() >= 2, op, "input must be [N, C] or [N, C, d1, ...], got ", x.shape().str());
  const std::int64_t C = x.shape()[1];
  const Shape ts = x.shape().without(1);
  BITGRAD_CHECK(targets.defined() && targets.dtype() == DType::i64 && targets.shape() == ts, op, "targets must be i64 ", ts.str(),
                " for input ", x.shape().str(), ", got ", targets.defined() ? dtype_name(targets.dtype()) : "undefined", " ",
                targets.defined() ? targets.shape().str() : "");
  if (weight.defined()) {
    ops::check_same_dtype(op, x, weight);
    BITGRAD_CHECK(weight.shape() == Shape{C}, op, "weight must be [", C, "] (one per class), got ", weight.shape().str());
  }
  Tensor tc = kern::contiguous(targets);
  Tensor wc = weight.defined() ? kern::contiguous(weight) : Tensor();
  ClassTargets r;
  Shape s1 = ts;
  {
    Shape k;
    k.push_back(ts.ndim() ? ts[0] : 1);
    k.push_back(1);
    for (int d = 1; d < ts.ndim(); ++d) k.push_back(ts[d]);
    s1 = k;
  }
  r.safe = Tensor::empty(s1, DType::i64);
  r.valid = Tensor::empty(ts, DType::u8);
  r.wt = Tensor::empty(ts, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), op, T, [&] {
    const std::int64_t* pt = tc.data<std::int64_t>();
    for (std::int64_t i = 0; i < tc.numel(); ++i) {
      const std::int64_t t = pt[i];
      const bool ign = t == ignore_index;
      BITGRAD_CHECK(ign || (t >= 0 && t < C), op, "target ", t, " at flat position ", i, " is out of range [0, ", C,
                    ") and is not ignore_index ", ignore_index);
      kern::out_ptr<std::int64_t>(r.safe)[i] = ign ? 0 : t;
      kern::out_ptr<std::uint8_t>(r.valid)[i] = ign ? 0 : 1;
      kern::out_ptr<T>(r.wt)[i] = ign ? T(0) : wc.defined() ? wc.data<T>()[t] : T(1);
    }
  });
  NoGradGuard ng;
  r.wsum = loss_sum(r.wt, CallSite::current());
  return r;
}

Tensor class_reduce(const Tensor& l, const ClassTargets& ct, Reduction r, CallSite site) {
  if (r == Reduction::none) return l;
  if (r == Reduction::sum) return loss_sum(l, site);
  return div(loss_sum(l, site), ct.wsum, site);  // / the weights of the non-ignored targets (0/0 = NaN if none)
}

Tensor nll_elems(const Tensor& logp, const ClassTargets& ct, bool weighted_, CallSite site) {
  const Shape ts = ct.wt.shape();
  Tensor picked = reshape(gather(logp, 1, ct.safe, site), ts, site);  // x[n, t, d..]
  Tensor l = weighted_ ? neg(mul(picked, ct.wt, site), site) : neg(picked, site);
  return where(ct.valid, l, Tensor::zeros(Shape{}, logp.dtype()), site);
}

}  // namespace

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, CallSite site) {
  return reduce_loss(pointwise_loss("l1_loss", Pw::l1, input, target, Tensor(), 0, site), reduction, "l1_loss", site);
}
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta, CallSite site) {
  BITGRAD_CHECK(beta >= 0, "smooth_l1_loss", "beta must be >= 0, got ", beta);
  return reduce_loss(pointwise_loss("smooth_l1_loss", Pw::smooth_l1, input, target, Tensor(), beta, site), reduction, "smooth_l1_loss", site);
}
Tensor huber_loss(const Tensor& input, const Tensor& target, Reduction reduction, double delta, CallSite site) {
  BITGRAD_CHECK(delta > 0, "huber_loss", "delta must be > 0, got ", delta);
  return reduce_loss(pointwise_loss("huber_loss", Pw::huber, input, target, Tensor(), delta, site), reduction, "huber_loss", site);
}
Tensor kl_div(const Tensor& input, const Tensor& target, Reduction reduction, bool log_target, bool batch_mean, CallSite site) {
  Tensor l = pointwise_loss("kl_div", log_target ? Pw::kl_log : Pw::kl, input, target, Tensor(), 0, site);
  if (!batch_mean) return reduce_loss(l, reduction, "kl_div", site);
  const std::int64_t N = l.ndim() ? l.shape()[0] : 1;
  BITGRAD_CHECK(N > 0, "kl_div", "batchmean over an empty batch (shape ", l.shape().str(), ")");
  return div(loss_sum(l, site), static_cast<double>(N), site);
}
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, Reduction reduction, CallSite site) {
  Tensor l = pointwise_loss("binary_cross_entropy", Pw::bce, input, target, Tensor(), 0, site);
  return reduce_loss(weighted(l, weight, "binary_cross_entropy", site), reduction, "binary_cross_entropy", site);
}
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight, const Tensor& pos_weight,
                                        Reduction reduction, CallSite site) {
  const char* op = "binary_cross_entropy_with_logits";
  Tensor l = pointwise_loss(op, Pw::bce_logits, input, target, pos_weight, 0, site);
  return reduce_loss(weighted(l, weight, op, site), reduction, op, site);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& weight, std::int64_t ignore_index, Reduction reduction,
                CallSite site) {
  ClassTargets ct = class_targets("nll_loss", log_probs, targets, weight, ignore_index);
  return class_reduce(nll_elems(log_probs, ct, weight.defined(), site), ct, reduction, site);
}

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& weight, std::int64_t ignore_index,
                             double label_smoothing, Reduction reduction, Tensor* log_prob, CallSite site) {
  const char* op = "softmax_cross_entropy";
  BITGRAD_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, "label_smoothing must be in [0, 1], got ", label_smoothing);
  ClassTargets ct = class_targets(op, logits, targets, weight, ignore_index);
  Tensor logp = log_softmax(logits, 1, site);
  if (log_prob) *log_prob = logp;
  Tensor l = nll_elems(logp, ct, weight.defined(), site);
  if (label_smoothing != 0) {
    // PyTorch's smoothing term, per element: -(sum over classes of w_c * logp_c), +0 where
    // ignored; combined with the NLL per element, (1 - eps) * nll + (eps / C) * smooth, before the
    // one reduction (PyTorch reduces both first and then combines: the same value, but a
    // per-element loss keeps the per-sample sums and the batch rule, so T5 holds)
    const std::int64_t C = logits.shape()[1];
    Tensor wl = logp;
    if (weight.defined()) {
      Shape ws;
      for (int d = 0; d < logits.ndim(); ++d) ws.push_back(d == 1 ? C : 1);
      wl = mul(logp, reshape(weight.detach(), ws, site), site);
    }
    Tensor smooth = where(ct.valid, neg(sum(wl, {1}, false, site), site), Tensor::zeros(Shape{}, logits.dtype()), site);
    l = add(mul(l, 1.0 - label_smoothing, site), mul(smooth, label_smoothing / static_cast<double>(C), site), site);
  }
  return class_reduce(l, ct, reduction, site);
}

}  // namespace bitgrad
