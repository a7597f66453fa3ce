// A run directory's model loaded for inference (`bitgrad sample`, `bitgrad serve`), the draw of
// a token from logits, and the decoder that advances many texts at once with a KV cache each.
// Internal to infer and serve: the public face is bitgrad/infer.hpp and the command `bitgrad serve`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bitgrad/data.hpp"
#include "bitgrad/infer.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/train.hpp"

namespace bitgrad::infer {

// The configuration, the model with its latest checkpoint's parameters (and buffers), and for
// a text run the vocabulary (vocabulary.json; the corpus is never read). A classifier run's
// sample shape comes from its dataset (the data are read once, for the shape).
struct RunModel {
  std::string dir;
  train::Config cfg;
  std::shared_ptr<nn::Sequential> model;
  std::shared_ptr<const data::TextCorpus> corpus;  // text runs only
  Shape sample_shape;                              // one sample's input
  std::int64_t classes = 0;                        // the vocabulary of a text run
  std::int64_t step = 0;                           // of the checkpoint
  bool text() const { return corpus != nullptr; }
  // The evaluation forward of the run: in its precision (bf16/fp16 runs round their matmul-like
  // ops to nearest, as their evaluation during training does; numerics §24).
  nn::Context context() const {
    nn::Context c;
    c.seed = cfg.seed;
    c.precision = cfg.train.precision;
    return c;
  }
};
// `what` prefixes the errors ("sample", "serve"); need_text refuses a run of other data.
RunModel load_run_model(const std::string& run_dir, const std::string& what, bool need_text);

// The token drawn from the logits of one position (infer::SampleOptions' rule, numerics §21).
std::int64_t draw_token(const float* logits, std::int64_t V, double temperature, std::int64_t top_k, double u);
// The log-probabilities of the row `logits` ([V], finite) for the token drawn and the k most
// likely: bitgrad's log_softmax of the row as a [1, V] tensor, so the bits of any batch's row.
TokenLogprobs token_logprobs(const float* logits, std::int64_t V, std::int64_t token, std::int64_t k);
// A token's text for a logprobs listing: its characters, or "bytes:\\xNN..." where they are not
// whole UTF-8 (a byte vocabulary's piece of a character), so no two tokens print alike.
std::string token_text(const data::TextCorpus& corpus, std::int64_t token);
// OpenAI's completions `logprobs` object for generated tokens [from, to): each token's text, its
// log-probability, its k most likely alternatives and its byte offset in the generated text
// (before a stop string cut it), counted from `offset`, token `from`'s. lps[i] belongs to
// generated[i]. `offset` becomes token `to`'s, for the next call (a stream's next event).
nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps, const std::vector<std::int64_t>& generated,
                             const data::TextCorpus& corpus, std::size_t from, std::size_t to, std::size_t& offset);
// The same object for a prompt (`echo`): its first token has no log-probability (null), token p
// has lps[p - 1]; offsets from the prompt's start.
nlohmann::json prompt_logprobs_json(const std::vector<TokenLogprobs>& lps, const std::vector<std::int64_t>& prompt,
                                    const data::TextCorpus& corpus);

// Continuous decoding: each call computes the next-token logits of every sequence given, the
// new rows of all of them in one batch through the row-wise layers (embedding, layer norms,
// linears, GELU: each row by itself, numerics §5, §15) and each sequence's attention over its own
// cache. A row's numbers are those of `bitgrad sample`'s forward of the sequence's window alone:
// the same ops on the same rows, and an attention row over a longer (cached) key list differs
// from the window's only by masked keys, whose weight is +0 (numerics §21, serving.md). A window
// that slides (the text is longer than block_size) is recomputed whole, as sample does. A model
// whose layers are not embedding, transformer blocks, then row-wise layers runs the plain
// forward of each window instead (no cache).
class Decoder {
 public:
  explicit Decoder(const RunModel& m);
  bool cached() const { return cached_; }
  // Whether sequences keep key/value rows (transformer blocks; the prefix cache's), rather than
  // a recurrent layer's state.
  bool keeps_rows() const { return cached_ && !recurrent_; }

  struct Sequence {
    std::vector<std::int64_t> tokens;  // the text so far (prompt included)
    std::int64_t start = 0;            // the window's first token
    std::int64_t cached = 0;           // window positions [0, cached) are in the caches
    std::vector<nn::KvCache> kv;       // per block
    std::int64_t shared = 0;           // window rows the prefix cache has been given (PrefixCache)
    std::vector<std::vector<Tensor>> states;  // per layer of a recurrent model: its state after `cached` tokens
  };
  // logits[s] ([V]) of the token after seqs[s]->tokens; updates their caches.
  std::vector<std::vector<float>> next_logits(const std::vector<Sequence*>& seqs);
  // The log-probabilities of tokens 1 .. P-1 of a prompt, each from the window `bitgrad sample`
  // would draw it from (the block_size tokens before it), with the k most likely: a causal model
  // (one the decoder caches) gives the first window's positions from one forward, whose rows are
  // its prefixes' last rows; past it, and for other models, one forward per position.
  std::vector<TokenLogprobs> prompt_logprobs(const std::vector<std::int64_t>& tokens, std::int64_t k) const;

 private:
  const RunModel& m_;
  bool cached_ = false;
  nn::TokenEmbedding* embed_ = nullptr;
  std::vector<nn::Module*> blocks_;  // the blocks that decode rows with a cache
  std::vector<nn::Module*> tail_;  // row-wise layers after the blocks; of a recurrent model, every layer after the embedding
  bool recurrent_ = false;         // a recurrent text model: its layers' states are the cache
  std::vector<float> window_logits(const Sequence& q) const;  // the plain forward of q's window, its last row
  std::int64_t block_size_ = 0;
};

}  // namespace bitgrad::infer
