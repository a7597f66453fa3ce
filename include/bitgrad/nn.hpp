// Neural-network modules. A Module owns named parameters in registration order (children's
// parameters are prefixed "<index or name>."), infers its output shape from its input shape
// (so a model is checked before it runs), and computes forward passes with the ops of ops.hpp.
// Randomness (initialisation, dropout) comes from named Philox streams, so a model is a pure
// function of its seed.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/autograd.hpp"
#include "bitgrad/ops.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::nn {

// What a forward pass needs to know besides its input.
struct Context {
  bool training = false;
  std::uint64_t seed = 0;       // root seed of the run (dropout streams)
  std::uint64_t step = 0;       // optimizer step (dropout masks change every step)
  std::int64_t row_offset = 0;  // first sample of this micro-batch inside the step's batch
  // mixed precision (numerics.md §24): the operands and results of the matmul-like ops (linear,
  // conv2d, attention's products) rounded to bf16 / fp16 values; stochastically in training
  Precision precision = Precision::fp32;
  bool stochastic = false;
  bool f32_masks = false;  // f64 dropout draws the masks of an f32 run (the float64 shadow)
  // Which call of the module this is within one forward (0: the first, and every forward of a
  // layer list): a dropout module called again draws its own mask, as PyTorch's. The Python
  // module counts a forward's calls; a recomputation replays the same counts.
  std::uint64_t call = 0;
  // Training follows each module's own mode (train() / eval()), as PyTorch's module.training: set
  // by the Python module for a forward given no Context. A container passes its children
  // child_context(ctx, child): a child put in evaluation is evaluated inside a training parent.
  bool module_modes = false;
};

// ---- initialisation ------------------------------------------------------------------------
// gpt2: weights and embeddings normal(0, 0.02), biases 0, a transformer block's output
// projections normal(0, 0.02 / sqrt(2 n_layer)) (GPT-2's initialisation)
enum class Init { kaiming_uniform, kaiming_normal, xavier_uniform, xavier_normal, zeros, gpt2 };
Init parse_init(const std::string& name);  // throws on unknown names
const char* init_name(Init init);
// Fills t from stream (element k from draw k): kaiming: gain sqrt(2), bound sqrt(3) gain / sqrt(fan_in),
// std gain / sqrt(fan_in); xavier: bound sqrt(6 / (fan_in + fan_out)), std sqrt(2 / (fan_in + fan_out)).
void init_tensor(Tensor& t, Init init, std::int64_t fan_in, std::int64_t fan_out, const rng::Stream& stream);

// One sequence's keys and values in a transformer block, for cached decoding: the rows of the
// positions [0, rows) of its window (infer::Decoder holds one per block and sequence).
struct KvCache {
  Tensor k, v;  // [rows, D]
  std::int64_t rows = 0;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x, const Context& ctx) = 0;
  // Output shape for an input shape (batch dimension included); throws naming the module
  // when the shapes do not chain.
  virtual Shape output_shape(const Shape& in) const = 0;
  virtual std::string describe() const = 0;

  // ---- capabilities: what a caller may do besides forward, asked instead of the type --------
  // In evaluation each output row (the last dimension) is a function of the same input row alone.
  virtual bool rowwise() const { return false; }
  // forward_rows below: cached decoding (TransformerBlock).
  virtual bool decodes_rows() const { return false; }
  // Cached decoding in evaluation: x [R, D] holds the new rows of several sequences, counts[s]
  // of sequence s after those of s - 1, at the positions caches[s]->rows onwards of its window;
  // each row gives what forward gives for it in its window, and the caches take the new rows.
  virtual Tensor forward_rows(const Tensor& x, const std::vector<std::int64_t>& counts, const std::vector<KvCache*>& caches, const Context& ctx);
  // forward_steps below: a sequence layer whose step t depends on the steps before it only
  // through a state it carries (Recurrent with batch_first, every step's output).
  virtual bool carries_state() const { return false; }
  // Decoding in evaluation: x [1, T, in] continues a sequence from `state` (empty: its start);
  // returns the steps' outputs, as forward gives them for the whole sequence, and leaves the
  // state after the last step in `state`.
  virtual Tensor forward_steps(const Tensor& x, std::vector<Tensor>& state, const Context& ctx);
  // Whether a training forward uses the batch's statistics (a batch norm in it, its own or an
  // imported graph's): micro-batches and ranks then need the batch rule's exchange.
  virtual bool uses_batch_statistics() const;

  // Draws every parameter from (seed, "init").sub(index), index counting parameters in
  // registration order across the model; the default recurses into the children.
  virtual void init(Init weights, std::uint64_t seed, std::uint64_t& index);

  // Each parameter once, under the first name it is reached by (PyTorch's de-duplication: a
  // tensor tied into two layers, a module registered under two names), depth-first in
  // registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // State that is not trained (BatchNorm's running statistics), named like the parameters:
  // saved in checkpoints, exported with the parameters, never given to an optimizer.
  std::vector<std::pair<std::string, Tensor>> named_buffers() const;
  // Numbers this module and its descendants depth-first in registration order from `next`:
  // the tensor part of the stochastic-rounding keys (numerics.md §24).
  void number_sites(std::uint64_t& next);
  // Every parameter of this module and its descendants converted to `dtype` in place (the
  // handles the layers hold see it): the float64 shadow's model.
  void cast_parameters(DType dtype);
  std::uint64_t site() const { return site_; }
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // ---- PyTorch's module features --------------------------------------------------
  // This module ("") and every descendant depth-first in registration order, named by path.
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The state under PyTorch's keys and in its order: each module's parameters, then its
  // persistent buffers, then its children's, named by path with the last part through state_key
  // (LayerNorm's gamma and beta are weight and bias there). named_parameters() keeps bitgrad's
  // own names (optimizer state, checkpoints).
  std::vector<std::pair<std::string, Tensor>> state_dict() const;
  // Copies each entry into the tensor of that key in place (shapes and dtypes must agree).
  // strict: every key of the module present and no other; else the missing and unexpected
  // keys are returned (sorted as the module's, then the state's order).
  struct LoadResult {
    std::vector<std::string> missing, unexpected;
  };
  LoadResult load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state, bool strict = true);
  // The key of own parameter or buffer `name` in state_dict (PyTorch's name where it differs).
  virtual std::string state_key(const std::string& name) const { return name; }
  // Training or evaluation, as PyTorch's module.train() / eval(): this module and every
  // descendant. A forward still takes its mode from its Context; a caller that builds the
  // Context (the Python module) reads it here. On from construction, as PyTorch's modules (a
  // bare C++ forward is still evaluation unless its Context says otherwise).
  void train(bool on = true);
  void eval() { train(false); }
  bool training() const { return training_; }
  // The Context this module gets as child `name` of a container (Context::module_modes): its own mode.
  // A child in training inside a parent in evaluation (e.g. dropout switched on at evaluation)
  // is refused: its draws would need the generator's step, which an evaluation forward has not.
  Context child_context(const Context& ctx, const std::string& name) const;
  // Registration from outside a constructor (the Python module's attribute assignment): a name
  // registered again is replaced in place (PyTorch keeps its position); unregister removes it
  // from whichever list holds it (false when none does).
  Tensor& set_parameter(const std::string& name, Tensor t) { return register_parameter(name, std::move(t)); }
  Tensor& set_buffer(const std::string& name, Tensor t, bool persistent = true) { return register_buffer(name, std::move(t), persistent); }
  void set_module(const std::string& name, std::shared_ptr<Module> m) { register_module(name, std::move(m)); }
  bool unregister(const std::string& name);
  bool buffer_persistent(const std::string& name) const;
  // PyTorch's `layer.weight = other.weight`: own parameter `key` (its name or its state_dict
  // key) becomes the tensor t itself, so the layers share it (a tied head); t must have the
  // parameter's shape and dtype. False when the module has no parameter of that key.
  bool tie_parameter(const std::string& key, const Tensor& t);

 protected:
  // Layers that keep handles of their parameters (Linear::weight) take them again from the
  // registered list after tie_parameter.
  virtual void bind_parameters() {}
  // Own parameter `name`, undefined when none is registered.
  Tensor own_parameter(const std::string& name) const;
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t, bool persistent = true);
  void register_module(const std::string& name, std::shared_ptr<Module> m);

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::string> non_persistent_;  // buffers left out of state_dict
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::uint64_t site_ = 0;
  bool training_ = true;
};

// ---- layers --------------------------------------------------------------------------------
class Linear : public Module {
 public:
  Linear(std::int64_t in, std::int64_t out, bool bias = true);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  bool rowwise() const override { return true; }
  Tensor weight, bias;
  std::int64_t in_features, out_features;
};

enum class Activation { relu, gelu, tanh, sigmoid };
class ActivationLayer : public Module {
 public:
  explicit ActivationLayer(Activation a) : a_(a) {}
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override { return in; }
  std::string describe() const override;
  bool rowwise() const override { return true; }

 private:
  Activation a_;
};

// Inverted dropout in training mode, identity in evaluation. Masks come from the stream
// (seed, "dropout").sub(layer_id).sub(step), element index = row_offset * row size + k.
class Dropout : public Module {
 public:
  Dropout(double p, std::uint64_t layer_id);
  std::uint64_t layer_id() const { return id_; }
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override { return in; }
  std::string describe() const override;
  bool rowwise() const override { return true; }  // the identity in evaluation

 private:
  double p_;
  std::uint64_t id_;
};

class Flatten : public Module {  // [N, ...] -> [N, prod(...)]
 public:
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override { return "Flatten()"; }
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t features, double eps = 1e-5, bool bias = true);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  std::string state_key(const std::string& name) const override;  // gamma, beta: weight, bias
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  bool rowwise() const override { return true; }
  Tensor gamma, beta;

 private:
  std::int64_t features_;
  double eps_;
};

class Embedding : public Module {  // i64 indices [..] -> [.., dim]
 public:
  Embedding(std::int64_t num, std::int64_t dim);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  Tensor weight;
};

// ---- batch norm (numerics.md §31) -------------------------------------------
// PyTorch's BatchNorm1d ([N, C] or [N, C, L]) and BatchNorm2d ([N, C, H, W]): parameters weight
// (gamma, 1) and bias (beta, 0) when affine; buffers running_mean (0), running_var (1) and
// num_batches_tracked (i64). Training: normalised by the batch's statistics; the running
// statistics are updated by every training forward (momentum, the unbiased variance), except
// the recomputation of a checkpointed segment (numerics §22), so once per step. Evaluation:
// the running statistics.
class BatchNorm : public Module {
 public:
  BatchNorm(int spatial_dims, std::int64_t features, double eps = 1e-5, double momentum = 0.1, bool affine = true);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  bool uses_batch_statistics() const override { return true; }
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  int dims_;  // 1: BatchNorm1d, 2: BatchNorm2d
  std::int64_t features_;
  double eps_, momentum_;
};

// ---- transformers (docs/numerics.md §21) ----------------------------------------------------------
// Token and position embedding: x [N, T] token ids (f32 holding integers, as a text dataset gives
// them) -> wte[x] + wpe[0..T) [N, T, D], then dropout (p > 0, training only).
class TokenEmbedding : public Module {
 public:
  TokenEmbedding(std::int64_t vocab, std::int64_t block, std::int64_t dim, double dropout, std::uint64_t dropout_id);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  Tensor wte, wpe;

 private:
  double p_;
  std::uint64_t drop_id_;
};

// Causal multi-head self-attention of x [N, T, D]: qkv = linear(x) [N, T, 3D] split into q, k, v
// of n_head heads [N, H, T, D/H]; att = softmax(mask(q kᵀ · 1/sqrt(D/H))) with the positions
// after each query masked; y = att v, heads concatenated, then the output projection.
// Dropout ids: dropout_id (attention weights) and dropout_id + 1 (output). Rounding sites
// (mixed precision, numerics.md §24): `site` for the two products, the linears' own.
Tensor causal_self_attention(const Tensor& x, const Tensor& w_qkv, const Tensor& b_qkv, const Tensor& w_proj, const Tensor& b_proj,
                             std::int64_t n_head, double dropout, std::uint64_t dropout_id, const Context& ctx, std::uint64_t site = 0,
                             std::uint64_t qkv_site = 0, std::uint64_t proj_site = 0);

// A pre-norm transformer block: x + attn(ln1(x)), then h + mlp(ln2(h)) with mlp = proj(gelu(fc(.)))
// of width 4D. Three dropout ids from dropout_id.
class TransformerBlock : public Module {
 public:
  TransformerBlock(std::int64_t dim, std::int64_t n_head, double dropout, bool bias, std::int64_t n_layer, std::uint64_t dropout_id);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  bool decodes_rows() const override { return true; }
  Tensor forward_rows(const Tensor& x, const std::vector<std::int64_t>& counts, const std::vector<KvCache*>& caches, const Context& ctx) override;
  static constexpr int kDropouts = 3;

 private:
  std::int64_t dim_, n_head_, n_layer_;
  double p_;
  bool bias_;
  std::uint64_t drop_id_;
  std::shared_ptr<LayerNorm> ln1_, ln2_;
  std::shared_ptr<Linear> qkv_, proj_, fc_, out_;
};

// The output layer tied to an embedding: x [.., D] -> x wteᵀ [.., vocab] (no parameter of its
// own; the gradient reaches the embedding's weight).
class TiedHead : public Module {
 public:
  explicit TiedHead(Tensor weight) : weight_(std::move(weight)) {}
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  bool rowwise() const override { return true; }

 private:
  Tensor weight_;
};

// Activation checkpointing of a Sequential's layers in training (contract T9, numerics.md §22):
// none; blocks: a layer with parameters and the parameter-free layers after it form one segment
// (a transformer block; a linear or convolution with its activation, pooling and dropout); all:
// every layer is a segment. A segment keeps only its input; its backward runs it again
// (ops::checkpoint). The last segment is never recomputed: its backward comes first.
enum class Recompute { none, blocks, all };
Recompute parse_recompute(const std::string& name);  // throws on unknown names
const char* recompute_name(Recompute r);

class Sequential : public Module {
 public:
  void add(std::shared_ptr<Module> m);
  std::size_t size() const { return children().size(); }
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void set_recompute(Recompute r) { recompute_ = r; }
  Recompute recompute() const { return recompute_; }
  // first layer of each segment under the recompute setting (one segment, {0}, for none)
  std::vector<std::size_t> segment_starts() const;

 private:
  Recompute recompute_ = Recompute::none;
};

// ---- normalisation and recurrent layers (numerics.md §33, §34) -------------------
// RMSNorm over the last `dims` axes of the shape `shape` (gamma of that shape when affine, 1 at init).
class RMSNorm : public Module {
 public:
  explicit RMSNorm(std::vector<std::int64_t> shape, double eps = 1e-5, bool affine = true);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  std::string state_key(const std::string& name) const override;  // gamma: weight
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  Tensor gamma;

 private:
  std::vector<std::int64_t> shape_;
  double eps_;
};

// GroupNorm (x [N, C, ...]); instance = true is InstanceNorm (one group per channel; PyTorch's
// InstanceNorm*d without running statistics). affine: gamma [C] = 1, beta [C] = 0 at init.
class GroupNorm : public Module {
 public:
  GroupNorm(std::int64_t groups, std::int64_t channels, double eps = 1e-5, bool affine = true, bool instance = false);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  std::string state_key(const std::string& name) const override;  // gamma, beta: weight, bias
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  Tensor gamma, beta;

 private:
  std::int64_t groups_, channels_;
  double eps_;
  bool instance_;
};

// RNN / LSTM / GRU of `layers` layers, PyTorch's parameters per layer k (registration order):
// weight_ih_l{k} [G·H, in], weight_hh_l{k} [G·H, H], bias_ih_l{k}, bias_hh_l{k} [G·H], each drawn
// uniform(-1/sqrt(H), 1/sqrt(H)) from its own stream (PyTorch's initialisation, whatever `weights`).
// forward(x) takes [N, T, in] (batch_first) or [T, N, in] and returns every step's output, or with
// last_only the last step's [N, H]; run() gives the states too.
class Recurrent : public Module {
 public:
  Recurrent(RnnMode mode, std::int64_t input, std::int64_t hidden, std::int64_t layers = 1, bool bias = true, bool batch_first = true,
            bool last_only = false);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  RnnResult run(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor()) const;
  bool carries_state() const override { return batch_first && !last_only; }
  Tensor forward_steps(const Tensor& x, std::vector<Tensor>& state, const Context& ctx) override;  // state: {h_n, c_n}
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  const std::vector<RnnParams>& layer_params() const { return params_; }
  RnnMode mode() const { return mode_; }
  std::int64_t input_size, hidden_size, num_layers;
  bool batch_first, last_only;

 private:
  RnnMode mode_;
  std::vector<RnnParams> params_;
};

// Initialises every parameter of m: weights with `weights` (fans of the layer), biases with
// uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), layer-norm gamma 1 and beta 0, embeddings normal(0, 1).
void initialize(Module& m, Init weights, std::uint64_t seed);

}  // namespace bitgrad::nn
