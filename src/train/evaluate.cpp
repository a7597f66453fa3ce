// Evaluation-mode forward passes of a session: the test set's accuracy and loss, and predict.
#include <algorithm>

#include "bitgrad/autograd.hpp"
#include "train/session_parts.hpp"
#include "train/step_loss.hpp"

namespace bitgrad::train {

Tensor Session::predict(const Tensor& x) const {
  NoGradGuard ng;
  return p_->state.model->forward(x, context(false, 0, 0));
}

Eval Session::evaluate() const {
  NoGradGuard ng;
  PerturbScope ps(p_->perturb, -1);
  const data::Dataset& ds = *p_->test_ds;
  data::LoaderOptions lo;
  lo.batch_size = std::min<std::int64_t>(p_->cfg.eval.batch_size, ds.size());
  lo.shuffle = false;
  lo.drop_last = false;
  data::DataLoader l(p_->test_ds, lo);
  std::int64_t correct = 0, total = 0, positions = 0;
  double loss_sum = 0, weight = 0;  // weight: W of the weighted cross_entropy (numerics.md §41)
  const bool cls = ds.num_classes() > 0;
  const TrainConfig& t = p_->cfg.train;
  for (std::int64_t i = 0; i < l.batches_per_epoch(); ++i) {
    data::Batch batch = l.next();
    Tensor out = p_->state.model->forward(batch.x, context(false, 0, 0));
    const std::int64_t n = batch.x.shape()[0];
    if (cls) {
      loss_sum += train::loss_sum(t, out, batch.y).item();
      if (divides_by_target_weight(t)) weight += target_weight(t, batch.y, out.dtype());
      Tensor pred = argmax(out, out.ndim() - 1);  // [N], or [N, T] for sequences
      const std::int64_t* pp = pred.data<std::int64_t>();
      const std::int64_t* y = batch.y.data<std::int64_t>();
      for (std::int64_t j = 0; j < pred.numel(); ++j) correct += pp[j] == y[j];
      positions += pred.numel();
    } else {
      loss_sum += train::loss_sum(t, out, batch.y).item();
    }
    total += n;
  }
  Eval e;
  e.loss = divides_by_target_weight(t) ? loss_sum / weight : loss_sum / static_cast<double>(total * p_->divisor);
  if (cls) e.accuracy = static_cast<double>(correct) / static_cast<double>(positions);
  return e;
}

}  // namespace bitgrad::train
