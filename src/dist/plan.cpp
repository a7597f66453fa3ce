#include "dist/plan.hpp"

#include <algorithm>

#include "bitgrad/error.hpp"

namespace bitgrad::dist {

std::int64_t split(std::int64_t lo, std::int64_t hi) {
  std::int64_t h = 1;
  while (h * 2 < hi - lo) h *= 2;
  return lo + h;
}

std::vector<Range> cover(std::int64_t n, Range r) {
  std::vector<Range> out;
  auto rec = [&](auto& self, std::int64_t lo, std::int64_t hi) -> void {
    if (hi <= r.begin || lo >= r.end) return;
    if (r.begin <= lo && hi <= r.end) {
      out.push_back({lo, hi});
      return;
    }
    const std::int64_t mid = split(lo, hi);
    self(self, lo, mid);
    self(self, mid, hi);
  };
  if (r.begin < r.end) rec(rec, 0, n);
  return out;
}

Range shard(std::int64_t n, int world, int rank) {
  const std::int64_t w = world, k = rank;
  return {k * n / w, (k + 1) * n / w};
}

std::vector<Range> whole_node_shards(std::int64_t n, int world) {
  std::vector<Range> parts{{0, n}};
  while (static_cast<int>(parts.size()) < world) {
    std::size_t big = parts.size();
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (parts[i].size() >= 2 && (big == parts.size() || parts[i].size() > parts[big].size())) big = i;
    if (big == parts.size()) break;
    const Range p = parts[big];
    const std::int64_t mid = split(p.begin, p.end);
    parts[big] = {p.begin, mid};
    parts.insert(parts.begin() + static_cast<std::ptrdiff_t>(big) + 1, Range{mid, p.end});
  }
  while (static_cast<int>(parts.size()) < world) parts.push_back({n, n});
  return parts;
}

std::vector<Range> StepLayout::all_nodes() const {
  std::vector<Range> all;
  for (const auto& rank_nodes : nodes) all.insert(all.end(), rank_nodes.begin(), rank_nodes.end());
  return all;
}

Range StepLayout::rows_of(int rank) const {
  const Range s = shards[static_cast<std::size_t>(rank)];
  return {row_of(s.begin), row_of(s.end)};
}

bool complete_subtree(std::int64_t rows) {
  if (rows <= 0 || rows % kBlockRows) return false;
  const std::int64_t blocks = rows / kBlockRows;
  return (blocks & (blocks - 1)) == 0;
}

StepLayout step_layout(std::int64_t rows, std::int64_t batch_size, std::int64_t accumulate, int world, Sharding sharding, bool per_block) {
  BITGRAD_CHECK(rows > 0 && batch_size > 0 && accumulate > 0 && batch_size % accumulate == 0 && world > 0, "data parallel",
                "no layout for a batch of ", rows, " (batch size ", batch_size, ", accumulate ", accumulate, ") over ", world, " ranks");
  StepLayout l;
  l.rows = rows;
  l.world = world;
  l.piece_rows = batch_size / accumulate;
  l.leaf_rows = accumulate == 1 || complete_subtree(l.piece_rows) ? kBlockRows : l.piece_rows;
  l.per_block = per_block;
  if (per_block) l.piece_rows = std::min(l.piece_rows, l.leaf_rows);  // every leaf its own forward and backward (numerics §42)
  l.leaves = (rows + l.leaf_rows - 1) / l.leaf_rows;
  if (sharding == Sharding::whole_nodes) {
    l.shards = whole_node_shards(l.leaves, world);
  } else {
    for (int r = 0; r < world; ++r) l.shards.push_back(shard(l.leaves, world, r));
  }
  for (int r = 0; r < world; ++r) l.nodes.push_back(cover(l.leaves, l.shards[static_cast<std::size_t>(r)]));
  return l;
}

std::string layout_problem(std::int64_t batch_size, std::int64_t accumulate, int world) {
  if (world <= 1) return {};
  const StepLayout l = step_layout(batch_size, batch_size, accumulate, world);
  if (l.leaves >= world) return {};
  if (l.leaf_rows == kBlockRows)
    return "a batch of " + std::to_string(batch_size) + " samples has " + std::to_string(l.leaves) + " block" + (l.leaves == 1 ? "" : "s") +
           " of 32 samples, fewer than the " + std::to_string(world) + " ranks (each rank needs at least one whole block): use at most " +
           std::to_string(l.leaves) + " ranks or a batch of at least " + std::to_string(32 * world);
  return "a batch of " + std::to_string(batch_size) + " samples in " + std::to_string(accumulate) + " micro-batches of " +
         std::to_string(l.piece_rows) + " (not a power-of-two number of 32-sample blocks, so each rank holds whole micro-batches) "
         "has fewer micro-batches than the " + std::to_string(world) + " ranks: use at most " + std::to_string(l.leaves) + " ranks";
}

}  // namespace bitgrad::dist
