// Optimizers: elementwise updates in a fixed operation order (docs/numerics.md §17), run by the
// kernel table (sgd_update, adam_update) with the coefficients rounded here.
#include <sstream>

#include "bitgrad/autograd.hpp"
#include "bitgrad/math.hpp"
#include "bitgrad/optim.hpp"
#include "kernels/kernels.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::optim {

Optimizer::Optimizer(NamedTensors params) : params_(std::move(params)) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    BITGRAD_CHECK(p.defined() && is_floating(p.dtype()), "optimizer", "parameter '", name, "' is not a floating tensor");
    BITGRAD_CHECK(p.is_contiguous(), "optimizer", "parameter '", name, "' must be contiguous");
    // one tensor listed twice would be stepped twice per step: refused, naming both
    for (std::size_t j = 0; j < i; ++j) {
      const Tensor& q = params_[j].second;
      BITGRAD_CHECK(!(q.impl().storage == p.impl().storage && q.offset() == p.offset()), "optimizer", "parameter '", name,
                    "' is the same tensor as parameter '", params_[j].first, "' (listed twice, it would be updated twice per step)");
    }
  }
}

NamedTensors Optimizer::make_buffers(const std::string& prefix) const {
  NamedTensors b;
  for (const auto& [name, p] : params_) b.emplace_back(prefix + name, Tensor::zeros(p.shape(), p.dtype()));
  return b;
}

void Optimizer::step(double lr) {
  NoGradGuard ng;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i].second;
    Tensor g = p.grad();
    if (!g.defined()) continue;
    update(i, p, kern::contiguous(g), lr);
  }
  ++steps_;
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

void Optimizer::load_state(const NamedTensors& state, std::int64_t steps) {
  NamedTensors& mine = mutable_state();
  for (auto& [name, buf] : mine) {
    const Tensor* src = nullptr;
    for (const auto& [n, t] : state)
      if (n == name) src = &t;
    BITGRAD_CHECK(src, "optimizer state", "missing entry '", name, "'");
    BITGRAD_CHECK(src->shape() == buf.shape() && src->dtype() == buf.dtype(), "optimizer state", "entry '", name, "' is ",
                  dtype_name(src->dtype()), " ", src->shape().str(), ", expected ", dtype_name(buf.dtype()), " ", buf.shape().str());
    buf.copy_from(*src);
  }
  BITGRAD_CHECK(state.size() == mine.size(), "optimizer state", "has ", state.size(), " entries, expected ", mine.size());
  steps_ = steps;
}

// ---- SGD: g' = g + wd*p; v = m*v + g'; d = nesterov ? g' + m*v : v (or g' without momentum);
//      p = p - lr*d ------------------------------------------------------------------------
Sgd::Sgd(NamedTensors params, SgdOptions o) : Optimizer(std::move(params)), o_(o) {
  BITGRAD_CHECK(o.momentum >= 0 && o.weight_decay >= 0, "sgd", "momentum and weight_decay must be >= 0");
  BITGRAD_CHECK(!o.nesterov || o.momentum > 0, "sgd", "nesterov needs momentum > 0");
  if (o_.momentum != 0) velocity_ = make_buffers("momentum.");
}

std::string Sgd::describe() const {
  std::ostringstream os;
  os << "SGD(momentum=" << o_.momentum << ", nesterov=" << (o_.nesterov ? "true" : "false") << ", weight_decay=" << o_.weight_decay
     << ")";
  return os.str();
}

void Sgd::update(std::size_t i, Tensor& p, const Tensor& g, double lr) {
  BITGRAD_DISPATCH_FLOAT(p.dtype(), "sgd", T, [&] {
    T* pv = o_.momentum != 0 ? velocity_[i].second.mutable_data<T>() : nullptr;
    kern::SgdCoef<T> c;
    c.lr = static_cast<T>(lr), c.momentum = static_cast<T>(o_.momentum), c.wd = static_cast<T>(o_.weight_decay);
    c.decay = o_.weight_decay != 0, c.nesterov = o_.nesterov;
    kern::active<T>().sgd_update(p.mutable_data<T>(), g.data<T>(), pv, p.numel(), c);
  });
}

// ---- Adam / AdamW: t = steps + 1; c1 = lr / (1 - b1^t), s2 = sqrt(1 - b2^t) (f64);
//      Adam: g' = g + wd*p; AdamW: p = p * (1 - lr*wd);
//      m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*(g'*g'); p = p - c1*(m / (sqrt(v)/s2 + eps)) ----
Adam::Adam(NamedTensors params, AdamOptions o) : Optimizer(std::move(params)), o_(o) {
  BITGRAD_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "adam", "betas must be in [0, 1), got ", o.beta1, " and ",
                o.beta2);
  BITGRAD_CHECK(o.eps > 0 && o.weight_decay >= 0, "adam", "eps must be > 0 and weight_decay >= 0");
  all_ = make_buffers("exp_avg.");
  NamedTensors sq = make_buffers("exp_avg_sq.");
  all_.insert(all_.end(), sq.begin(), sq.end());
}

std::string Adam::describe() const {
  std::ostringstream os;
  os << (o_.decoupled ? "AdamW" : "Adam") << "(beta1=" << o_.beta1 << ", beta2=" << o_.beta2 << ", eps=" << o_.eps
     << ", weight_decay=" << o_.weight_decay << (o_.decay_matrices_only ? " on matrices" : "") << ")";
  return os.str();
}

NamedTensors Adam::state() const { return all_; }

void Adam::update(std::size_t i, Tensor& p, const Tensor& g, double lr) {
  const double t = static_cast<double>(steps_ + 1);
  const double c1 = lr / (1.0 - math::pow(o_.beta1, t));
  const double s2 = math::sqrt(1.0 - math::pow(o_.beta2, t));
  const std::size_t n = params_.size();
  BITGRAD_DISPATCH_FLOAT(p.dtype(), "adam", T, [&] {
    kern::AdamCoef<T> c;
    c.b1 = static_cast<T>(o_.beta1), c.b2 = static_cast<T>(o_.beta2);
    c.ob1 = static_cast<T>(1.0 - o_.beta1), c.ob2 = static_cast<T>(1.0 - o_.beta2);
    c.c1 = static_cast<T>(c1), c.s2 = static_cast<T>(s2), c.eps = static_cast<T>(o_.eps);
    c.wd = static_cast<T>(o_.weight_decay), c.shrink = static_cast<T>(1.0 - lr * o_.weight_decay);
    c.decay = o_.weight_decay != 0 && !(o_.decay_matrices_only && p.ndim() < 2), c.decoupled = o_.decoupled;
    kern::active<T>().adam_update(p.mutable_data<T>(), g.data<T>(), all_[i].second.mutable_data<T>(),
                                  all_[n + i].second.mutable_data<T>(), p.numel(), c);
  });
}

// ---- schedules ------------------------------------------------------------------------------
double Schedule::at(std::int64_t step) const {
  double base = lr;
  switch (kind) {
    case Kind::constant: break;
    case Kind::step: base = lr * math::pow(gamma, static_cast<double>(step / (step_size > 0 ? step_size : 1))); break;
    case Kind::cosine: {
      const double T = static_cast<double>(total_steps > 0 ? total_steps : 1);
      const double s = static_cast<double>(step < total_steps ? step : total_steps);
      base = min_lr + (lr - min_lr) * (0.5 * (1.0 + math::cos(3.141592653589793 * (s / T))));
      break;
    }
  }
  if (step < warmup_steps) base = base * (static_cast<double>(step + 1) / static_cast<double>(warmup_steps));
  return base;
}

std::string Schedule::describe() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::constant: os << "constant(lr=" << lr << ")"; break;
    case Kind::step: os << "step(lr=" << lr << ", gamma=" << gamma << ", every " << step_size << ")"; break;
    case Kind::cosine: os << "cosine(lr=" << lr << " -> " << min_lr << " over " << total_steps << ")"; break;
  }
  if (warmup_steps > 0) os << " + linear warm-up " << warmup_steps;
  return os.str();
}

// ---- gradient clipping ------------------------------------------------------------------------
double grad_norm(const std::vector<Tensor>& params) {
  kern::PairwiseStack<double> st;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor gc = kern::contiguous(g);
    double s = 0;
    BITGRAD_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm", T, [&] {
      T v = T(0);
      kern::active<T>().sumsq_rows(gc.data<T>(), nullptr, 1, gc.numel(), &v);
      s = static_cast<double>(v);
    });
    st.push(s);
  }
  return math::sqrt(st.total());
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  BITGRAD_CHECK(max_norm > 0, "clip_grad_norm", "max_norm must be > 0, got ", max_norm);
  const double norm = grad_norm(params);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    NoGradGuard ng;
    for (const Tensor& p : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      BITGRAD_DISPATCH_FLOAT(g.dtype(), "clip_grad_norm", T, [&] {
        T* pg = g.mutable_data<T>();
        const T c = static_cast<T>(coef);
        // pg[k] * c rounded, in place: the elementwise kernel on the CPU's vector units
        kern::active<T>().binary(kern::Binary::mul, kern::Bcast::col, pg, &c, pg, 1, g.numel());
      });
    }
  }
  return norm;
}

}  // namespace bitgrad::optim
