// The layer registry: one entry per line of BITGRAD_LAYER_KINDS (bitgrad/train.hpp), each all a
// layer kind is to the configuration file, the trainer and Python:
//   schema(v, l)     its options in [model] layers (read, checked, written and hashed by
//                    config.cpp's visitors; errors name the key and line)
//   params(l, in, e) its parameter count before it allocates (the memory pre-check), 0 where
//                    the input cannot take it (build then says why)
//   build(l, in, e)  the module for inputs of shape `in`, or an error naming the layer
//   python           the bitgrad.nn callable that makes the same module in Python, and `example`
//                    an input and options the tests build it with (tests/train/layer_table_test.cpp,
//                    tests/python/test_layer_table.py: count = the module's, TOML round trip,
//                    the Python constructor's module alike)
// A line of the list without its entry does not compile (Layer<K> is incomplete); an entry
// without its Python constructor, or with a count that differs from the module's, fails those
// tests by the kind's name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bitgrad/enum_names.hpp"
#include "bitgrad/error.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/nn_spatial.hpp"
#include "bitgrad/train.hpp"
#include "train/schema_keys.hpp"

namespace bitgrad::train::layers {

// What a build sees besides its options and its input's shape: where the layer is written
// (errors), the dataset's classes, and the state its predecessors leave.
struct Env {
  std::string file;
  int line = 0;
  std::string where;                        // "model.layers[3] (conv)"
  std::int64_t classes = 0;                 // classes or vocabulary; 0: real-valued targets
  bool token_windows = false;               // a text dataset: [N, T] token ids, a label per position
  const std::vector<LayerSpec>* all = nullptr;  // the whole list (a transformer block's depth)
  std::uint64_t dropout_id = 0;             // the next dropout stream
  nn::TokenEmbedding* embed = nullptr;      // the last embedding, for a tied head
  [[noreturn]] void fail(const std::string& what) const { throw Error(file + ":" + std::to_string(line) + ": " + where + what); }
  void need_rank(const Shape& in, int rank, const char* what) const {
    if (in.ndim() != rank) fail(std::string(" expects ") + what + ", the layer before gives " + in.str());
  }
};

// The inputs the tests build an entry's example with (tests/train/layer_table_test.cpp).
enum class Input { features, images, signals, sequences, tokens };
// The example inputs (the batch of 2 included); tokens are ids of a vocabulary of 11.
inline Shape example_input(Input in) {
  switch (in) {
    case Input::features: return Shape{2, 8};
    case Input::images: return Shape{2, 4, 8, 8};
    case Input::signals: return Shape{2, 4, 10};
    case Input::sequences: return Shape{2, 5, 8};
    case Input::tokens: return Shape{2, 6};
  }
  return Shape{};
}
inline constexpr std::int64_t kExampleVocabulary = 11;
struct Example {
  Input input;
  const char* options;         // inline TOML after `type = "..."`
  const char* python;          // the same layer from bitgrad.nn (its arguments for the example input)
  const char* before = "";     // a layer the example needs before it (inline TOML table)
};

// rnn's nonlinearity (relu or not) and a recurrent layer's output (the last step only or all)
inline constexpr EnumName<bool> kNonlinearities[] = {{false, "tanh"}, {true, "relu"}};
inline constexpr EnumName<bool> kRnnOutputs[] = {{false, "all"}, {true, "last"}};

inline double d(std::int64_t v) { return static_cast<double>(v); }
inline double last_dim(const Shape& in) { return in.ndim() >= 1 ? d(in[in.ndim() - 1]) : 0.0; }
inline std::string needs(const LayerSpec& l, const char* key) { return std::string("(") + to_string(l.type) + ") needs '" + key + "'"; }

template <LayerKind K>
struct Layer;  // one specialization per kind, below

// What most entries share: no parameters; no options either.
struct NoParams {
  static double params(const LayerSpec&, const Shape&, const Env&) { return 0; }
};
struct NoOptions : NoParams {
  template <class V, class L>
  static void schema(V&, L&) {}
};

// An entry that is its base (shared by kinds that differ in a flag) and an example.
#define BITGRAD_LAYER_ENTRY(kind, base, ...) \
  template <>                                \
  struct Layer<LayerKind::kind> : base {     \
    static constexpr Example example{__VA_ARGS__}; \
  }

// ---- dense ------------------------------------------------------------------------------------

template <>
struct Layer<LayerKind::linear> {
  static constexpr Example example{Input::features, "out = 3", "Linear(8, 3)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("out", needs(l, "out"));
    v.integer("out", l.out, 0, 1, 1 << 24);
    v.boolean("bias", l.bias, true);
  }
  static std::int64_t outputs(const LayerSpec& l, const Env& e) { return l.out > 0 ? l.out : e.classes; }  // 0: the vocabulary (a gpt's head)
  static double params(const LayerSpec& l, const Shape& in, const Env& e) {
    const double o = d(outputs(l, e));
    return in.ndim() >= 2 ? last_dim(in) * o + (l.bias ? o : 0.0) : 0.0;
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    if (in.ndim() < 2) e.fail(": no input");
    if (in.ndim() > 3)
      e.fail(" expects inputs [N, features] or sequences [N, T, features], the layer before gives " + in.str() + "; add a flatten layer");
    return std::make_shared<nn::Linear>(in[in.ndim() - 1], outputs(l, e), l.bias);
  }
};

template <>
struct Layer<LayerKind::flatten> : NoOptions {
  static constexpr Example example{Input::images, "", "Flatten()"};
  static std::shared_ptr<nn::Module> build(const LayerSpec&, const Shape&, Env&) { return std::make_shared<nn::Flatten>(); }
};

// relu, gelu, tanh, sigmoid: no options
template <nn::Activation A>
struct ActivationEntry : NoOptions {
  static std::shared_ptr<nn::Module> build(const LayerSpec&, const Shape&, Env&) { return std::make_shared<nn::ActivationLayer>(A); }
};
BITGRAD_LAYER_ENTRY(relu, ActivationEntry<nn::Activation::relu>, Input::features, "", "ReLU()");
BITGRAD_LAYER_ENTRY(gelu, ActivationEntry<nn::Activation::gelu>, Input::features, "", "GELU()");
BITGRAD_LAYER_ENTRY(tanh, ActivationEntry<nn::Activation::tanh>, Input::features, "", "Tanh()");
BITGRAD_LAYER_ENTRY(sigmoid, ActivationEntry<nn::Activation::sigmoid>, Input::features, "", "Sigmoid()");

template <>
struct Layer<LayerKind::dropout> : NoParams {
  static constexpr Example example{Input::features, "p = 0.25", "Dropout(0.25)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("p", needs(l, "p"));
    v.number("p", l.p, 0, 0, 0.999999);
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape&, Env& e) { return std::make_shared<nn::Dropout>(l.p, e.dropout_id++); }
};

// out, kernel, stride, padding: every convolution's first options, in the file's order
template <class V, class L>
void kernel_options(V& v, L& l) {
  v.require("out", needs(l, "out"));
  v.require("kernel", needs(l, "kernel"));
  v.integer("out", l.out, 0, 1, 1 << 16);
  v.integer("kernel", l.kernel, 0, 1, 64);
  v.integer("stride", l.stride, 1, 1, 64);
  v.integer("padding", l.padding, 0, 0, 64);
}

// ---- images -----------------------------------------------------------------------------------

template <>
struct Layer<LayerKind::conv2d> {
  static constexpr Example example{Input::images, "out = 3, kernel = 3, padding = 1", "Conv2d(4, 3, 3, padding=1)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    kernel_options(v, l);
    v.boolean("bias", l.bias, true);
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) {
    return in.ndim() == 4 ? d(in[1]) * d(l.out) * d(l.kernel) * d(l.kernel) + (l.bias ? d(l.out) : 0.0) : 0.0;
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    e.need_rank(in, 4, "images [N, C, H, W]");
    ConvOptions o;
    o.stride.assign(2, l.stride);
    o.pads.assign(4, l.padding);
    return std::make_shared<nn::Conv>(in[1], l.out, std::vector<int>(2, l.kernel), o, l.bias);
  }
};

// maxpool2d, avgpool2d (numerics.md §35: PyTorch's options, each written only where not the default)
template <bool Max>
struct PoolEntry : NoParams {
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("kernel", needs(l, "kernel"));
    v.integer("kernel", l.kernel, 0, 1, 64);
    v.integer("stride", l.stride, l.kernel, 1, 64);
    v.integer("padding", l.padding, 0, 0, 32, l.padding == 0 ? kReadOnly : 0u);
    if (Max) v.integer("dilation", l.dilation, 1, 1, 64, l.dilation == 1 ? kReadOnly : 0u);
    v.boolean("ceil_mode", l.ceil_mode, false, l.ceil_mode ? 0u : kReadOnly);
    if (!Max) v.boolean("count_include_pad", l.count_include_pad, true, l.count_include_pad ? kReadOnly : 0u);
    v.check(2 * l.padding <= l.kernel, "padding",
            std::string("(") + to_string(l.type) + ") padding " + std::to_string(l.padding) + " must be at most half the kernel " + std::to_string(l.kernel));
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    e.need_rank(in, 4, "images [N, C, H, W]");
    PoolOptions o;
    o.kernel.assign(2, l.kernel);
    o.stride.assign(2, l.stride);
    o.pads.assign(4, l.padding);
    o.dilation.assign(2, l.dilation);
    o.ceil_mode = l.ceil_mode;
    o.count_include_pad = l.count_include_pad;
    return std::make_shared<nn::Pool>(Max, o);
  }
};
BITGRAD_LAYER_ENTRY(maxpool2d, PoolEntry<true>, Input::images, "kernel = 2", "MaxPool2d(2)");
BITGRAD_LAYER_ENTRY(avgpool2d, PoolEntry<false>, Input::images, "kernel = 2", "AvgPool2d(2)");

// conv, conv1d, conv_transpose2d (numerics.md §35-§37): weight [out, C / groups, k...]
// (transposed: [C, out / groups, k...]) and a bias of out
template <LayerKind K>
struct ConvEntry {
  template <class V, class L>
  static void schema(V& v, L& l) {
    kernel_options(v, l);
    // asymmetric padding: ONNX's [begin..., end...] (2 or 4 entries by the input's rank)
    v.ints("pads", l.pads, 0, 64, l.pads.empty() ? kReadOnly : 0u);
    v.check(l.pads.empty() || !v.has("padding"), "pads", std::string("(") + to_string(l.type) + ") give 'padding' or 'pads', not both");
    v.integer("dilation", l.dilation, 1, 1, 64);
    v.integer("groups", l.groups, 1, 1, 1 << 16);
    if (K == LayerKind::conv_transpose2d) v.integer("output_padding", l.output_padding, 0, 0, 63);
    v.boolean("bias", l.bias, true);
  }
  static bool one_d(const Shape& in) { return K == LayerKind::conv1d || (K == LayerKind::conv && in.ndim() == 3); }
  static double params(const LayerSpec& l, const Shape& in, const Env&) {
    if (in.ndim() < 2) return 0;
    const double k = d(l.kernel), taps = one_d(in) ? k : k * k;
    return d(in[1]) * d(l.out) / d(l.groups > 0 ? l.groups : 1) * taps + (l.bias ? d(l.out) : 0.0);
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    const bool one = one_d(in);
    e.need_rank(in, one ? 3 : 4, one ? "sequences [N, C, L]" : "images [N, C, H, W]");
    const std::size_t sp = one ? 1 : 2;
    ConvOptions o;
    o.stride.assign(sp, l.stride);
    o.pads.assign(2 * sp, l.padding);
    if (!l.pads.empty()) {  // asymmetric: ONNX's [begin..., end...]
      if (l.pads.size() != 2 * sp)
        e.fail(": pads needs " + std::to_string(2 * sp) + " entries ([begin..., end...]) for inputs " + in.str() + ", got " + std::to_string(l.pads.size()));
      o.pads = l.pads;
    }
    o.dilation.assign(sp, l.dilation);
    o.groups = l.groups;
    if (K == LayerKind::conv_transpose2d) o.output_padding.assign(sp, l.output_padding);
    return std::make_shared<nn::Conv>(in[1], l.out, std::vector<int>(sp, l.kernel), o, l.bias, K == LayerKind::conv_transpose2d);
  }
};
BITGRAD_LAYER_ENTRY(conv, ConvEntry<LayerKind::conv>, Input::images, "out = 6, kernel = 3, groups = 2, dilation = 2", "ConvNd2d(4, 6, 3, dilation=2, groups=2)");
BITGRAD_LAYER_ENTRY(conv1d, ConvEntry<LayerKind::conv1d>, Input::signals, "out = 3, kernel = 3, stride = 2", "Conv1d(4, 3, 3, stride=2)");
BITGRAD_LAYER_ENTRY(conv_transpose2d, ConvEntry<LayerKind::conv_transpose2d>, Input::images, "out = 3, kernel = 3, stride = 2, output_padding = 1", "ConvTranspose2d(4, 3, 3, stride=2, output_padding=1)");

// adaptive_avgpool2d, adaptive_maxpool2d: to size x size whatever the input's
template <bool Max>
struct AdaptivePoolEntry : NoParams {
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("size", needs(l, "size"));
    v.integer("size", l.size, 0, 1, 1 << 12);
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape&, Env&) { return std::make_shared<nn::AdaptivePool2d>(Max, l.size, l.size); }
};
BITGRAD_LAYER_ENTRY(adaptive_avgpool2d, AdaptivePoolEntry<false>, Input::images, "size = 3", "AdaptiveAvgPool2d(3)");
BITGRAD_LAYER_ENTRY(adaptive_maxpool2d, AdaptivePoolEntry<true>, Input::images, "size = 3", "AdaptiveMaxPool2d(3)");

template <>
struct Layer<LayerKind::global_avgpool> : NoOptions {
  static constexpr Example example{Input::images, "", "GlobalAvgPool()"};
  static std::shared_ptr<nn::Module> build(const LayerSpec&, const Shape&, Env&) { return std::make_shared<nn::AdaptivePool2d>(false, 1, 1); }
};

template <>
struct Layer<LayerKind::upsample> : NoParams {
  static constexpr Example example{Input::images, "scale = 2.0, bilinear = true", "Upsample(scale_factor=2.0, mode='bilinear')"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.integer("size", l.size, 0, 0, 1 << 14);
    v.number("scale", l.scale, 2.0, 0, 64);
    v.boolean("bilinear", l.bilinear, false);
    v.boolean("align_corners", l.align_corners, false);
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape&, Env&) {
    return l.size > 0 ? std::make_shared<nn::Upsample>(l.size, l.size, 0.0, 0.0, l.bilinear, l.align_corners)
                      : std::make_shared<nn::Upsample>(0, 0, l.scale, l.scale, l.bilinear, l.align_corners);
  }
};

template <>
struct Layer<LayerKind::resblock> {  // torchvision's BasicBlock (its momentum and eps: its batch norms')
  static constexpr Example example{Input::images, "out = 6, stride = 2", "BasicBlock(4, 6, stride=2)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("out", needs(l, "out"));
    v.integer("out", l.out, 0, 1, 1 << 16);
    v.integer("stride", l.stride, 1, 1, 64);
    v.number("eps", l.eps, 1e-5, 0, 1);
    v.number("momentum", l.momentum, 0.1, 0, 1);
  }
  // two 3x3 convolutions, two batch norms, the downsample's convolution and batch norm
  static double params(const LayerSpec& l, const Shape& in, const Env&) {
    if (in.ndim() != 4) return 0;
    const double C = d(in[1]), O = d(l.out);
    return 9 * C * O + 9 * O * O + 4 * O + (l.stride != 1 || in[1] != l.out ? C * O + 2 * O : 0.0);
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    e.need_rank(in, 4, "images [N, C, H, W]");
    return std::make_shared<nn::BasicBlock>(in[1], l.out, l.stride, l.eps, l.momentum);
  }
};

// ---- normalisation ----------------------------------------------------------------------------

template <>
struct Layer<LayerKind::layernorm> {
  static constexpr Example example{Input::sequences, "eps = 1e-3", "LayerNorm(8, eps=1e-3)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.number("eps", l.eps, 1e-5, 0, 1);
    v.boolean("bias", l.bias, true);
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) { return in.ndim() >= 2 ? (l.bias ? 2 : 1) * last_dim(in) : 0.0; }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    if (in.ndim() < 2) e.fail(": no input");
    return std::make_shared<nn::LayerNorm>(in[in.ndim() - 1], l.eps, l.bias);
  }
};

template <>
struct Layer<LayerKind::batchnorm> {
  static constexpr Example example{Input::images, "momentum = 0.2", "BatchNorm2d(4, momentum=0.2)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.number("eps", l.eps, 1e-5, 0, 1);
    v.number("momentum", l.momentum, 0.1, 0, 1);
    v.boolean("affine", l.bias, true);
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) { return in.ndim() >= 2 && l.bias ? 2 * d(in[1]) : 0.0; }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    if (in.ndim() < 2 || in.ndim() > 4)
      e.fail(" expects [N, C], [N, C, L] (BatchNorm1d) or images [N, C, H, W] (BatchNorm2d), the layer before gives " + in.str());
    return std::make_shared<nn::BatchNorm>(in.ndim() == 4 ? 2 : 1, in[1], l.eps, l.momentum, l.bias);
  }
};

template <>
struct Layer<LayerKind::rmsnorm> {
  static constexpr Example example{Input::sequences, "affine = true", "RMSNorm([8])"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.number("eps", l.eps, 1e-5, 0, 1);
    v.boolean("affine", l.affine, true);  // PyTorch's default
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) { return in.ndim() >= 2 && l.affine ? last_dim(in) : 0.0; }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    if (in.ndim() < 2) e.fail(": no input");
    return std::make_shared<nn::RMSNorm>(std::vector<std::int64_t>{in[in.ndim() - 1]}, l.eps, l.affine);
  }
};

// groupnorm, instancenorm (GroupNorm with a group per channel)
template <bool Instance>
struct GroupNormEntry {
  template <class V, class L>
  static void schema(V& v, L& l) {
    if (!Instance) {
      v.require("groups", needs(l, "groups"));
      v.integer("groups", l.groups, 0, 1, 1 << 16);
    }
    v.number("eps", l.eps, 1e-5, 0, 1);
    v.boolean("affine", l.affine, !Instance);  // PyTorch's defaults
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) { return in.ndim() >= 2 && l.affine ? 2 * d(in[1]) : 0.0; }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    if (in.ndim() < (Instance ? 3 : 2)) e.fail(" expects inputs [N, C, ...], the layer before gives " + in.str());
    return std::make_shared<nn::GroupNorm>(l.groups, in[1], l.eps, l.affine, Instance);
  }
};
BITGRAD_LAYER_ENTRY(groupnorm, GroupNormEntry<false>, Input::images, "groups = 2", "GroupNorm(2, 4)");
BITGRAD_LAYER_ENTRY(instancenorm, GroupNormEntry<true>, Input::images, "affine = true", "InstanceNorm(4, affine=True)");

// ---- sequences --------------------------------------------------------------------------------

template <>
struct Layer<LayerKind::embedding> {
  static constexpr Example example{Input::tokens, "dim = 8", "TokenEmbedding(11, 6, 8)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("dim", needs(l, "dim"));
    v.integer("dim", l.out, 0, 1, 1 << 16);
    v.number("dropout", l.p, 0, 0, 0.999999);
  }
  // token and position tables
  static double params(const LayerSpec& l, const Shape& in, const Env& e) { return in.ndim() == 2 ? d(e.classes + in[1]) * d(l.out) : 0.0; }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    if (in.ndim() != 2 || e.classes <= 0 || !e.token_windows)
      e.fail(" expects token windows [N, T] of a text dataset, the layer before gives " + in.str());
    auto m = std::make_shared<nn::TokenEmbedding>(e.classes, in[1], l.out, l.p, e.dropout_id++);
    e.embed = m.get();
    return m;
  }
};

template <>
struct Layer<LayerKind::transformer_block> {
  static constexpr Example example{Input::sequences, "n_head = 2", "TransformerBlock(8, 2, n_layer=1)"};
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("n_head", needs(l, "n_head"));
    v.integer("n_head", l.n_head, 0, 1, 1 << 12);
    v.number("dropout", l.p, 0, 0, 0.999999);
    v.boolean("bias", l.bias, true);
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) {
    const double D = last_dim(in);
    return in.ndim() == 3 ? 12 * D * D + (l.bias ? 13 * D : 2 * D) : 0.0;  // biases 9 D, two layer norms 4 D (2 D without bias)
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    e.need_rank(in, 3, "sequences [N, T, D]");
    if (in[2] % l.n_head != 0) e.fail(": n_embd " + std::to_string(in[2]) + " is not divisible by n_head " + std::to_string(l.n_head));
    std::int64_t blocks = 0;  // the residual projections' initialisation scales with the depth
    if (e.all)
      for (const LayerSpec& b : *e.all) blocks += b.type == LayerKind::transformer_block;
    auto m = std::make_shared<nn::TransformerBlock>(in[2], l.n_head, l.p, l.bias, blocks > 0 ? blocks : 1, e.dropout_id);
    e.dropout_id += nn::TransformerBlock::kDropouts;
    return m;
  }
};

template <>
struct Layer<LayerKind::tied_head> : NoOptions {  // its weight is the embedding's table: no parameters of its own
  static constexpr Example example{Input::tokens, "", "", "{ type = \"embedding\", dim = 8 }"};
  static std::shared_ptr<nn::Module> build(const LayerSpec&, const Shape&, Env& e) {
    if (!e.embed) e.fail(" ties the output to an embedding; put an embedding layer before it");
    return std::make_shared<nn::TiedHead>(e.embed->wte);
  }
};

// rnn, lstm, gru: hidden size in `out`, gates G per step, num_layers stacked
template <LayerKind K>
struct RecurrentEntry {
  template <class V, class L>
  static void schema(V& v, L& l) {
    v.require("hidden", needs(l, "hidden"));
    v.integer("hidden", l.out, 0, 1, 1 << 16);
    v.integer("num_layers", l.num_layers, 1, 1, 64);
    if (K == LayerKind::rnn) v.choice("nonlinearity", l.relu, false, kNonlinearities);
    v.boolean("bias", l.bias, true);
    v.choice("output", l.last_only, false, kRnnOutputs);
  }
  static double params(const LayerSpec& l, const Shape& in, const Env&) {
    if (in.ndim() != 3) return 0;
    const double G = K == LayerKind::lstm ? 4 : K == LayerKind::gru ? 3 : 1, H = d(l.out), b = l.bias ? 2 : 0;
    return G * H * (last_dim(in) + H + b) + d(l.num_layers - 1) * G * H * (2 * H + b);
  }
  static std::shared_ptr<nn::Module> build(const LayerSpec& l, const Shape& in, Env& e) {
    e.need_rank(in, 3, "sequences [N, T, features] (e.g. after an embedding)");
    const RnnMode mode = K == LayerKind::lstm ? RnnMode::lstm : K == LayerKind::gru ? RnnMode::gru : l.relu ? RnnMode::rnn_relu : RnnMode::rnn_tanh;
    return std::make_shared<nn::Recurrent>(mode, in[2], l.out, l.num_layers, l.bias, true, l.last_only);
  }
};
BITGRAD_LAYER_ENTRY(rnn, RecurrentEntry<LayerKind::rnn>, Input::sequences, "hidden = 5, nonlinearity = \"relu\"", "RNN(8, 5, nonlinearity='relu', batch_first=True)");
BITGRAD_LAYER_ENTRY(lstm, RecurrentEntry<LayerKind::lstm>, Input::sequences, "hidden = 5, num_layers = 2", "LSTM(8, 5, num_layers=2, batch_first=True)");
BITGRAD_LAYER_ENTRY(gru, RecurrentEntry<LayerKind::gru>, Input::sequences, "hidden = 5, bias = false", "GRU(8, 5, bias=False, batch_first=True)");

#undef BITGRAD_LAYER_ENTRY

// ---- the table --------------------------------------------------------------------------------

// The TOML names, in the list's order (errors list them so).
inline constexpr EnumName<LayerKind> kNames[] = {
#define BITGRAD_LAYER_NAME(name) {LayerKind::name, #name},
    BITGRAD_LAYER_KINDS(BITGRAD_LAYER_NAME)
#undef BITGRAD_LAYER_NAME
};

// f(Layer<K>{}) for the entry of k (a kind cast from an out-of-range integer is an error).
template <class F>
decltype(auto) with_entry(LayerKind k, F&& f) {
  switch (k) {
#define BITGRAD_LAYER_CASE(name) \
  case LayerKind::name: return f(Layer<LayerKind::name>{});
    BITGRAD_LAYER_KINDS(BITGRAD_LAYER_CASE)
#undef BITGRAD_LAYER_CASE
  }
  throw Error("layer kind " + std::to_string(static_cast<int>(k)) + " is not in the layer table");
}

// Every entry in the list's order: f(Layer<K>{}, K).
template <class F>
void for_each_entry(F&& f) {
#define BITGRAD_LAYER_EACH(name) f(Layer<LayerKind::name>{}, LayerKind::name);
  BITGRAD_LAYER_KINDS(BITGRAD_LAYER_EACH)
#undef BITGRAD_LAYER_EACH
}

}  // namespace bitgrad::train::layers
