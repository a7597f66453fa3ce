// The prefix cache of `bitgrad serve` (docs/serving.md): the key and value rows a prompt's
// first tokens gave, kept for the next request that starts with the same tokens. A window that
// starts at the text's first token computes row i from tokens 0..i alone, and a row computed
// against cached keys has the bits of the same row computed in one pass (the decoder's own
// argument: the masked keys add +0), so a hit, a partial hit and a miss answer alike.
//
// The rows are kept in blocks of `block` tokens, each keyed by the whole token prefix it ends,
// so that prompts sharing 40 tokens share the blocks those cover. Memory is bounded: the least
// recently used blocks go first.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <vector>

#include "infer/run_model.hpp"

namespace bitgrad::infer {

class PrefixCache {
 public:
  // max_bytes 0: nothing is kept. block: tokens per block (>= 1).
  PrefixCache(std::int64_t max_bytes, std::int64_t block);

  // Before a sequence's first step: the longest cached prefix of its tokens that leaves at least
  // one token to compute, within the window's first block_size tokens, put into its caches.
  // Returns the tokens reused (0: a miss).
  std::int64_t attach(Decoder::Sequence& q, std::int64_t block_size);
  // After a step: the whole blocks of the sequence's window that start at its first token, kept.
  void remember(Decoder::Sequence& q);

  struct Stats {
    std::int64_t lookups = 0, hits = 0, reused_tokens = 0, blocks = 0, bytes = 0, evicted = 0;
  };
  Stats stats() const { return stats_; }

 private:
  struct Block {
    std::vector<Tensor> k, v;  // per transformer block: [block, D]
    std::int64_t bytes = 0;
    std::list<std::vector<std::int64_t>>::iterator lru;
  };
  void touch(Block& b);
  void evict_to(std::int64_t max_bytes);
  std::int64_t max_bytes_, block_;
  std::map<std::vector<std::int64_t>, Block> blocks_;  // the prefix a block ends -> its rows
  std::list<std::vector<std::int64_t>> lru_;           // the most recently used first
  Stats stats_;
};

}  // namespace bitgrad::infer
