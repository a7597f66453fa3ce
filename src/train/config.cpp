// Configuration files (TOML). Every key is checked: an unknown key or a wrong type is an error
// "FILE:LINE: ..." naming the key, so a typo never falls back to a default silently.
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "bitgrad/enum_names.hpp"
#include "bitgrad/error.hpp"
// toml++ checks its own invariants with assert (an abort of the whole process on some malformed
// inputs: the fuzzer found "[\0..." in a table header); here a failed check is an error about
// the file like any other.
namespace bitgrad::train::detail {
[[noreturn]] inline void toml_check_failed(const char* what) {
  throw Error(std::string("malformed TOML (the parser's check '") + what + "' failed)");
}
}  // namespace bitgrad::train::detail
#define TOML_ASSERT(expr) ((expr) ? static_cast<void>(0) : ::bitgrad::train::detail::toml_check_failed(#expr))
#include <toml++/toml.h>

#include "bitgrad/io.hpp"
#include "bitgrad/train.hpp"
#include "bitgrad/version.hpp"
#include "io/format.hpp"
#include "train/layer_table.hpp"
#include "train/schema_keys.hpp"

namespace bitgrad::train {
namespace {

// A configuration is a few hundred bytes; a megabyte is generous and keeps `bitgrad train
// /dev/zero`-like mistakes from reading without end.
constexpr std::uint64_t kMaxConfigBytes = 1 << 20;

// The spellings of each choice in the configuration file, in the order errors list them.
constexpr EnumName<DatasetKind> kDatasets[] = {
    {DatasetKind::fashion_mnist, "fashion-mnist"}, {DatasetKind::csv, "csv"}, {DatasetKind::adder, "adder"}, {DatasetKind::synthetic, "synthetic"},
    {DatasetKind::text, "text"}};
constexpr EnumName<LossKind> kLosses[] = {{LossKind::cross_entropy, "cross_entropy"}, {LossKind::mse, "mse"},
                                          // numerics.md §30, §41
                                          {LossKind::l1, "l1"}, {LossKind::smooth_l1, "smooth_l1"}, {LossKind::huber, "huber"},
                                          {LossKind::bce_with_logits, "bce_with_logits"}};
constexpr EnumName<OptimizerKind> kOptimizers[] = {{OptimizerKind::sgd, "sgd"}, {OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}};
constexpr EnumName<optim::Schedule::Kind> kSchedules[] = {
    {optim::Schedule::Kind::constant, "constant"}, {optim::Schedule::Kind::step, "step"}, {optim::Schedule::Kind::cosine, "cosine"}};
constexpr EnumName<nn::Init> kInits[] = {{nn::Init::kaiming_uniform, "kaiming_uniform"},
                                         {nn::Init::kaiming_normal, "kaiming_normal"},
                                         {nn::Init::xavier_uniform, "xavier_uniform"},
                                         {nn::Init::xavier_normal, "xavier_normal"},
                                         {nn::Init::zeros, "zeros"},
                                         {nn::Init::gpt2, "gpt2"}};
constexpr EnumName<nn::Recompute> kRecomputes[] = {{nn::Recompute::none, "none"}, {nn::Recompute::blocks, "blocks"}, {nn::Recompute::all, "all"}};
constexpr EnumName<Precision> kPrecisions[] = {{Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::fp16, "fp16"}};
// two-way choices kept as booleans in Config
constexpr EnumName<bool> kModelTypes[] = {{false, "layers"}, {true, "gpt"}};
constexpr EnumName<bool> kVocabularies[] = {{false, "characters"}, {true, "bytes"}};
constexpr EnumName<bool> kRoundings[] = {{false, "nearest"}, {true, "stochastic"}};
constexpr EnumName<bool> kDecays[] = {{false, "all"}, {true, "matrices"}};

[[noreturn]] void fail_at(const std::string& file, int line, const std::string& what) {
  throw Error(file + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + what);
}

int line_of(const toml::node* n) { return n ? static_cast<int>(n->source().begin.line) : 0; }

const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}

// A table whose keys are read one by one; finish() rejects the ones nobody read.
class Section {
 public:
  Section(const toml::table* t, std::string name, const std::string& file, int line)
      : t_(t), name_(std::move(name)), file_(file), line_(line) {}

  std::string where() const {
    if (name_.empty()) return "top level";
    return name_.find('.') != std::string::npos ? name_ : "[" + name_ + "]";  // model.layers[i] is not a section
  }

  const toml::node* node(const char* key) {
    seen_.insert(key);
    return t_ ? t_->get(key) : nullptr;
  }
  std::int64_t integer(const char* key, std::int64_t def, std::int64_t lo, std::int64_t hi) {
    const toml::node* n = node(key);
    if (!n) return def;
    if (!n->is_integer()) fail_at(file_, line_of(n), where() + " " + key + " must be an integer, got " + type_name(*n));
    const std::int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      fail_at(file_, line_of(n), where() + " " + key + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                     std::to_string(v));
    return v;
  }
  double number(const char* key, double def, double lo, double hi) {
    const toml::node* n = node(key);
    if (!n) return def;
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else fail_at(file_, line_of(n), where() + " " + key + " must be a number, got " + type_name(*n));
    if (!(v >= lo && v <= hi)) {
      std::ostringstream os;
      os << where() << " " << key << " must be in [" << lo << ", " << hi << "], got " << v;
      fail_at(file_, line_of(n), os.str());
    }
    return v;
  }
  bool boolean(const char* key, bool def) {
    const toml::node* n = node(key);
    if (!n) return def;
    if (!n->is_boolean()) fail_at(file_, line_of(n), where() + " " + key + " must be true or false, got " + type_name(*n));
    return n->as_boolean()->get();
  }
  std::string string(const char* key, const std::string& def, const std::vector<std::string>& allowed = {}) {
    const toml::node* n = node(key);
    if (!n) return def;
    if (!n->is_string()) fail_at(file_, line_of(n), where() + " " + key + " must be a string, got " + type_name(*n));
    std::string v = n->as_string()->get();
    if (!allowed.empty()) {
      bool ok = false;
      std::string list;
      for (const auto& a : allowed) {
        ok = ok || a == v;
        list += (list.empty() ? "" : ", ") + a;
      }
      if (!ok) fail_at(file_, line_of(n), where() + " " + key + " is '" + printable_excerpt(v) + "'; expected one of " + list);
    }
    return v;
  }
  // A non-empty array of positive integers (a shape).
  std::vector<std::int64_t> dims(const char* key, std::vector<std::int64_t> def) {
    const toml::node* n = node(key);
    if (!n) return def;
    const std::string what = where() + " " + key + " must be a non-empty array of positive integers (at most 4, product at most 2^24)";
    if (!n->is_array() || n->as_array()->empty() || n->as_array()->size() > 4) fail_at(file_, line_of(n), what);
    std::vector<std::int64_t> v;
    std::int64_t product = 1;
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_integer() || e.as_integer()->get() < 1 || e.as_integer()->get() > (1 << 24)) fail_at(file_, line_of(n), what);
      v.push_back(e.as_integer()->get());
      product *= v.back();
      if (product > (1 << 24)) fail_at(file_, line_of(n), what);
    }
    return v;
  }
  template <class E, std::size_t N>
  E choice(const char* key, E def, const EnumName<E> (&table)[N]) {
    std::vector<std::string> names;
    for (const auto& n : table) names.push_back(n.name);
    return enum_from_name(table, string(key, enum_name(table, def), names)).value_or(def);
  }
  void finish() {
    if (!t_) return;
    for (auto&& [k, v] : *t_) {
      const std::string key(k.str());
      if (!seen_.count(key)) {
        std::string known;
        for (const auto& s : seen_) known += (known.empty() ? "" : ", ") + s;
        fail_at(file_, line_of(&v), "unknown key '" + printable_excerpt(key) + "' in " + where() + " (known keys: " + known + ")");
      }
    }
  }
  const toml::table* table() const { return t_; }
  int line() const { return line_; }

 private:
  const toml::table* t_;
  std::string name_;
  const std::string& file_;
  int line_;
  std::set<std::string> seen_;
};

Section sub(const toml::table& root, const char* name, const std::string& file) {
  const toml::node* n = root.get(name);
  if (!n) return Section(nullptr, name, file, 0);
  if (!n->is_table()) fail_at(file, line_of(n), std::string("[") + name + "] must be a table, got " + type_name(*n));
  return Section(n->as_table(), name, file, line_of(n));
}

std::string toml_float(double v) {
  std::string s = io::strprintf("%.17g", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // a TOML float
  return s;
}
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// ---- The schema: every key of the file, written once. ----
//
// schema() walks the keys in the file's order with a visitor: Reader parses and checks them
// (errors "FILE:LINE: [section] key ..."), Writer prints the resolved TOML or the text the
// config hash covers. A key is visited only where it applies (the keys of the dataset, model,
// optimizer and schedule chosen); its default may depend on keys visited before it. Its flags:
// train/schema_keys.hpp.

// The layers a gpt stands for (docs/cli.md): the same model as this layer list.
std::vector<LayerSpec> gpt_layers(const Config& c, int line) {
  std::vector<LayerSpec> layers;
  LayerSpec e;
  e.type = LayerKind::embedding, e.out = c.model.gpt.n_embd, e.p = c.model.gpt.dropout, e.line = line;
  layers.push_back(e);
  for (std::int64_t i = 0; i < c.model.gpt.n_layer; ++i) {
    LayerSpec b;
    b.type = LayerKind::transformer_block, b.n_head = c.model.gpt.n_head, b.p = c.model.gpt.dropout, b.bias = c.model.gpt.bias, b.line = line;
    layers.push_back(b);
  }
  LayerSpec ln;
  ln.type = LayerKind::layernorm, ln.bias = c.model.gpt.bias, ln.line = line;
  layers.push_back(ln);
  LayerSpec head;
  head.type = c.model.gpt.tie_weights ? LayerKind::tied_head : LayerKind::linear, head.out = 0, head.bias = false, head.line = line;
  layers.push_back(head);  // linear: out = the vocabulary, set when the data is known
  return layers;
}

// One entry of [model] layers (L: LayerSpec or const LayerSpec): its type, then its entry's options.
template <class V, class L>
void layer_schema(V& v, L& l) {
  v.require("type", "needs a type");
  v.choice("type", l.type, LayerKind::linear, layers::kNames);
  layers::with_entry(l.type, [&v, &l](auto entry) { decltype(entry)::schema(v, l); });
}

// The whole file (C: Config or const Config).
template <class V, class C>
void schema(V& v, C& c) {
  constexpr std::int64_t kBig = INT64_MAX / 2;
  v.integer("seed", c.seed, 0, 0, INT64_MAX, kEarly);

  v.section("data");
  v.choice("dataset", c.data.dataset, DatasetKind::fashion_mnist, kDatasets, kEarly);
  switch (c.data.dataset) {
    case DatasetKind::fashion_mnist:
      v.string("path", c.data.path, data::kFashionMnistDir);
      v.boolean("normalize", c.data.normalize, true);
      break;
    case DatasetKind::csv:
      v.require("train", "dataset = \"csv\" needs 'train' (a CSV file)");
      v.string("train", c.data.train_csv, "");
      v.string("test", c.data.test_csv, "");
      v.boolean("header", c.data.csv_header, false);
      v.integer("label_column", c.data.label_column, -1, -1, 1 << 20);
      v.integer("targets", c.data.targets, 1, 1, 1 << 20);
      v.boolean("allow_nonfinite", c.data.allow_nonfinite, false);
      break;
    case DatasetKind::adder:
      v.integer("samples", c.data.samples, 100000, 1, kBig);
      v.integer("test_samples", c.data.test_samples, 10000, 0, kBig);
      v.integer("features", c.data.features, 10, 1, 1 << 20);
      break;
    case DatasetKind::text:
      v.string("path", c.data.path, data::kFortunesDir);
      v.choice("vocabulary", c.data.text_bytes, false, kVocabularies);
      v.number("val_fraction", c.data.val_fraction, 0.1, 0.0, 0.9);
      if (!c.model.gpt.on) {
        v.integer("block_size", c.data.block_size, 0, 0, 1 << 16);
        v.check(c.data.block_size > 0, nullptr, "[data] dataset = \"text\" with a layer list needs block_size (tokens per window)");
      } else {
        std::int64_t unused = 0;
        v.integer("block_size", unused, 0, 0, 1 << 16, kReadOnly);
        v.check(unused == 0, "block_size", "[model] type = \"gpt\" sets block_size; remove it from [data]");
      }
      break;
    case DatasetKind::synthetic:
      v.integer("samples", c.data.samples, 1000, 1, 1 << 24);
      v.integer("test_samples", c.data.test_samples, 0, 0, 1 << 24);
      v.dims("shape", c.data.shape, {8});
      v.integer("classes", c.data.classes, 10, 0, 1 << 20);
      if (c.data.classes == 0) v.integer("targets", c.data.targets, 1, 1, 1 << 20);
      break;
  }
  v.integer("crop_padding", c.data.crop_padding, 0, 0, 64);
  v.boolean("hflip", c.data.hflip, false);

  v.section("model");
  v.choice("init", c.model.init, c.model.gpt.on ? nn::Init::gpt2 : nn::Init::kaiming_uniform, kInits);
  v.choice("recompute", c.model.recompute, nn::Recompute::none, kRecomputes, kUnhashed);  // T9: the same bits
  v.choice("type", c.model.gpt.on, false, kModelTypes, kEarly | (c.model.gpt.on ? 0u : kReadOnly));
  // an ONNX file as the model; written (and hashed) only when set, so no other hash changes
  if (v.has("onnx") || !c.model.onnx.empty()) {
    v.string("onnx", c.model.onnx, "", kEarly);
    v.check(!c.model.onnx.empty(), "onnx", "[model] onnx is empty; give an ONNX file");
    v.check(!c.model.gpt.on, "onnx", "[model] onnx is the model; remove type = \"gpt\"");
    v.check(!v.has("layers"), "layers", "[model] onnx = \"...\" is the model; remove 'layers'");
  }
  if (c.model.gpt.on) {
    v.check(c.data.dataset == DatasetKind::text, nullptr, "[model] type = \"gpt\" needs token data: [data] dataset = \"text\"");
    v.check(!v.has("layers"), "layers", "[model] type = \"gpt\" builds its own layers; remove 'layers'");
    v.integer("n_layer", c.model.gpt.n_layer, 4, 1, 1 << 10);
    v.integer("n_head", c.model.gpt.n_head, 4, 1, 1 << 12);
    v.integer("n_embd", c.model.gpt.n_embd, 128, 1, 1 << 16);
    v.integer("block_size", c.data.block_size, 64, 1, 1 << 16);
    v.number("dropout", c.model.gpt.dropout, 0.0, 0.0, 0.999999);
    v.boolean("bias", c.model.gpt.bias, true);
    v.boolean("tie_weights", c.model.gpt.tie_weights, false);
    v.check(c.model.gpt.n_head > 0 && c.model.gpt.n_embd % c.model.gpt.n_head == 0, "n_embd",
            "[model] n_embd " + std::to_string(c.model.gpt.n_embd) + " is not divisible by n_head " + std::to_string(c.model.gpt.n_head));
    v.derive(c.model.layers, [&c](int line) { return gpt_layers(c, line); });
  }
  v.layers("layers", c.model.layers, c.model.gpt.on || !c.model.onnx.empty());

  v.section("train");
  v.integer("batch_size", c.train.batch_size, 128, 1, 1 << 24);
  v.integer("epochs", c.train.epochs, 1, 0, 1 << 20);
  v.integer("steps", c.train.steps, 0, 0, kBig);
  v.choice("loss", c.train.loss, LossKind::cross_entropy, kLosses);
  // the loss's options; cross_entropy's only where not the default (kReadOnly: neither
  // in the resolved file nor in the hash), so the configurations written before them hash as before
  if (c.train.loss == LossKind::cross_entropy) {
    v.number("label_smoothing", c.train.label_smoothing, 0.0, 0.0, 1.0, c.train.label_smoothing == 0 ? kReadOnly : 0u);
    v.numbers("class_weights", c.train.class_weights, c.train.class_weights_line, c.train.class_weights.empty() ? kReadOnly : 0u);
    v.integer("ignore_index", c.train.ignore_index, -100, -(std::int64_t{1} << 62), std::int64_t{1} << 62, c.train.ignore_index == -100 ? kReadOnly : 0u);
  }
  if (c.train.loss == LossKind::smooth_l1) v.number("beta", c.train.beta, 1.0, 0.0, 1e300);
  if (c.train.loss == LossKind::huber) v.number("delta", c.train.delta, 1.0, 1e-300, 1e300);
  v.number("clip_grad_norm", c.train.clip_grad_norm, 0.0, 0.0, 1e300);
  v.boolean("shuffle", c.train.shuffle, true);
  v.boolean("drop_last", c.train.drop_last, true);
  v.integer("accumulate", c.train.accumulate, 1, 1, 1 << 20, kUnhashed);  // exact when T5 holds
  v.integer("log_every", c.train.log_every, 0, 0, kBig, kUnhashed);
  // mixed precision: in the hash only when not fp32, so the hashes of f32 runs stay as they were
  const unsigned mixed = c.train.precision == Precision::fp32 ? kUnhashed : 0u;
  v.choice("precision", c.train.precision, Precision::fp32, kPrecisions, mixed);
  v.choice("rounding", c.train.stochastic_rounding, false, kRoundings, mixed);
  v.check(!c.train.stochastic_rounding || c.train.precision != Precision::fp32, "rounding",
          "[train] rounding = \"stochastic\" needs precision = \"bf16\" or \"fp16\"");
  v.scale("loss_scale", c.train.loss_scale, c.train.precision == Precision::fp16 ? 0.0 : 1.0, mixed);
  v.integer("loss_scale_interval", c.train.loss_scale_interval, 2000, 1, kBig, mixed);
  v.check(c.train.accumulate > 0 && c.train.batch_size % c.train.accumulate == 0, nullptr,
          "[train] batch_size " + std::to_string(c.train.batch_size) + " is not divisible by accumulate " + std::to_string(c.train.accumulate));

  v.section("optimizer");
  v.choice("type", c.optimizer.type, OptimizerKind::sgd, kOptimizers);
  v.number("lr", c.optimizer.lr, 0.01, 0.0, 1e6);
  if (c.optimizer.type == OptimizerKind::sgd) {
    v.number("momentum", c.optimizer.momentum, 0.0, 0.0, 1.0);
    v.boolean("nesterov", c.optimizer.nesterov, false);
  } else {
    v.number("beta1", c.optimizer.beta1, 0.9, 0.0, 0.999999999);
    v.number("beta2", c.optimizer.beta2, 0.999, 0.0, 0.999999999);
    v.number("eps", c.optimizer.eps, 1e-8, 1e-300, 1.0);
  }
  v.number("weight_decay", c.optimizer.weight_decay, 0.0, 0.0, 1e6);
  if (c.optimizer.type != OptimizerKind::sgd) v.choice("decay", c.optimizer.decay_matrices_only, c.model.gpt.on, kDecays);
  v.check(!c.optimizer.nesterov || c.optimizer.momentum != 0, nullptr, "[optimizer] nesterov needs momentum > 0");

  v.section("schedule");
  v.choice("type", c.schedule.type, optim::Schedule::Kind::constant, kSchedules);
  v.integer("warmup_steps", c.schedule.warmup_steps, 0, 0, kBig);
  if (c.schedule.type == optim::Schedule::Kind::step) {
    v.number("gamma", c.schedule.gamma, 0.1, 0.0, 1e6);
    v.integer("step_size", c.schedule.step_size, 1000, 1, kBig);
  } else if (c.schedule.type == optim::Schedule::Kind::cosine) {
    v.number("min_lr", c.schedule.min_lr, 0.0, 0.0, 1e6);
  }

  v.section("eval");
  v.integer("batch_size", c.eval.batch_size, 1000, 1, 1 << 24);
  v.boolean("each_epoch", c.eval.each_epoch, c.eval.every == 0);  // `every` alone: no evaluation at epoch ends
  v.integer("every", c.eval.every, 0, 0, kBig, kEarly);
  if (c.data.dataset == DatasetKind::text) v.integer("windows", c.eval.windows, 0, 0, kBig);

  v.section("run", kUnhashed);  // cannot change a result
  v.integer("threads", c.run.threads, 0, 0, 4096, kUnhashed);
  v.integer("workers", c.run.workers, 0, 0, 256, kUnhashed);
}

// Parses a file along the schema: a first pass reads the kEarly keys, the second all of them.
class Reader {
 public:
  Reader(const toml::table& root, const std::string& file) : root_(root), file_(file), top_(&root, "", file, 1) {}

  void pass(bool early) {
    early_ = early;
    cur_.reset();
  }
  void end() {
    if (early_) top_.finish();  // unknown sections first
    else if (cur_) cur_->finish();
    cur_.reset();
  }

  void section(const char* name, unsigned = 0) {
    if (early_) top_.node(name);
    else if (cur_) cur_->finish();
    cur_.emplace(sub(root_, name, file_));
  }
  template <class T>
  void integer(const char* key, T& f, std::int64_t def, std::int64_t lo, std::int64_t hi, unsigned flags = 0) {
    if (!skip(flags)) f = static_cast<T>(s().integer(key, def, lo, hi));
  }
  void number(const char* key, double& f, double def, double lo, double hi, unsigned flags = 0) {
    if (!skip(flags)) f = s().number(key, def, lo, hi);
  }
  void boolean(const char* key, bool& f, bool def, unsigned flags = 0) {
    if (!skip(flags)) f = s().boolean(key, def);
  }
  void string(const char* key, std::string& f, const std::string& def, unsigned flags = 0) {
    if (!skip(flags)) f = s().string(key, def);
  }
  template <class E, std::size_t N>
  void choice(const char* key, E& f, E def, const EnumName<E> (&table)[N], unsigned flags = 0) {
    if (!skip(flags)) f = s().choice(key, def, table);
  }
  void dims(const char* key, std::vector<std::int64_t>& f, std::vector<std::int64_t> def, unsigned flags = 0) {
    if (!skip(flags)) f = s().dims(key, std::move(def));
  }
  // A non-empty array of integers in [lo, hi] (at most 8).
  void ints(const char* key, std::vector<int>& f, int lo, int hi, unsigned flags = 0) {
    if (skip(flags)) return;
    f.clear();
    const toml::node* n = s().node(key);
    if (!n) return;
    const std::string what = s().where() + " " + key + " must be a non-empty array of at most 8 integers in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]";
    if (!n->is_array() || n->as_array()->empty() || n->as_array()->size() > 8) fail_at(file_, line_of(n), what);
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_integer() || e.as_integer()->get() < lo || e.as_integer()->get() > hi) fail_at(file_, line_of(n), what);
      f.push_back(static_cast<int>(e.as_integer()->get()));
    }
  }
  // A non-empty array of finite numbers >= 0 (class weights); `line` gets the key's line.
  void numbers(const char* key, std::vector<double>& f, int& line, unsigned flags = 0) {
    if (skip(flags)) return;
    f.clear();
    const toml::node* n = s().node(key);
    if (!n) return;
    line = line_of(n);
    const std::string what = s().where() + " " + key + " must be a non-empty array of numbers >= 0 (at most 2^20)";
    if (!n->is_array() || n->as_array()->empty() || n->as_array()->size() > (1u << 20)) fail_at(file_, line, what);
    for (const toml::node& e : *n->as_array()) {
      double v = -1;
      if (e.is_floating_point()) v = e.as_floating_point()->get();
      else if (e.is_integer()) v = static_cast<double>(e.as_integer()->get());
      if (!(v >= 0 && v <= 1e300)) fail_at(file_, line, what);
      f.push_back(v);
    }
  }
  // A power of two (so that scaling is exact) or "dynamic" (0).
  void scale(const char* key, double& f, double def, unsigned flags = 0) {
    if (skip(flags)) return;
    f = def;
    const toml::node* n = s().node(key);
    if (!n) return;
    if (n->is_string()) {
      if (n->as_string()->get() != "dynamic")
        fail_at(file_, line_of(n), s().where() + " " + key + " must be \"dynamic\" or a power of two, got \"" + printable_excerpt(n->as_string()->get()) + "\"");
      f = 0;
      return;
    }
    f = s().number(key, 1, 0x1p-24, 0x1p64);
    int ex = 0;
    if (std::frexp(f, &ex) != 0.5)
      fail_at(file_, line_of(n), s().where() + " " + key + " must be \"dynamic\" or a power of two (so that scaling is exact), got " + toml_float(f));
  }
  void layers(const char*, std::vector<LayerSpec>& f, bool derived) {
    if (early_ || derived) return;
    const toml::node* ln = s().node("layers");
    if (!ln) fail_at(file_, s().line(), "[model] needs 'layers', a list of { type = ... } tables (or type = \"gpt\")");
    if (!ln->is_array()) fail_at(file_, line_of(ln), std::string("[model] layers must be an array of tables, got ") + type_name(*ln));
    const toml::array& arr = *ln->as_array();
    if (arr.empty()) fail_at(file_, line_of(ln), "[model] layers is empty");
    f.clear();
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const toml::node& e = arr[i];
      if (!e.is_table()) fail_at(file_, line_of(&e), "model.layers[" + std::to_string(i) + "] must be a table, got " + type_name(e));
      layer_.emplace(e.as_table(), "model.layers[" + std::to_string(i) + "]", file_, line_of(&e));
      LayerSpec l;
      l.line = line_of(&e);
      layer_schema(*this, l);
      layer_->finish();
      layer_.reset();
      f.push_back(l);
    }
  }
  template <class T, class F>
  void derive(T& f, F make) {
    if (!early_) f = make(s().line());
  }

  bool has(const char* key) { return s().table() && s().table()->get(key); }
  void require(const char* key, const std::string& what) {
    if (!early_ && !has(key)) fail_at(file_, s().line(), s().where() + " " + what);
  }
  // A rule across keys; the error names the line of `key` (else of the section).
  void check(bool ok, const char* key, const std::string& what) {
    if (early_ || ok) return;
    const toml::node* n = key && s().table() ? s().table()->get(key) : nullptr;
    fail_at(file_, n ? line_of(n) : s().line(), what);
  }

 private:
  bool skip(unsigned flags) const { return early_ && !(flags & kEarly); }
  Section& s() { return layer_ ? *layer_ : cur_ ? *cur_ : top_; }

  const toml::table& root_;
  const std::string& file_;
  Section top_;
  std::optional<Section> cur_, layer_;
  bool early_ = true;
};

// Prints along the schema: the resolved TOML, or the text the config hash covers. The hash's
// text is config format 1: each applicable key as `key = value` in the schema's order, the
// value in its type's one spelling (integers in decimal, numbers as %.17g with a '.0' where
// that has no '.', 'e' or 'n', booleans as true/false, strings and choices quoted with '"'
// and '\' escaped), "\n[section]" before each section. Runs record this hash and resume only
// under it, so it must never change for a given configuration: config_schema_test pins it.
class Writer {
 public:
  explicit Writer(bool for_hash) : hash_(for_hash) {}
  std::string text() const { return o_.str(); }

  void section(const char* name, unsigned flags = 0) {
    skip_section_ = hash_ && (flags & kUnhashed);
    if (!skip_section_) o_ << "\n[" << name << "]\n";
  }
  template <class T>
  void integer(const char* key, const T& f, std::int64_t, std::int64_t, std::int64_t, unsigned flags = 0) {
    put(key, std::to_string(f), flags);
  }
  void number(const char* key, double f, double, double, double, unsigned flags = 0) { put(key, toml_float(f), flags); }
  void boolean(const char* key, bool f, bool, unsigned flags = 0) { put(key, f ? "true" : "false", flags); }
  void string(const char* key, const std::string& f, const std::string&, unsigned flags = 0) { put(key, toml_string(f), flags); }
  template <class E, std::size_t N>
  void choice(const char* key, E f, E, const EnumName<E> (&table)[N], unsigned flags = 0) {
    put(key, toml_string(enum_name(table, f)), flags);
  }
  void dims(const char* key, const std::vector<std::int64_t>& f, const std::vector<std::int64_t>&, unsigned flags = 0) {
    std::string s = "[";
    for (std::size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + std::to_string(f[i]);
    put(key, s + "]", flags);
  }
  void scale(const char* key, double f, double, unsigned flags = 0) { put(key, f == 0 ? std::string("\"dynamic\"") : toml_float(f), flags); }
  void ints(const char* key, const std::vector<int>& f, int, int, unsigned flags = 0) {
    std::string s = "[";
    for (std::size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + std::to_string(f[i]);
    put(key, s + "]", flags);
  }
  void numbers(const char* key, const std::vector<double>& f, int, unsigned flags = 0) {
    std::string s = "[";
    for (std::size_t i = 0; i < f.size(); ++i) s += (i ? ", " : "") + toml_float(f[i]);
    put(key, s + "]", flags);
  }
  // The layer list; a gpt's as comments (the layers it stands for).
  void layers(const char* key, const std::vector<LayerSpec>& f, bool derived) {
    const char* prefix = derived ? "# " : "";
    if (derived) o_ << "# the layers it stands for\n";
    o_ << prefix << key << " = [\n";
    for (const LayerSpec& l : f) {
      o_ << prefix << "  { ";
      inline_ = true, first_ = true;
      layer_schema(*this, l);
      inline_ = false;
      o_ << " },\n";
    }
    o_ << prefix << "]\n";
  }
  template <class T, class F>
  void derive(const T&, F) {}
  bool has(const char*) { return false; }
  void require(const char*, const std::string&) {}
  void check(bool, const char*, const std::string&) {}

 private:
  void put(const char* key, const std::string& value, unsigned flags) {
    if (skip_section_ || (flags & kReadOnly) || (hash_ && (flags & kUnhashed))) return;
    if (inline_) o_ << (first_ ? "" : ", ") << key << " = " << value;
    else o_ << key << " = " << value << "\n";
    first_ = false;
  }

  bool hash_;
  bool skip_section_ = false, inline_ = false, first_ = true;
  std::ostringstream o_;
};
}  // namespace

const char* to_string(DatasetKind k) { return enum_name(kDatasets, k); }
const char* to_string(LossKind k) { return enum_name(kLosses, k); }
const char* to_string(OptimizerKind k) { return enum_name(kOptimizers, k); }
const char* to_string(LayerKind k) { return enum_name(layers::kNames, k); }
const char* to_string(optim::Schedule::Kind k) { return enum_name(kSchedules, k); }

std::vector<std::string> Config::data_files() const {
  switch (data.dataset) {
    case DatasetKind::fashion_mnist:
      return {data.path + "/train-images-idx3-ubyte.gz", data.path + "/train-labels-idx1-ubyte.gz", data.path + "/t10k-images-idx3-ubyte.gz",
              data.path + "/t10k-labels-idx1-ubyte.gz"};
    case DatasetKind::csv:
      return data.test_csv.empty() ? std::vector<std::string>{data.train_csv} : std::vector<std::string>{data.train_csv, data.test_csv};
    case DatasetKind::text: return data::text_files(data.path);
    case DatasetKind::adder:
    case DatasetKind::synthetic: return {};
  }
  return {};
}

// Debian's toml++ 3.3 reaches __builtin_unreachable when its whitespace and bare-key tests
// meet some characters beyond ASCII (U+00A1..U+0499, U+FC00..U+FEFE, ...: the libFuzzer config
// target found them in keys and in the debris of a broken value), and asserts on NUL in a table
// header. Valid TOML has such characters only inside strings and comments, where those tests
// never run. So the text is checked first: UTF-8 without control characters (TOML allows tab,
// newline and carriage return), then parsed with every character beyond ASCII replaced by '`',
// which TOML allows only inside strings and comments. Only when that parses does the parser see
// the real text, whose every character beyond ASCII then lies where the parser reads it as
// string or comment content.
namespace {
void check_toml_characters(const std::string& text, const std::string& name) {
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f)
      fail_at(name, line, "malformed TOML: the control character " + printable_excerpt(std::string(1, text[i])) + " is not allowed");
    if (c < 0x80) continue;
    // a UTF-8 sequence: its length from the lead byte, continuation bytes 10xxxxxx, no
    // overlong form, no surrogate, nothing beyond U+10FFFF
    const int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool ok = n > 0 && i + static_cast<std::size_t>(n) <= text.size();
    std::uint32_t cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int k = 1; ok && k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      ok = (b & 0xC0) == 0x80;
      cp = (cp << 6) | (b & 0x3F);
    }
    ok = ok && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) fail_at(name, line, "malformed TOML: not UTF-8 (" + printable_excerpt(text.substr(i, 4), 16) + ")");
    i += static_cast<std::size_t>(n - 1);
  }
  std::string masked;
  masked.reserve(text.size());
  for (const char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c < 0x80) masked += ch;
    else if ((c & 0xC0) != 0x80) masked += '`';  // one per character
  }
  try {
    (void)toml::parse(masked, name);
  } catch (const toml::parse_error& e) {
    fail_at(name, static_cast<int>(e.source().begin.line),
            "malformed TOML: " + printable_excerpt(std::string(e.description()), 200) +
                (masked.size() != text.size() ? " (characters beyond ASCII shown as `; TOML allows them only in strings and comments)" : ""));
  }
}
}  // namespace

Config parse_config(const std::string& text, const std::string& name) {
  if (text.size() > kMaxConfigBytes)
    throw Error(name + ": " + std::to_string(text.size()) + " bytes; a configuration file has at most " + std::to_string(kMaxConfigBytes));
  check_toml_characters(text, name);
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    fail_at(name, static_cast<int>(e.source().begin.line), "malformed TOML: " + printable_excerpt(std::string(e.description()), 200));
  } catch (const Error& e) {
    throw Error(name + ": " + e.what());
  }
  Config c;
  c.file = name;
  Reader r(root, name);
  for (const bool early : {true, false}) {
    r.pass(early);
    schema(r, c);
    r.end();
  }
  // [model] onnx relative to the configuration file, made absolute: a run's resolved configuration
  // keeps it, and the tools that read the run (export, diff's replay, resume) from another
  // directory, or from the run's own config.toml, find the same file
  if (!c.model.onnx.empty() && c.model.onnx[0] != '/') {
    const std::size_t slash = name.rfind('/');
    if (slash != std::string::npos) c.model.onnx = name.substr(0, slash + 1) + c.model.onnx;
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(c.model.onnx, ec);
    if (!ec) c.model.onnx = abs.lexically_normal().string();
  }
  return c;
}

Config load_config(const std::string& path) {
  std::string text;
  try {
    text = io::read_file(path, kMaxConfigBytes);
  } catch (const NotFoundError& e) {
    throw NotFoundError(path + ": cannot read the configuration file (" + e.what() + ")");
  } catch (const Error& e) {
    throw Error(path + ": cannot read the configuration file (" + e.what() + ")");
  }
  return parse_config(text, path);
}

std::string resolved_toml(const Config& c) {
  Writer w(false);
  schema(w, c);
  std::ostringstream o;
  o << "# resolved configuration (bitgrad " << kVersion << ", numerics " << kNumericsVersion << ")\n";
  o << "# config hash " << config_hash(c) << " covers everything but [run]\n";
  o << w.text();
  return o.str();
}

std::string config_hash(const Config& c) {
  Writer w(true);
  schema(w, c);
  const std::string s = w.text();
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Digest128{h.high64, h.low64}.hex();
}

}  // namespace bitgrad::train
