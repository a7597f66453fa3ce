// What a train::Session (bitgrad/session.hpp) holds, by responsibility; its methods are in files
// named for what they do:
//   session.cpp             building the parts from a configuration; the accessors
//   step.cpp                the canonical optimizer step (micro-batches, the reducer, the update)
//   evaluate.cpp            evaluation and prediction
//   session_checkpoint.cpp  the state to and from checkpoints; the fingerprint
// and its parts in files of their own: model_state.hpp (model, parameters, optimizer,
// schedule), loss_scaler.hpp (numerics.md §25), grad_reducer.hpp (where gradients go),
// batch_gather.hpp (data parallel: the batch on rank 0), memory.hpp (the memory check).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bitgrad/onnx.hpp"
#include "bitgrad/session.hpp"
#include "dist/comm.hpp"
#include "dist/plan.hpp"
#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"
#include "store/checkpoint.hpp"
#include "train/grad_reducer.hpp"
#include "train/loss_scaler.hpp"
#include "train/model_state.hpp"

namespace bitgrad::train {

struct Session::Parts {
  Parts(const Config& c, std::shared_ptr<data::Dataset> tr, std::shared_ptr<data::Dataset> te, std::optional<std::uint64_t> p,
        dist::Comm* cm, DType dtype)
      : cfg(c), train_ds(std::move(tr)), test_ds(std::move(te)), scaler(c.train), perturb(p), param_dtype(dtype), comm(cm),
        reducer(std::make_unique<TreeGradReducer>(cm)) {}

  Config cfg;  // accumulate may change between segments (set_segment)

  // the data: datasets and the training loader
  std::shared_ptr<data::Dataset> train_ds, test_ds;
  std::unique_ptr<data::DataLoader> loader;
  std::int64_t batches_per_epoch = 0, planned = 0;

  // the model and optimizer state; loss scaling
  ModelState state;
  LossScaler scaler;

  // how the step runs
  std::int64_t divisor = 1;  // values per sample the loss is averaged over (mse: the target size)
  std::optional<std::uint64_t> perturb;
  std::function<void()> before_update;
  DType param_dtype = DType::f32;

  // the ranks (data parallel): null comm for one process
  dist::Comm* comm = nullptr;
  // how a batch is split over the ranks: one node per rank for batch norm (its statistics are
  // exchanged over the ranks in the step, dist/batch_stats_gather.hpp)
  dist::Sharding sharding = dist::Sharding::even;
  // an imported graph: where its samples go (numerics §42); per_block: a piece is one leaf
  std::optional<onnx::SampleAnalysis> samples;
  bool per_block = false;
  std::vector<std::string> hosts;
  std::unique_ptr<GradReducer> reducer;
};

// Sets this thread's order perturbation for a scope (a step, an evaluation) and gives back
// what it found: seed, step and count of calls (an evaluation inside a perturbed step leaves
// the step perturbed, its call count where it was).
struct PerturbScope {
  PerturbScope(const std::optional<std::uint64_t>& p, std::int64_t step) : saved_(kern::current_backend().perturb) {
    kern::set_perturbation(p.has_value(), p.value_or(0));
    kern::perturb_step(static_cast<std::uint64_t>(step));
  }
  ~PerturbScope() {
    kern::Backend& b = kern::current_backend();
    b.perturb = saved_;
    b.resolve();
  }
  PerturbScope(const PerturbScope&) = delete;
  PerturbScope& operator=(const PerturbScope&) = delete;

 private:
  kern::Backend::Perturb saved_;
};

}  // namespace bitgrad::train
