// Loading a run for inference, the draw of a token, and the cached decoder (run_model.hpp).
#include "infer/run_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bitgrad/autograd.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/math.hpp"
#include "bitgrad/ops.hpp"
#include "store/checkpoint.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::infer {
namespace {

// What build_model reads of a text dataset (windows of `block` tokens, a label per position,
// the vocabulary's size), without the windows themselves.
class TextShape : public data::Dataset {
 public:
  TextShape(std::int64_t block, std::int64_t vocab) : block_(block), vocab_(vocab) {}
  std::int64_t size() const override { return 0; }
  Shape sample_shape() const override { return Shape{block_}; }
  std::int64_t num_classes() const override { return vocab_; }
  Shape target_shape() const override { return Shape{block_}; }
  void get(std::int64_t, float*, std::int64_t*, float*) const override { throw Error("infer: the model's shape holds no samples"); }
  std::string describe() const override { return "text shape"; }

 private:
  std::int64_t block_, vocab_;
};

}  // namespace

RunModel load_run_model(const std::string& run_dir, const std::string& what, bool need_text) {
  const store::RunDir dir = store::RunDir::open(run_dir, what);
  RunModel r;
  r.dir = run_dir;
  r.cfg = train::load_config(dir.config_path());
  const store::Checkpoint ck = dir.latest_checkpoint();
  dir.check_inputs(ck.info.input_digests, ck.name);  // the vocabulary it decodes with is the one it was trained with
  std::shared_ptr<data::Dataset> shape_of;
  if (r.cfg.data.dataset == train::DatasetKind::text) {
    const std::string vocab_file = dir.vocabulary_path();
    if (!dir.has("vocabulary.json"))
      throw NotFoundError(what + ": " + vocab_file +
                          " does not exist: the run was trained before runs kept their vocabulary; resume its training (bitgrad train --resume " +
                          run_dir + " --steps MORE) to write it, or train it again");
    r.corpus = data::vocabulary_from_json(io::read_file(vocab_file), vocab_file);
    shape_of = std::make_shared<TextShape>(r.cfg.data.block_size, r.corpus->vocab_size());
  } else {
    if (need_text)
      throw Error(what + ": " + run_dir + " trained on " + train::to_string(r.cfg.data.dataset) + " data; sampling needs a text model");
    shape_of = train::train_dataset(r.cfg);
  }
  r.sample_shape = shape_of->sample_shape();
  r.classes = shape_of->num_classes();
  r.model = train::build_model(r.cfg, *shape_of);
  NoGradGuard ng;
  auto params = r.model->named_parameters();
  for (auto& b : r.model->named_buffers()) params.push_back(b);  // the checkpoint's model file: parameters, then buffers
  BITGRAD_CHECK(ck.params.size() == params.size(), what.c_str(), run_dir, ": the checkpoint holds ", ck.params.size(), " tensors, the model ",
                params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    BITGRAD_CHECK(ck.params[i].first == params[i].first && ck.params[i].second.shape() == params[i].second.shape(), what.c_str(), run_dir,
                  ": checkpoint parameter '", ck.params[i].first, "' does not match the model's '", params[i].first, "'");
    params[i].second.copy_from(ck.params[i].second);
  }
  r.step = ck.info.step;
  return r;
}

std::int64_t draw_token(const float* logits, std::int64_t V, double temperature, std::int64_t top_k, double u) {
  // a diverged or overflowing model's logits draw nothing: an error, not a token
  for (std::int64_t i = 0; i < V; ++i)
    BITGRAD_CHECK(std::isfinite(logits[i]), "sample", "the model's logit for token ", i, " is ", logits[i],
                  ": its outputs are not finite (a diverged run, or inputs that overflow it), so no token can be drawn");
  std::int64_t best = 0;
  for (std::int64_t i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;  // the first maximum
  if (temperature == 0) return best;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  std::vector<double> l(at(V));
  bool finite = true;
  for (std::int64_t i = 0; i < V; ++i) finite = finite && std::isfinite(l[at(i)] = static_cast<double>(logits[i]) / temperature);
  if (!finite)  // a temperature so small that logit / T overflows: relative to the maximum, -inf or 0
    for (std::int64_t i = 0; i < V; ++i) l[at(i)] = (static_cast<double>(logits[i]) - static_cast<double>(logits[best])) / temperature;
  std::vector<bool> keep(at(V), true);
  if (top_k > 0 && top_k < V) {
    std::vector<std::int64_t> ids(at(V));
    for (std::int64_t i = 0; i < V; ++i) ids[at(i)] = i;
    // a total order: larger logit first, then the lower id
    std::stable_sort(ids.begin(), ids.end(), [&](std::int64_t a, std::int64_t b) { return l[at(a)] > l[at(b)]; });
    std::fill(keep.begin(), keep.end(), false);
    for (std::int64_t r = 0; r < top_k; ++r) keep[at(ids[at(r)])] = true;
  }
  const double m = l[at(best)];
  std::vector<double> p(at(V), 0.0);
  double total = 0;
  for (std::int64_t i = 0; i < V; ++i)
    if (keep[at(i)]) total += p[at(i)] = math::exp(l[at(i)] - m);
  const double target = u * total;
  double run = 0;
  std::int64_t last = best;
  for (std::int64_t i = 0; i < V; ++i) {
    if (!keep[at(i)]) continue;
    run += p[at(i)];
    last = i;
    if (run > target) return i;
  }
  return last;  // u * total rounded up to the sum itself
}

TokenLogprobs token_logprobs(const float* logits, std::int64_t V, std::int64_t token, std::int64_t k) {
  BITGRAD_CHECK(token >= 0 && token < V, "logprobs", "token ", token, " is outside the vocabulary of ", V);
  const Tensor lp = contiguous(log_softmax(Tensor::from(std::vector<float>(logits, logits + V), Shape{1, V}), -1));
  const float* l = lp.data<float>();
  TokenLogprobs r;
  r.token = token;
  r.logprob = l[token];
  k = std::min(k, V);
  if (k > 0) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(V));
    for (std::int64_t i = 0; i < V; ++i) ids[static_cast<std::size_t>(i)] = i;
    // a total order of finite values: the larger first, then the lower id
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](std::int64_t a, std::int64_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
    for (std::int64_t i = 0; i < k; ++i) r.top.emplace_back(ids[static_cast<std::size_t>(i)], l[ids[static_cast<std::size_t>(i)]]);
  }
  return r;
}

std::string token_text(const data::TextCorpus& corpus, std::int64_t token) {
  const std::string s = corpus.decode({token});
  bool whole = true;
  for (std::size_t i = 0; i < s.size() && whole;) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    whole = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; whole && k < n; ++k) whole = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    i += n;
  }
  if (whole) return s;
  std::string out = "bytes:";
  static const char* hex = "0123456789abcdef";
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    out += "\\x";
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps, const std::vector<std::int64_t>& generated,
                             const data::TextCorpus& corpus, std::size_t from, std::size_t to, std::size_t& offset) {
  using json = nlohmann::json;
  BITGRAD_CHECK(from <= to && to <= lps.size() && lps.size() <= generated.size(), "logprobs", "tokens [", from, ", ", to, ") of ",
                lps.size(), " listed, ", generated.size(), " generated");
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (std::size_t i = from; i < to; ++i) {
    const TokenLogprobs& t = lps[i];
    tokens.push_back(token_text(corpus, t.token));
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(corpus, id)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += corpus.decode({generated[i]}).size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

nlohmann::json prompt_logprobs_json(const std::vector<TokenLogprobs>& lps, const std::vector<std::int64_t>& prompt,
                                    const data::TextCorpus& corpus) {
  using json = nlohmann::json;
  BITGRAD_CHECK(!prompt.empty() && lps.size() + 1 == prompt.size(), "logprobs", lps.size(), " log-probabilities for a prompt of ", prompt.size(),
                " tokens");
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  std::size_t offset = 0;
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    tokens.push_back(token_text(corpus, prompt[i]));
    offsets.push_back(offset);
    offset += corpus.decode({prompt[i]}).size();
    if (i == 0) {
      values.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    const TokenLogprobs& t = lps[i - 1];
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[token_text(corpus, id)] = lp;
    tops.push_back(std::move(top));
  }
  return json{{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

// ---- the decoder ------------------------------------------------------------------------------
Decoder::Decoder(const RunModel& m) : m_(m), block_size_(m.cfg.data.block_size) {
  BITGRAD_CHECK(m.text(), "serve", m.dir, " is not a text model");
  const auto& ch = m.model->children();
  const auto& specs = m.cfg.model.layers;
  if (ch.empty() || specs.size() != ch.size()) return;
  embed_ = dynamic_cast<nn::TokenEmbedding*>(ch[0].second.get());
  if (!embed_) return;
  std::size_t i = 1;
  for (; i < ch.size() && ch[i].second->decodes_rows(); ++i) blocks_.push_back(ch[i].second.get());
  bool states = false;
  for (; i < ch.size(); ++i) {
    nn::Module* l = ch[i].second.get();
    // each row of the output a function of the same row alone, or (without transformer blocks)
    // of the steps before it through a state the layer carries
    if (l->carries_state() && blocks_.empty()) states = true;
    else if (!l->rowwise()) return;
    tail_.push_back(l);
  }
  recurrent_ = states;
  cached_ = true;
}

std::vector<TokenLogprobs> Decoder::prompt_logprobs(const std::vector<std::int64_t>& tokens, std::int64_t k) const {
  NoGradGuard ng;
  const std::int64_t V = m_.classes, P = static_cast<std::int64_t>(tokens.size());
  std::vector<TokenLogprobs> out;
  auto add = [&](const float* row, std::int64_t token) {
    for (std::int64_t i = 0; i < V; ++i)
      BITGRAD_CHECK(std::isfinite(row[i]), "logprobs", "the model's logit for token ", i, " is ", row[i],
                    ": its outputs are not finite (a diverged run), so the prompt has no log-probabilities");
    out.push_back(token_logprobs(row, V, token, k));
  };
  auto forward = [&](std::int64_t b, std::int64_t e) {  // the model on tokens [b, e): [1, e - b, V]
    std::vector<float> w;
    for (std::int64_t i = b; i < e; ++i) w.push_back(static_cast<float>(tokens[static_cast<std::size_t>(i)]));
    return contiguous(m_.model->forward(Tensor::from(w, Shape{1, e - b}), m_.context()));
  };
  const std::int64_t first = cached_ ? std::min(P - 1, block_size_) : 0;  // positions 1 .. first from one forward
  if (first > 0) {
    const Tensor l = forward(0, first);
    for (std::int64_t i = 0; i < first; ++i) add(l.data<float>() + i * V, tokens[static_cast<std::size_t>(i + 1)]);
  }
  for (std::int64_t p = std::max<std::int64_t>(first + 1, 1); p < P; ++p) {
    const std::int64_t b = std::max<std::int64_t>(0, p - block_size_);
    const Tensor l = forward(b, p);
    add(l.data<float>() + (p - b - 1) * V, tokens[static_cast<std::size_t>(p)]);
  }
  return out;
}

std::vector<float> Decoder::window_logits(const Sequence& q) const {
  const auto& text = q.tokens;
  const std::int64_t len = std::min<std::int64_t>(block_size_, static_cast<std::int64_t>(text.size()));
  std::vector<float> w(static_cast<std::size_t>(len));
  for (std::int64_t i = 0; i < len; ++i) w[static_cast<std::size_t>(i)] = static_cast<float>(text[text.size() - static_cast<std::size_t>(len - i)]);
  const Tensor logits = contiguous(m_.model->forward(Tensor::from(w, Shape{1, len}), m_.context()));
  const std::int64_t V = m_.classes;
  const float* p = logits.data<float>() + (len - 1) * V;
  return std::vector<float>(p, p + V);
}

std::vector<std::vector<float>> Decoder::next_logits(const std::vector<Sequence*>& seqs) {
  NoGradGuard ng;
  const nn::Context ctx = m_.context();  // evaluation in the run's precision: what `bitgrad sample` runs
  const std::int64_t V = m_.classes;
  std::vector<std::vector<float>> out(seqs.size());
  auto logits_row = [&](const Tensor& t, std::int64_t row) {
    const float* p = t.data<float>() + row * V;
    return std::vector<float>(p, p + V);
  };
  if (!cached_) {  // the plain forward of each window, as `bitgrad sample`
    for (std::size_t s = 0; s < seqs.size(); ++s) out[s] = window_logits(*seqs[s]);
    return out;
  }
  if (recurrent_) {
    // While the window starts at the first token, a recurrent layer's state after token n - 1 is
    // the cache: the new tokens continue it, step by step as the window's forward runs them.
    // Once the window slides its steps start from the zero state elsewhere: the window again.
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      Sequence& q = *seqs[s];
      const auto n = static_cast<std::int64_t>(q.tokens.size());
      BITGRAD_CHECK(n > 0, "serve", "a sequence without tokens");
      if (n > block_size_) {
        q.states.clear();
        q.cached = 0;
        q.start = n - block_size_;
        out[s] = window_logits(q);
        continue;
      }
      if (q.states.size() != tail_.size()) {
        q.states.assign(tail_.size(), {});
        q.cached = 0;
      }
      std::vector<std::int64_t> ids, pos;
      for (std::int64_t p = q.cached; p < n; ++p) {
        ids.push_back(q.tokens[static_cast<std::size_t>(p)]);
        pos.push_back(p);
      }
      const auto T = static_cast<std::int64_t>(ids.size());
      BITGRAD_CHECK(T > 0, "serve", "a sequence with no new token");
      Tensor x = add(embedding(embed_->wte, Tensor::from(ids, Shape{T})), index_select(embed_->wpe, 0, Tensor::from(pos, Shape{T})));
      x = reshape(x, Shape{1, T, x.shape()[1]});  // [1, T, D]: one sequence, batch first
      for (std::size_t k = 0; k < tail_.size(); ++k)
        x = tail_[k]->carries_state() ? tail_[k]->forward_steps(x, q.states[k], ctx) : tail_[k]->forward(x, ctx);
      q.cached = n;
      const Tensor t = contiguous(x);
      BITGRAD_CHECK(t.ndim() == 3 && t.shape()[2] == V, "serve", "the model's output is ", t.shape().str(), ", expected [1, ", T, ", ", V, "]");
      out[s] = logits_row(t, T - 1);
    }
    return out;
  }
  // the new rows of every sequence, one after another: token id and position in its window
  std::vector<std::int64_t> ids, pos, first(seqs.size()), count(seqs.size()), last(seqs.size());
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    Sequence& q = *seqs[s];
    const auto n = static_cast<std::int64_t>(q.tokens.size());
    BITGRAD_CHECK(n > 0, "serve", "a sequence without tokens");
    const std::int64_t start = std::max<std::int64_t>(0, n - block_size_);
    if (start != q.start || q.kv.size() != blocks_.size()) {  // the window slid: recompute it whole
      q.start = start;
      q.cached = q.shared = 0;
      q.kv.assign(blocks_.size(), nn::KvCache{});
    }
    first[s] = static_cast<std::int64_t>(ids.size());
    for (std::int64_t p = q.cached; p < n - start; ++p) {
      ids.push_back(q.tokens[static_cast<std::size_t>(start + p)]);
      pos.push_back(p);
    }
    count[s] = static_cast<std::int64_t>(ids.size()) - first[s];
    BITGRAD_CHECK(count[s] > 0, "serve", "a sequence with no new token");
    last[s] = static_cast<std::int64_t>(ids.size()) - 1;
  }
  const auto R = static_cast<std::int64_t>(ids.size());
  // h = wte[id] + wpe[position]: one addition per element, as TokenEmbedding's
  Tensor x = add(embedding(embed_->wte, Tensor::from(ids, Shape{R})), index_select(embed_->wpe, 0, Tensor::from(pos, Shape{R})));  // [R, D]
  std::vector<nn::KvCache*> caches(seqs.size());
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    for (std::size_t s = 0; s < seqs.size(); ++s) caches[s] = &seqs[s]->kv[b];
    x = blocks_[b]->forward_rows(x, count, caches, ctx);
  }
  for (std::size_t s = 0; s < seqs.size(); ++s) seqs[s]->cached += count[s];
  // the row-wise layers on each sequence's last row only
  Tensor t = index_select(x, 0, Tensor::from(last, Shape{static_cast<std::int64_t>(last.size())}));
  for (nn::Module* l : tail_) t = l->forward(t, ctx);
  t = contiguous(t);
  BITGRAD_CHECK(t.ndim() == 2 && t.shape()[1] == V, "serve", "the model's output is ", t.shape().str(), ", expected [", seqs.size(), ", ", V, "]");
  for (std::size_t s = 0; s < seqs.size(); ++s) out[s] = logits_row(t, static_cast<std::int64_t>(s));
  return out;
}

}  // namespace bitgrad::infer
