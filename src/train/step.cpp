// The canonical optimizer step:
//   batch = loader.next(); split into micro-batches of m = batch_size / accumulate rows (a
//   short last batch: ceil(rows / m) of them, the last one shorter);
//   for each: forward (row_offset = its first row), S = loss summed over its samples (batch
//   rule), backward of S / divisor (divisor = batch size x target size, or a weighted
//   cross_entropy's W, the same for every micro-batch); the micro-batches' parameter gradients
//   and their S are combined by the pairwise tree; loss = S_total / divisor; [clip]; optimizer
//   step with lr = schedule(step).
// A micro-batch of a power-of-two number of 32-sample blocks is a complete subtree of the
// batch's canonical tree, so accumulate = k gives the bits of accumulate = 1 (contract T5).
#include <algorithm>
#include <cmath>
#include <optional>

#include "dist/batch_stats_gather.hpp"
#include "train/batch_gather.hpp"
#include "train/dist_sync.hpp"
#include "train/session_parts.hpp"
#include "train/step_loss.hpp"

namespace bitgrad::train {

Session::StepOut Session::step(std::int64_t s) {
  Parts& p = *p_;
  const Config& cfg = p.cfg;
  PerturbScope ps(p.perturb, s);
  p.state.optimizer->zero_grad();
  StepOut r;
  r.batch = p.loader->next();
  r.lr = p.state.schedule.at(s);
  const Tensor bx = r.batch.x, by = r.batch.y;  // this rank's shard
  const std::int64_t B = r.batch.rows;         // the whole batch, over every rank
  // this rank's nodes of the batch tree, each in pieces of at most the micro-batch size (the
  // short last batch of an epoch gets fewer, its last one shorter): each whole piece stays an
  // aligned subtree of the batch rule
  const dist::StepLayout layout = dist::step_layout(B, cfg.train.batch_size, cfg.train.accumulate, world(), p.sharding, p.per_block);
  const dist::Range mine = layout.rows_of(rank());
  BITGRAD_CHECK(mine.begin == r.batch.first && mine.size() == bx.shape()[0], "train", "the loader's shard [", r.batch.first, ", ",
                r.batch.first + bx.shape()[0], ") is not the layout's [", mine.begin, ", ", mine.end, ")");
  // what the batch's loss sum is divided by: B x the values per target, or for a weighted
  // cross_entropy W, the weight of the whole batch's targets (numerics.md §41), known before any
  // micro-batch (every rank computes it from every rank's labels)
  const bool by_weight = divides_by_target_weight(cfg.train);
  const double denom = by_weight ? target_weight(cfg.train, p.comm ? gather_labels(*p.comm, layout, by) : by, p.param_dtype)
                                 : static_cast<double>(B * p.divisor);
  const float fdenom = by_weight ? static_cast<float>(denom) : static_cast<float>(B * p.divisor);
  if (p.comm) gather_batch_on_root(*p.comm, layout, r.batch);  // rank 0's step record names the whole batch
  // batch norm over ranks: its statistics are the whole batch's, gathered from every rank that
  // holds samples (each holds one node: one forward and one backward); a nested step (the f64
  // shadow's) installs its own, none
  std::optional<dist::RankBatchStats> stats;
  if (p.comm && p.sharding == dist::Sharding::whole_nodes) {
    std::vector<dist::Range> rows;
    for (int q = 0; q < world(); ++q) rows.push_back(layout.rows_of(q));
    stats.emplace(*p.comm, std::move(rows));
  }
  BatchStatsScope stats_scope(stats ? &*stats : nullptr);
  const optim::NamedTensors& params = p.state.params;
  std::vector<Tensor> tensors;
  for (const auto& [name, t] : params) tensors.push_back(t);
  p.reducer->begin(params, layout, rank());
  for (const dist::Range& node : layout.nodes[static_cast<std::size_t>(rank())]) {
    const std::int64_t n1 = layout.row_of(node.end);
    for (std::int64_t r0 = layout.row_of(node.begin); r0 < n1; r0 += layout.piece_rows) {
      const std::int64_t r1 = std::min(n1, r0 + layout.piece_rows);
      const nn::Context ctx = context(true, s, r0);
      const bool whole = r0 == mine.begin && r1 == mine.end;
      Tensor x = whole ? bx : slice(bx, 0, r0 - mine.begin, r1 - mine.begin);
      Tensor y = whole ? by : slice(by, 0, r0 - mine.begin, r1 - mine.begin);
      if (p.param_dtype != DType::f32) {  // the shadow: the same inputs, widened exactly
        if (x.dtype() == DType::f32) x = x.cast(p.param_dtype);
        if (y.dtype() == DType::f32) y = y.cast(p.param_dtype);
      }
      Tensor out = p.state.model->forward(x, ctx);
      Tensor S = loss_sum(cfg.train, out, y);  // per sample, then the batch rule
      const float s_value = static_cast<float>(S.item());
      Tensor L = div(S, denom);
      if (p.scaler.log2() != 0) L = mul(L, std::ldexp(1.0, p.scaler.log2()));  // exact: a power of two
      // each use of a parameter apart (a tied head's two), its sums over samples checked
      std::vector<std::vector<autograd::Use>> uses;
      {
        autograd::SampleCountCheck check(r1 - r0);
        uses = autograd::backward_uses(L, tensors);
      }
      p.reducer->add(params, uses, s_value, true);
    }
  }
  r.loss = p.reducer->finish(params) / fdenom;
  // a rank that held no samples (a short last batch) ran no forward: it takes rank 0's running
  // statistics, which every rank that did computed alike
  if (stats) share_buffers_with_idle_ranks(*p.comm, layout, *p.state.model);
  r.stop_signal = p.reducer->stop_signal();
  r.loss_scale = p.scaler.scale();
  if (!p.scaler.unscale(params, s)) {  // every rank holds the same gradients, so every rank skips
    r.skipped = true;
    if (p.before_update) p.before_update();
    return r;
  }
  if (cfg.train.clip_grad_norm > 0) r.grad_norm = optim::clip_grad_norm(p.state.model->parameters(), cfg.train.clip_grad_norm);
  if (p.before_update) p.before_update();
  p.state.optimizer->step(r.lr);
  return r;
}

}  // namespace bitgrad::train
