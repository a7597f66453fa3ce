// batch_norm, forward and backward side by side (numerics.md §31).
//   x [N, C] or [N, C, *spatial] (S = product of the spatial dimensions, 1 for [N, C]);
//   gamma, beta [C] (either may be undefined); running_mean, running_var [C] -> y, x's shape.
//   M = N * S values per channel. "two stages" = per sample the row rule over its S positions,
//   then the batch rule over the N samples (numerics §3, samples of several rows; = sum(x, {0, 2..})).
//   training: s1 = two stages of x; mean = s1 / M; d = x - mean; s2 = two stages of fma(d, d);
//             var = s2 / M (biased: normalises); rstd = 1 / sqrt(var + eps);
//             running stats (if given): r = momentum * stat + (1 - momentum) * r, the variance's
//             stat unbiased: s2 / (M - 1)
//   evaluation: mean, var = running_mean, running_var; d = x - mean; rstd as above
//   y = ((d * rstd) * gamma) + beta (gamma, beta skipped when undefined)
//   backward: xhat = d * rstd; dbeta = sg = two stages of g; dgamma = sgx = two stages of
//             g * xhat; k = gamma * rstd (rstd without gamma);
//             training: dx = k * ((g - sg / M) - xhat * (sgx / M)); evaluation: dx = k * g
//   The sums run on the kernel table (sum_rows, sumsq_rows, sum_cols: scalar reference and fast
//   paths, tested ==); the rest is one fixed formula per element or per channel, parallel over
//   the (sample, channel) planes, so no thread count or code path can move a bit.
//   Part of a batch (training, a BatchStatsExchange installed: data parallel, ops/batch_stats.hpp):
//   x holds this rank's n of the batch's N samples, one node of its tree. The per-sample first
//   stages of all ranks are gathered in sample order and the batch rule runs here over all N,
//   so s1, s2, sg, sgx have the one-process bits and M = N * S counts the whole batch; dgamma,
//   dbeta are this node's own batch-rule sums, which the gradient combine adds by the tree.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/thread_pool.hpp"
#include "ops/batch_stats.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

struct BnGeom {
  std::int64_t N, C, S;
  std::int64_t planes() const { return N * C; }
  std::int64_t M() const { return N * S; }
  std::int64_t grain() const { return S >= 16384 ? 1 : 16384 / (S > 0 ? S : 1); }  // planes per chunk
};

struct BatchNormSaved {
  BnGeom g;
  bool training;
  std::int64_t total;  // samples of the whole batch (g.N without an exchange)
  bool exchanged;      // the batch's sums came through the exchange (a part of the batch)
};

// The exchange batch_norm uses for a part of the batch (null: x is the whole batch), checked
// against x's samples.
BatchStatsExchange* exchange_for(const Tensor& x, std::int64_t N) {
  BatchStatsExchange* ex = batch_stats_exchange();
  if (!ex) return nullptr;
  BITGRAD_CHECK(ex->rows() == N, "batch_norm", "this process holds ", ex->rows(), " samples of a batch of ", ex->total(),
                " (data parallel), but the input ", x.shape().str(), " has ", N,
                ": batch statistics over ranks need the samples as the input's first dimension");
  return ex;
}

// out[c] = the batch rule over the samples of the per-sample values v [n, C] (this process's
// rows): over the whole batch when `ex` is given (gathered in sample order), else over v alone.
template <class T>
void batch_sums(BatchStatsExchange* ex, const T* v, std::int64_t n, std::int64_t C, T* out, const char* what) {
  if (!ex) return kern::active<T>().sum_cols(v, n, C, out);
  std::vector<T> all(static_cast<std::size_t>(ex->total() * C));
  ex->gather(v, C * static_cast<std::int64_t>(sizeof(T)), all.data(), what);
  kern::active<T>().sum_cols(all.data(), ex->total(), C, out);
}

// per channel: out[c] = batch rule over n of (row rule over x[n, c, :])
// With S = 1 the row stage is the identity up to the sign of a zero (+0 + x), which the batch
// rule's chain from +0 gives anyway: x goes to the batch rule directly, the same bits without a
// row-rule call per element.
template <class T>
void two_stages(const T* x, const BnGeom& g, T* part, T* out) {
  if (g.S == 1) return kern::active<T>().sum_cols(x, g.N, g.C, out);
  kern::active<T>().sum_rows(x, g.planes(), g.S, part);
  kern::active<T>().sum_cols(part, g.N, g.C, out);
}

// body(c, i) for every element i (channel c), on the kernel threads in chunks of planes. With
// S = 1 ([N, C]) a sample's channels are contiguous and the loop runs over them (vectorisable);
// otherwise over each plane's positions. No modulo per element or plane.
template <class F>
void for_elements(const BnGeom& g, F&& body) {
  const std::int64_t C = g.C, S = g.S;
  kern::parallel_for(g.planes(), g.grain(), [&](std::int64_t b, std::int64_t e) {
    std::int64_t c = b % C;
    if (S == 1) {
      for (std::int64_t p = b; p < e;) {
        const std::int64_t end = std::min(e, p + (C - c));  // the rest of this sample's row
        const std::int64_t base = p - c;
        for (std::int64_t k = c; k < c + (end - p); ++k) body(k, base + k);
        p = end;
        c = 0;
      }
      return;
    }
    for (std::int64_t p = b; p < e; ++p) {
      for (std::int64_t i = p * S; i < (p + 1) * S; ++i) body(c, i);
      if (++c == C) c = 0;
    }
  });
}

// saved: 0 x (contiguous), 1 gamma (contiguous, if defined), 2 mean [C], 3 rstd [C]
void batch_norm_bw(Node& n, const Tensor& g, Tensor* gi) {
  const BatchNormSaved& s = n.payload<BatchNormSaved>();
  const BnGeom& G = s.g;
  const Tensor& x = n.saved_tensor(0);
  const Tensor& gamma = n.saved_tensor(1);
  const Tensor& mean = n.saved_tensor(2);
  const Tensor& rstd = n.saved_tensor(3);
  Tensor gc = kern::contiguous(g);
  const DType dt = g.dtype();
  BITGRAD_DISPATCH_FLOAT(dt, "batch_norm", T, [&] {
    const T *px = x.data<T>(), *pg = gc.data<T>(), *pm = mean.data<T>(), *pr = rstd.data<T>();
    const T* pga = gamma.defined() ? gamma.data<T>() : nullptr;
    const std::int64_t C = G.C, S = G.S;
    Tensor xhat = Tensor::empty(Shape{G.planes() * S}, dt), prod = Tensor::empty(Shape{G.planes() * S}, dt);
    T *ph = kern::out_ptr<T>(xhat), *pp = kern::out_ptr<T>(prod);
    for_elements(G, [&](std::int64_t c, std::int64_t i) {
      ph[i] = kern::canon((px[i] - pm[c]) * pr[c]);
      pp[i] = kern::canon(pg[i] * ph[i]);
    });
    std::vector<T> part(static_cast<std::size_t>(G.planes())), sg(static_cast<std::size_t>(C)), sgx(static_cast<std::size_t>(C));
    // sg, sgx: this process's rows (dbeta, dgamma; the whole batch's without an exchange);
    // wg, wgx: the whole batch's (dx), from the exchange when x was a part of the batch
    std::vector<T> wg, wgx;
    if (!s.exchanged) {
      two_stages(pg, G, part.data(), sg.data());
      two_stages(pp, G, part.data(), sgx.data());
    } else {
      BatchStatsExchange* ex = batch_stats_exchange();
      BITGRAD_CHECK(ex && ex->total() == s.total && ex->rows() == G.N, "batch_norm",
                    "the forward normalised ", G.N, " samples with the statistics of a batch of ", s.total,
                    " over ranks; its backward must run in the same step, with the same batch-statistics exchange");
      // per sample and channel: [sum of g | sum of g * xhat] (S = 1: the values themselves), one gather
      const std::int64_t P = G.planes();
      std::vector<T> mine(static_cast<std::size_t>(2 * P)), all(static_cast<std::size_t>(2 * s.total * C));
      std::vector<T> part2(static_cast<std::size_t>(P));
      const T *qg = pg, *qp = pp;
      if (S != 1) {
        kern::active<T>().sum_rows(pg, P, S, part.data());
        kern::active<T>().sum_rows(pp, P, S, part2.data());
        qg = part.data();
        qp = part2.data();
      }
      for (std::int64_t r = 0; r < G.N; ++r)
        for (std::int64_t c = 0; c < C; ++c) {
          mine[static_cast<std::size_t>(r * 2 * C + c)] = qg[r * C + c];
          mine[static_cast<std::size_t>(r * 2 * C + C + c)] = qp[r * C + c];
        }
      ex->gather(mine.data(), 2 * C * static_cast<std::int64_t>(sizeof(T)), all.data(), "batch_norm's gradient sums");
      std::vector<T> ag(static_cast<std::size_t>(s.total * C)), agx(static_cast<std::size_t>(s.total * C));
      for (std::int64_t r = 0; r < s.total; ++r)
        for (std::int64_t c = 0; c < C; ++c) {
          ag[static_cast<std::size_t>(r * C + c)] = all[static_cast<std::size_t>(r * 2 * C + c)];
          agx[static_cast<std::size_t>(r * C + c)] = all[static_cast<std::size_t>(r * 2 * C + C + c)];
        }
      wg.resize(static_cast<std::size_t>(C));
      wgx.resize(static_cast<std::size_t>(C));
      kern::active<T>().sum_cols(ag.data(), s.total, C, wg.data());
      kern::active<T>().sum_cols(agx.data(), s.total, C, wgx.data());
      kern::active<T>().sum_cols(qg, G.N, C, sg.data());  // this node's own sums: the combine adds the nodes
      kern::active<T>().sum_cols(qp, G.N, C, sgx.data());
    }
    const T* psg = s.exchanged ? wg.data() : sg.data();
    const T* psgx = s.exchanged ? wgx.data() : sgx.data();
    if (n.in[0].needs_grad()) {
      Tensor dx = Tensor::empty(n.in_shape[0], dt);
      T* pd = kern::out_ptr<T>(dx);
      std::vector<T> k(static_cast<std::size_t>(C)), a(static_cast<std::size_t>(C)), b(static_cast<std::size_t>(C));
      const T Mt = static_cast<T>(s.total * S);
      for (std::int64_t c = 0; c < C; ++c) {
        k[c] = kern::canon(pga ? pga[c] * pr[c] : pr[c]);
        a[c] = kern::canon(psg[c] / Mt);
        b[c] = kern::canon(psgx[c] / Mt);
      }
      if (s.training) {
        const T *pk = k.data(), *pa = a.data(), *pb = b.data();
        for_elements(G, [&](std::int64_t c, std::int64_t i) { pd[i] = kern::canon(pk[c] * ((pg[i] - pa[c]) - ph[i] * pb[c])); });
      } else {
        const T* pk = k.data();
        for_elements(G, [&](std::int64_t c, std::int64_t i) { pd[i] = kern::canon(pk[c] * pg[i]); });
      }
      gi[0] = dx;
    }
    if (n.n_inputs > 1 && n.in[1].needs_grad()) gi[1] = Tensor::from<T>(sgx, Shape{C});
    if (n.n_inputs > 2 && n.in[2].needs_grad()) gi[2] = Tensor::from<T>(sg, Shape{C});
    // per sample, then the batch rule over this node's samples (two_stages, or the node's own sums)
    if (n.n_inputs > 1) autograd::SampleCountCheck::summed(gi[1], G.N);
    if (n.n_inputs > 2) autograd::SampleCountCheck::summed(gi[2], G.N);
  });
}

void check_channels(const char* what, const Tensor& t, const Tensor& x, std::int64_t C) {
  if (!t.defined()) return;
  ops::check_same_dtype("batch_norm", x, t);
  BITGRAD_CHECK(t.ndim() == 1 && t.shape()[0] == C, "batch_norm", what, " must be [", C, "] for input ", x.shape().str(), ", got ",
                t.shape().str());
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& gamma, const Tensor& beta,
                  bool training, double momentum, double eps, CallSite site) {
  ops::check_float("batch_norm", x);
  BITGRAD_CHECK(x.ndim() >= 2, "batch_norm", "expects x [N, C] or [N, C, *spatial], got ", x.shape().str());
  const std::int64_t N = x.shape()[0], C = x.shape()[1];
  BITGRAD_CHECK(C > 0, "batch_norm", "the channel dimension is empty (shape ", x.shape().str(), ")");
  check_channels("gamma", gamma, x, C);
  check_channels("beta", beta, x, C);
  check_channels("running_mean", running_mean, x, C);
  check_channels("running_var", running_var, x, C);
  BITGRAD_CHECK(running_mean.defined() == running_var.defined(), "batch_norm",
                "running_mean and running_var must be given together (one is missing)");
  BITGRAD_CHECK(training || running_mean.defined(), "batch_norm", "evaluation mode needs running_mean and running_var");
  BITGRAD_CHECK(eps >= 0, "batch_norm", "eps must be >= 0, got ", eps);
  BITGRAD_CHECK(momentum >= 0 && momentum <= 1, "batch_norm", "momentum must be in [0, 1], got ", momentum);
  const BnGeom G{N, C, x.numel() / (N * C > 0 ? N * C : 1)};
  BatchStatsExchange* ex = training ? exchange_for(x, N) : nullptr;
  const std::int64_t total = ex ? ex->total() : N;  // samples of the whole batch
  BITGRAD_CHECK(!training || total * G.S > 1, "batch_norm", "training needs more than one value per channel, got input ",
                x.shape().str(), ex ? " (" + std::to_string(total) + " samples over ranks)" : std::string());
  Tensor xc = kern::contiguous(x);
  Tensor gc = gamma.defined() ? kern::contiguous(gamma) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty(Shape{C}, x.dtype()), rstd = Tensor::empty(Shape{C}, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "batch_norm", T, [&] {
    const T* px = xc.data<T>();
    T *pm = kern::out_ptr<T>(mean), *pr = kern::out_ptr<T>(rstd), *py = kern::out_ptr<T>(y);
    const T teps = static_cast<T>(eps);
    const std::int64_t S = G.S;
    if (training) {
      std::vector<T> part(static_cast<std::size_t>(G.planes())), s1(static_cast<std::size_t>(C)), s2(static_cast<std::size_t>(C));
      if (!ex) {
        two_stages(px, G, part.data(), s1.data());
      } else {  // the first stage here, the batch rule over every rank's samples
        if (S != 1) kern::active<T>().sum_rows(px, G.planes(), S, part.data());
        batch_sums(ex, S == 1 ? px : part.data(), N, C, s1.data(), "batch_norm's sums of x");
      }
      const T Mt = static_cast<T>(total * S);
      for (std::int64_t c = 0; c < C; ++c) pm[c] = kern::canon(s1[c] / Mt);
      // d = x - mean into y's memory; the sum of squares reads it, the output overwrites it
      for_elements(G, [&](std::int64_t c, std::int64_t i) { py[i] = kern::canon(px[i] - pm[c]); });
      if (S == 1) {  // fma(d, d, +0) is d * d rounded once
        for (std::int64_t i = 0; i < G.planes(); ++i) part[static_cast<std::size_t>(i)] = kern::canon(py[i] * py[i]);
      } else {
        kern::active<T>().sumsq_rows(py, nullptr, G.planes(), S, part.data());
      }
      batch_sums(ex, part.data(), N, C, s2.data(), "batch_norm's sums of squares");
      for (std::int64_t c = 0; c < C; ++c) pr[c] = kern::canon(T(1) / std::sqrt(s2[c] / Mt + teps));
      if (running_mean.defined()) {  // no graph: buffers, updated in place
        const T mo = static_cast<T>(momentum), keep = static_cast<T>(1.0 - momentum), M1 = static_cast<T>(total * S - 1);
        Tensor rm = running_mean, rv = running_var;
        T *qm = rm.mutable_data<T>(), *qv = rv.mutable_data<T>();
        for (std::int64_t c = 0; c < C; ++c) {
          qm[c] = kern::canon(mo * pm[c] + keep * qm[c]);
          qv[c] = kern::canon(mo * (s2[c] / M1) + keep * qv[c]);
        }
      }
    } else {
      Tensor rm = kern::contiguous(running_mean), rv = kern::contiguous(running_var);
      const T *qm = rm.data<T>(), *qv = rv.data<T>();
      for (std::int64_t c = 0; c < C; ++c) {
        pm[c] = qm[c];  // a copy
        pr[c] = kern::canon(T(1) / std::sqrt(qv[c] + teps));
      }
      for_elements(G, [&](std::int64_t c, std::int64_t i) { py[i] = kern::canon(px[i] - pm[c]); });
    }
    const T* pga = gc.defined() ? gc.data<T>() : nullptr;
    Tensor bc = beta.defined() ? kern::contiguous(beta) : Tensor();
    const T* pbe = bc.defined() ? bc.data<T>() : nullptr;
    if (pga && pbe) for_elements(G, [&](std::int64_t c, std::int64_t i) { py[i] = kern::canon((py[i] * pr[c]) * pga[c] + pbe[c]); });
    else if (pga) for_elements(G, [&](std::int64_t c, std::int64_t i) { py[i] = kern::canon((py[i] * pr[c]) * pga[c]); });
    else if (pbe) for_elements(G, [&](std::int64_t c, std::int64_t i) { py[i] = kern::canon(py[i] * pr[c] + pbe[c]); });
    else for_elements(G, [&](std::int64_t c, std::int64_t i) { py[i] = kern::canon(py[i] * pr[c]); });
  });
  std::vector<Tensor> in{x};
  if (gamma.defined() || beta.defined()) in.push_back(gamma.defined() ? gamma : Tensor::zeros(Shape{C}, x.dtype()));
  if (beta.defined()) in.push_back(beta);
  if (Node* n = ops::record("batch_norm", batch_norm_bw, in, y, site)) {
    n->save(0, xc);
    if (gc.defined()) n->save(1, gc);
    n->save(2, mean);
    n->save(3, rstd);
    n->set_payload(BatchNormSaved{G, training, total, ex != nullptr});
  }
  return y;
}

}  // namespace bitgrad
