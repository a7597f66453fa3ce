// The training loss of [train] loss (numerics.md §18, §41). Every loss here is a per-sample sum
// reduced by the batch rule (the ops' Reduction::sum, numerics.md §9 and §30), so the step can
// divide once by a divisor of the whole batch and micro-batches give the bits of one (T5).
#include "train/step_loss.hpp"

#include "bitgrad/autograd.hpp"
#include "bitgrad/error.hpp"
#include "bitgrad/ops.hpp"

namespace bitgrad::train {

bool cross_entropy_options(const TrainConfig& t) {
  return t.loss == LossKind::cross_entropy && (t.label_smoothing != 0 || !t.class_weights.empty() || t.ignore_index != -100);
}

bool divides_by_target_weight(const TrainConfig& t) {
  return t.loss == LossKind::cross_entropy && (!t.class_weights.empty() || t.ignore_index != -100);
}

namespace {
Tensor class_weights(const TrainConfig& t, DType dtype) {
  if (t.class_weights.empty()) return Tensor();
  const Tensor w = Tensor::from<double>(t.class_weights, Shape{static_cast<std::int64_t>(t.class_weights.size())});
  return dtype == DType::f64 ? w : w.cast(dtype);
}
}  // namespace

Tensor loss_sum(const TrainConfig& t, const Tensor& out, const Tensor& y) {
  switch (t.loss) {
    case LossKind::cross_entropy: {
      if (!cross_entropy_options(t)) return cross_entropy_sample_means(out, y);  // §9: the bits of every run before the options
      // token labels [N, T] with logits [N, T, V]: the classes to axis 1, as the op (and PyTorch) take them
      const Tensor logits = out.ndim() == 3 ? transpose(out, 1, 2) : out;
      return softmax_cross_entropy(logits, y, class_weights(t, out.dtype()), t.ignore_index, t.label_smoothing, Reduction::sum);
    }
    case LossKind::mse: return mse_loss(reshape(out, y.shape()), y, Reduction::sum);
    case LossKind::l1: return l1_loss(reshape(out, y.shape()), y, Reduction::sum);
    case LossKind::smooth_l1: return smooth_l1_loss(reshape(out, y.shape()), y, Reduction::sum, t.beta);
    case LossKind::huber: return huber_loss(reshape(out, y.shape()), y, Reduction::sum, t.delta);
    case LossKind::bce_with_logits: return binary_cross_entropy_with_logits(reshape(out, y.shape()), y, Tensor(), Tensor(), Reduction::sum);
  }
  throw Error("train: unknown loss");
}

double target_weight(const TrainConfig& t, const Tensor& y, DType dtype) {
  NoGradGuard ng;
  BITGRAD_CHECK(y.dtype() == DType::i64 && y.ndim() >= 1, "train", "the targets of a weighted cross_entropy must be class labels [N, ...], got ",
                y.shape().str());
  const std::int64_t n = y.numel(), C = static_cast<std::int64_t>(t.class_weights.size());
  const std::vector<std::int64_t> yp = y.to_vector<std::int64_t>();
  std::vector<double> wp(static_cast<std::size_t>(n), 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    if (yp[static_cast<std::size_t>(i)] == t.ignore_index) continue;  // +0
    if (C == 0) {
      wp[static_cast<std::size_t>(i)] = 1;
      continue;
    }
    BITGRAD_CHECK(yp[static_cast<std::size_t>(i)] >= 0 && yp[static_cast<std::size_t>(i)] < C, "train", "target ", yp[static_cast<std::size_t>(i)], " is not a class of the ", C, " class_weights");
    wp[static_cast<std::size_t>(i)] = t.class_weights[static_cast<std::size_t>(yp[static_cast<std::size_t>(i)])];
  }
  // the weights rounded to the dtype first, as the loss multiplies by them
  const Tensor w = Tensor::from<double>(wp, y.shape());
  const Tensor wd = dtype == DType::f64 ? w : w.cast(dtype);
  const std::int64_t N = y.shape()[0];
  return sum(reshape(wd, Shape{N, N ? n / N : 0})).cast(DType::f64).item();
}

}  // namespace bitgrad::train
