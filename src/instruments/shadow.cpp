// --shadow f64: a float64 twin of the run (numerics.md §26). It starts from the run's own
// weights, optimizer state and loader position widened exactly to f64, trains on the same
// batches with the same dropout masks (drawn as the f32 run draws them) and the same schedule,
// in f64 and without mixed-precision rounding or loss scaling, one step after each of the run's.
// After every step the relative distance ||p - p64|| / ||p64|| of every parameter and of all of
// them together (in f64, element order) goes into the step's metrics record as "shadow".
#include <cmath>
#include <optional>

#include "instruments/shadow.hpp"

namespace bitgrad::instruments {

void ShadowRun::begin(const store::RunDir* dir, train::Session& session, std::int64_t start) {
  if (!dir) return;  // a data-parallel run: rank 0 alone runs the twin, on whole batches
  main_ = &session;
  train::Config c = session.config();
  c.train.precision = Precision::fp32;
  c.train.stochastic_rounding = false;
  c.train.loss_scale = 1;
  twin_.emplace(c, session.train_data_ptr(), session.test_data_ptr(), 0, std::nullopt, nullptr, DType::f64);
  store::Checkpoint ck;  // the run as it stands (step 0, or the checkpoint it resumed from)
  auto widen = [](const Tensor& t) { return is_floating(t.dtype()) ? t.cast(DType::f64) : t.contiguous_copy(); };
  for (const auto& [n, p] : session.model_state()) ck.params.emplace_back(n, widen(p));  // parameters, then buffers
  for (const auto& [n, t] : session.optimizer().state()) ck.optimizer.emplace_back(n, widen(t));
  ck.info = session.checkpoint_info(start, "");
  twin_->restore(ck, "the run's state");
}

void ShadowRun::end_step(std::int64_t step, const train::Session&, const train::Session::StepOut&) {
  if (!twin_) return;
  const auto t0 = std::chrono::steady_clock::now();
  train::Session::StepOut so;
  {
    autograd::OpHookPause pause;  // op traces and anomaly detection watch the run, not its twin
    so = twin_->step(step - 1);
  }
  store::Json params = store::Json::object();
  double d2_all = 0, n2_all = 0;
  const optim::NamedTensors& a = main_->params();
  const optim::NamedTensors& b = twin_->params();
  for (std::size_t i = 0; i < a.size(); ++i) {
    Tensor x = a[i].second.cast(DType::f64), y = b[i].second.contiguous_copy();
    const double *px = x.data<double>(), *py = y.data<double>();
    double d2 = 0, n2 = 0;
    for (std::int64_t k = 0; k < x.numel(); ++k) {
      const double d = px[k] - py[k];
      d2 += d * d;
      n2 += py[k] * py[k];
    }
    d2_all += d2;
    n2_all += n2;
    params[a[i].first] = n2 > 0 ? std::sqrt(d2 / n2) : (d2 > 0 ? INFINITY : 0.0);
  }
  pending_ = store::Json{{"distance", n2_all > 0 ? std::sqrt(d2_all / n2_all) : (d2_all > 0 ? INFINITY : 0.0)},
                         {"loss", so.loss},
                         {"params", std::move(params)}};
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ShadowRun::add_metrics(std::int64_t, store::Json& record) {
  if (!pending_.is_null()) record["shadow"] = std::move(pending_);
  pending_ = nullptr;
}

}  // namespace bitgrad::instruments
