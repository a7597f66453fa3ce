// The training loss a configuration names ([train] loss and its options; numerics.md §18, §41):
// its sum over the samples of a (micro-)batch, and what the whole batch's sum is divided by.
#pragma once

#include "bitgrad/train.hpp"

namespace bitgrad::train {

// cross_entropy with label smoothing, class weights or an ignore_index (the op of numerics.md
// §30 instead of §9's cross_entropy, which every configuration without them keeps).
bool cross_entropy_options(const TrainConfig& t);

// Whether the batch's loss is divided by W (target_weight) rather than by the batch size times
// the values per sample: cross_entropy with class weights or an ignore_index (PyTorch's mean).
bool divides_by_target_weight(const TrainConfig& t);

// The loss of `out` (the model's output) against `y`, summed per sample and then by the batch
// rule over the samples, so micro-batches of whole 32-sample blocks combine to the batch's bits (T5).
Tensor loss_sum(const TrainConfig& t, const Tensor& out, const Tensor& y);

// W of the targets `y` (the whole optimizer batch): the weight of each target (its class weight,
// 1 without weights, 0 where ignored) summed per sample (row rule), then by the batch rule, in
// `dtype` — the reduction the loss's own sum uses, so W is the one PyTorch divides by.
double target_weight(const TrainConfig& t, const Tensor& y, DType dtype);

}  // namespace bitgrad::train
