#include "infer/prefix_cache.hpp"

#include <algorithm>

#include "bitgrad/ops.hpp"

namespace bitgrad::infer {

PrefixCache::PrefixCache(std::int64_t max_bytes, std::int64_t block) : max_bytes_(max_bytes), block_(block) {
  BITGRAD_CHECK(max_bytes >= 0, "serve", "the prefix cache's size must be >= 0, got ", max_bytes);
  BITGRAD_CHECK(block >= 1, "serve", "the prefix cache's block must be >= 1 token, got ", block);
}

void PrefixCache::touch(Block& b) { lru_.splice(lru_.begin(), lru_, b.lru); }

std::int64_t PrefixCache::attach(Decoder::Sequence& q, std::int64_t block_size) {
  if (max_bytes_ == 0 || !q.kv.empty() || q.cached != 0) return 0;
  ++stats_.lookups;
  const auto n = static_cast<std::int64_t>(q.tokens.size());
  if (n > block_size) return 0;  // the window does not start at the first token: nothing to share
  std::vector<std::int64_t> key;
  std::vector<const Block*> found;
  for (std::int64_t end = block_; end < n; end += block_) {  // leave a token to compute
    key.assign(q.tokens.begin(), q.tokens.begin() + end);
    const auto it = blocks_.find(key);
    if (it == blocks_.end()) break;
    touch(it->second);
    found.push_back(&it->second);
  }
  if (found.empty()) return 0;
  const std::size_t layers = found[0]->k.size();
  q.kv.assign(layers, nn::KvCache{});
  for (std::size_t l = 0; l < layers; ++l) {
    std::vector<Tensor> ks, vs;
    for (const Block* b : found) {
      ks.push_back(b->k[l]);
      vs.push_back(b->v[l]);
    }
    q.kv[l].k = ks.size() == 1 ? ks[0] : concat(ks, 0);
    q.kv[l].v = vs.size() == 1 ? vs[0] : concat(vs, 0);
    q.kv[l].rows = static_cast<std::int64_t>(found.size()) * block_;
  }
  q.start = 0;
  q.cached = q.shared = static_cast<std::int64_t>(found.size()) * block_;
  ++stats_.hits;
  stats_.reused_tokens += q.cached;
  return q.cached;
}

void PrefixCache::remember(Decoder::Sequence& q) {
  if (max_bytes_ == 0 || q.start != 0 || q.kv.empty()) return;
  const std::int64_t from = std::max<std::int64_t>(q.shared / block_ * block_, 0) + block_;  // the blocks not given yet
  q.shared = q.cached / block_ * block_;
  for (std::int64_t end = from; end <= q.cached; end += block_) {
    std::vector<std::int64_t> key(q.tokens.begin(), q.tokens.begin() + end);
    const auto it = blocks_.find(key);
    if (it != blocks_.end()) {
      touch(it->second);
      continue;
    }
    Block b;
    for (const nn::KvCache& c : q.kv) {  // the block's rows, copied out of the sequence's tensors
      b.k.push_back(contiguous(slice(c.k, 0, end - block_, end)));
      b.v.push_back(contiguous(slice(c.v, 0, end - block_, end)));
      b.bytes += 2 * b.k.back().numel() * static_cast<std::int64_t>(sizeof(float));
    }
    if (b.bytes > max_bytes_) return;
    lru_.push_front(key);
    b.lru = lru_.begin();
    stats_.bytes += b.bytes;
    ++stats_.blocks;
    blocks_.emplace(std::move(key), std::move(b));
    evict_to(max_bytes_);
  }
}

void PrefixCache::evict_to(std::int64_t max_bytes) {
  while (stats_.bytes > max_bytes && !lru_.empty()) {
    const auto it = blocks_.find(lru_.back());
    stats_.bytes -= it->second.bytes;
    --stats_.blocks;
    ++stats_.evicted;
    blocks_.erase(it);
    lru_.pop_back();
  }
}

}  // namespace bitgrad::infer
