// Configuration files (TOML). Every key is checked: an unknown key or a wrong type is an error
// "FILE:LINE: ..." naming the key, so a typo never falls back to a default silently.
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

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

namespace bitgrad::train {
namespace {

// A configuration is a few hundred bytes; a megabyte is generous and keeps `bitgrad train
// /dev/zero`-like mistakes from reading without end.
constexpr std::uint64_t kMaxConfigBytes = 1 << 20;

// The spellings of each choice in the configuration file, in the order errors list them.
template <class E>
struct Name {
  E value;
  const char* name;
};
constexpr Name<DatasetKind> kDatasets[] = {
    {DatasetKind::fashion_mnist, "fashion-mnist"}, {DatasetKind::csv, "csv"}, {DatasetKind::adder, "adder"}, {DatasetKind::synthetic, "synthetic"},
    {DatasetKind::text, "text"}};
constexpr Name<LossKind> kLosses[] = {{LossKind::cross_entropy, "cross_entropy"}, {LossKind::mse, "mse"}};
constexpr Name<OptimizerKind> kOptimizers[] = {{OptimizerKind::sgd, "sgd"}, {OptimizerKind::adam, "adam"}, {OptimizerKind::adamw, "adamw"}};
constexpr Name<optim::Schedule::Kind> kSchedules[] = {
    {optim::Schedule::Kind::constant, "constant"}, {optim::Schedule::Kind::step, "step"}, {optim::Schedule::Kind::cosine, "cosine"}};
constexpr Name<LayerKind> kLayers[] = {{LayerKind::linear, "linear"},       {LayerKind::conv2d, "conv2d"},       {LayerKind::flatten, "flatten"},
                                       {LayerKind::relu, "relu"},           {LayerKind::gelu, "gelu"},           {LayerKind::tanh, "tanh"},
                                       {LayerKind::sigmoid, "sigmoid"},     {LayerKind::dropout, "dropout"},     {LayerKind::maxpool2d, "maxpool2d"},
                                       {LayerKind::avgpool2d, "avgpool2d"}, {LayerKind::layernorm, "layernorm"},
                                       {LayerKind::embedding, "embedding"}, {LayerKind::transformer_block, "transformer_block"},
                                       {LayerKind::tied_head, "tied_head"}};
constexpr Name<nn::Init> kInits[] = {{nn::Init::kaiming_uniform, "kaiming_uniform"},
                                     {nn::Init::kaiming_normal, "kaiming_normal"},
                                     {nn::Init::xavier_uniform, "xavier_uniform"},
                                     {nn::Init::xavier_normal, "xavier_normal"},
                                     {nn::Init::zeros, "zeros"},
                                     {nn::Init::gpt2, "gpt2"}};

template <class E, std::size_t N>
const char* name_of(const Name<E> (&table)[N], E v) {
  for (const auto& n : table)
    if (n.value == v) return n.name;
  return "?";
}

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
  E choice(const char* key, E def, const Name<E> (&table)[N]) {
    std::vector<std::string> names;
    for (const auto& n : table) names.push_back(n.name);
    const std::string v = string(key, name_of(table, def), names);
    for (const auto& n : table)
      if (v == n.name) return n.value;
    return def;
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

LayerSpec parse_layer(const toml::table& t, std::size_t index, const std::string& file, int line) {
  const std::string name = "model.layers[" + std::to_string(index) + "]";
  Section s(&t, name, file, line);
  LayerSpec l;
  l.line = line;
  const toml::node* tn = s.node("type");
  if (!tn) fail_at(file, line, name + " needs a type");
  l.type = s.choice("type", LayerKind::linear, kLayers);
  auto need = [&](const char* key) {
    if (!t.get(key)) fail_at(file, line, name + " (" + to_string(l.type) + ") needs '" + key + "'");
  };
  if (l.type == LayerKind::linear) {
    need("out");
    l.out = s.integer("out", 0, 1, 1 << 24);
    l.bias = s.boolean("bias", true);
  } else if (l.type == LayerKind::conv2d) {
    need("out");
    need("kernel");
    l.out = s.integer("out", 0, 1, 1 << 16);
    l.kernel = static_cast<int>(s.integer("kernel", 0, 1, 64));
    l.stride = static_cast<int>(s.integer("stride", 1, 1, 64));
    l.padding = static_cast<int>(s.integer("padding", 0, 0, 64));
    l.bias = s.boolean("bias", true);
  } else if (l.type == LayerKind::dropout) {
    need("p");
    l.p = s.number("p", 0, 0, 0.999999);
  } else if (l.type == LayerKind::maxpool2d || l.type == LayerKind::avgpool2d) {
    need("kernel");
    l.kernel = static_cast<int>(s.integer("kernel", 0, 1, 64));
    l.stride = static_cast<int>(s.integer("stride", l.kernel, 1, 64));
  } else if (l.type == LayerKind::layernorm) {
    l.eps = s.number("eps", 1e-5, 0, 1);
    l.bias = s.boolean("bias", true);
  } else if (l.type == LayerKind::embedding) {
    need("dim");
    l.out = s.integer("dim", 0, 1, 1 << 16);
    l.p = s.number("dropout", 0, 0, 0.999999);
  } else if (l.type == LayerKind::transformer_block) {
    need("n_head");
    l.n_head = s.integer("n_head", 0, 1, 1 << 12);
    l.p = s.number("dropout", 0, 0, 0.999999);
    l.bias = s.boolean("bias", true);
  }
  s.finish();
  return l;
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

// The resolved configuration; for the hash, without what cannot change a result
// (accumulate is exact when T5 holds, log_every and [run] only change the output).
std::string defining_toml(const Config& c, bool for_hash) {
  std::ostringstream o;
  o << "seed = " << c.seed << "\n\n[data]\n";
  o << "dataset = " << toml_string(to_string(c.dataset)) << "\n";
  if (c.dataset == DatasetKind::fashion_mnist) {
    o << "path = " << toml_string(c.path) << "\nnormalize = " << (c.normalize ? "true" : "false") << "\n";
  } else if (c.dataset == DatasetKind::csv) {
    o << "train = " << toml_string(c.train_csv) << "\ntest = " << toml_string(c.test_csv) << "\nheader = " << (c.csv_header ? "true" : "false")
      << "\nlabel_column = " << c.label_column << "\ntargets = " << c.targets << "\nallow_nonfinite = " << (c.allow_nonfinite ? "true" : "false") << "\n";
  } else if (c.dataset == DatasetKind::adder) {
    o << "samples = " << c.samples << "\ntest_samples = " << c.test_samples << "\nfeatures = " << c.features << "\n";
  } else if (c.dataset == DatasetKind::text) {
    o << "path = " << toml_string(c.path) << "\nvocabulary = " << (c.text_bytes ? "\"bytes\"" : "\"characters\"")
      << "\nval_fraction = " << toml_float(c.val_fraction) << "\n";
    if (!c.gpt.on) o << "block_size = " << c.block_size << "\n";
  } else {
    o << "samples = " << c.samples << "\ntest_samples = " << c.test_samples << "\nshape = [";
    for (std::size_t i = 0; i < c.shape.size(); ++i) o << (i ? ", " : "") << c.shape[i];
    o << "]\nclasses = " << c.classes << "\n";
    if (c.classes == 0) o << "targets = " << c.targets << "\n";
  }
  o << "crop_padding = " << c.crop_padding << "\nhflip = " << (c.hflip ? "true" : "false") << "\n";
  o << "\n[model]\ninit = " << toml_string(nn::init_name(c.init)) << "\n";
  if (!for_hash) o << "recompute = " << toml_string(nn::recompute_name(c.recompute)) << "\n";  // T9: the same bits
  if (c.gpt.on) {
    o << "type = \"gpt\"\nn_layer = " << c.gpt.n_layer << "\nn_head = " << c.gpt.n_head << "\nn_embd = " << c.gpt.n_embd
      << "\nblock_size = " << c.block_size << "\ndropout = " << toml_float(c.gpt.dropout) << "\nbias = " << (c.gpt.bias ? "true" : "false")
      << "\ntie_weights = " << (c.gpt.tie_weights ? "true" : "false") << "\n";
  }
  o << (c.gpt.on ? "# the layers it stands for\n# layers = [\n" : "layers = [\n");
  for (const LayerSpec& l : c.layers) {
    if (c.gpt.on) o << "# ";
    o << "  { type = " << toml_string(to_string(l.type));
    if (l.type == LayerKind::linear) o << ", out = " << l.out << ", bias = " << (l.bias ? "true" : "false");
    if (l.type == LayerKind::conv2d)
      o << ", out = " << l.out << ", kernel = " << l.kernel << ", stride = " << l.stride << ", padding = " << l.padding
        << ", bias = " << (l.bias ? "true" : "false");
    if (l.type == LayerKind::dropout) o << ", p = " << toml_float(l.p);
    if (l.type == LayerKind::maxpool2d || l.type == LayerKind::avgpool2d) o << ", kernel = " << l.kernel << ", stride = " << l.stride;
    if (l.type == LayerKind::layernorm) o << ", eps = " << toml_float(l.eps) << ", bias = " << (l.bias ? "true" : "false");
    if (l.type == LayerKind::embedding) o << ", dim = " << l.out << ", dropout = " << toml_float(l.p);
    if (l.type == LayerKind::transformer_block)
      o << ", n_head = " << l.n_head << ", dropout = " << toml_float(l.p) << ", bias = " << (l.bias ? "true" : "false");
    o << " },\n";
  }
  o << (c.gpt.on ? "# ]" : "]") << "\n\n[train]\nbatch_size = " << c.batch_size << "\nepochs = " << c.epochs << "\nsteps = " << c.steps
    << "\nloss = " << toml_string(to_string(c.loss)) << "\nclip_grad_norm = " << toml_float(c.clip_grad_norm) << "\nshuffle = " << (c.shuffle ? "true" : "false")
    << "\ndrop_last = " << (c.drop_last ? "true" : "false") << "\n";
  if (!for_hash) o << "accumulate = " << c.accumulate << "\nlog_every = " << c.log_every << "\n";
  // mixed precision: in the hash only when not fp32, so the hashes of f32 runs stay as they were
  if (!for_hash || c.precision != Precision::fp32) {
    o << "precision = " << toml_string(precision_name(c.precision)) << "\nrounding = " << (c.stochastic_rounding ? "\"stochastic\"" : "\"nearest\"")
      << "\nloss_scale = " << (c.loss_scale == 0 ? std::string("\"dynamic\"") : toml_float(c.loss_scale))
      << "\nloss_scale_interval = " << c.loss_scale_interval << "\n";
  }
  o << "\n[optimizer]\ntype = " << toml_string(to_string(c.optimizer)) << "\nlr = " << toml_float(c.lr);
  if (c.optimizer == OptimizerKind::sgd)
    o << "\nmomentum = " << toml_float(c.momentum) << "\nnesterov = " << (c.nesterov ? "true" : "false");
  else
    o << "\nbeta1 = " << toml_float(c.beta1) << "\nbeta2 = " << toml_float(c.beta2) << "\neps = " << toml_float(c.eps);
  o << "\nweight_decay = " << toml_float(c.weight_decay) << "\n";
  if (c.optimizer != OptimizerKind::sgd) o << "decay = " << (c.decay_matrices_only ? "\"matrices\"" : "\"all\"") << "\n";
  o << "\n[schedule]\ntype = " << toml_string(to_string(c.schedule)) << "\nwarmup_steps = " << c.warmup_steps;
  if (c.schedule == optim::Schedule::Kind::step) o << "\ngamma = " << toml_float(c.gamma) << "\nstep_size = " << c.step_size;
  if (c.schedule == optim::Schedule::Kind::cosine) o << "\nmin_lr = " << toml_float(c.min_lr);
  o << "\n\n[eval]\nbatch_size = " << c.eval_batch_size << "\neach_epoch = " << (c.eval_each_epoch ? "true" : "false") << "\nevery = " << c.eval_every
    << "\n";
  if (c.dataset == DatasetKind::text) o << "windows = " << c.eval_windows << "\n";
  return o.str();
}

}  // namespace

const char* to_string(DatasetKind k) { return name_of(kDatasets, k); }
const char* to_string(LossKind k) { return name_of(kLosses, k); }
const char* to_string(OptimizerKind k) { return name_of(kOptimizers, k); }
const char* to_string(LayerKind k) { return name_of(kLayers, k); }
const char* to_string(optim::Schedule::Kind k) { return name_of(kSchedules, k); }

std::vector<std::string> Config::data_files() const {
  switch (dataset) {
    case DatasetKind::fashion_mnist:
      return {path + "/train-images-idx3-ubyte.gz", path + "/train-labels-idx1-ubyte.gz", path + "/t10k-images-idx3-ubyte.gz",
              path + "/t10k-labels-idx1-ubyte.gz"};
    case DatasetKind::csv:
      return test_csv.empty() ? std::vector<std::string>{train_csv} : std::vector<std::string>{train_csv, test_csv};
    case DatasetKind::text: return data::text_files(path);
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
  Section top(&root, "", name, 1);
  c.seed = static_cast<std::uint64_t>(top.integer("seed", 0, 0, INT64_MAX));
  for (const char* s : {"data", "model", "train", "optimizer", "schedule", "eval", "run"}) top.node(s);
  top.finish();

  Section d = sub(root, "data", name);
  c.dataset = d.choice("dataset", DatasetKind::fashion_mnist, kDatasets);
  if (c.dataset == DatasetKind::fashion_mnist) {
    c.path = d.string("path", data::kFashionMnistDir);
    c.normalize = d.boolean("normalize", true);
  } else if (c.dataset == DatasetKind::csv) {
    if (!d.node("train")) fail_at(name, d.line(), "[data] dataset = \"csv\" needs 'train' (a CSV file)");
    c.train_csv = d.string("train", "");
    c.test_csv = d.string("test", "");
    c.csv_header = d.boolean("header", false);
    c.label_column = static_cast<int>(d.integer("label_column", -1, -1, 1 << 20));
    c.targets = static_cast<int>(d.integer("targets", 1, 1, 1 << 20));
    c.allow_nonfinite = d.boolean("allow_nonfinite", false);
  } else if (c.dataset == DatasetKind::text) {
    c.path = d.string("path", data::kFortunesDir);
    c.text_bytes = d.string("vocabulary", "characters", {"characters", "bytes"}) == "bytes";
    c.val_fraction = d.number("val_fraction", 0.1, 0.0, 0.9);
    c.block_size = d.integer("block_size", 0, 0, 1 << 16);  // required for a layer list, checked with [model]
  } else if (c.dataset == DatasetKind::adder) {
    c.samples = d.integer("samples", 100000, 1, INT64_MAX / 2);
    c.test_samples = d.integer("test_samples", 10000, 0, INT64_MAX / 2);
    c.features = static_cast<int>(d.integer("features", 10, 1, 1 << 20));
  } else {
    c.samples = d.integer("samples", 1000, 1, 1 << 24);
    c.test_samples = d.integer("test_samples", 0, 0, 1 << 24);
    c.shape = d.dims("shape", {8});
    c.classes = d.integer("classes", 10, 0, 1 << 20);
    if (c.classes == 0) c.targets = static_cast<int>(d.integer("targets", 1, 1, 1 << 20));
  }
  c.crop_padding = static_cast<int>(d.integer("crop_padding", 0, 0, 64));
  c.hflip = d.boolean("hflip", false);
  d.finish();

  Section m = sub(root, "model", name);
  const std::string mtype = m.string("type", "layers", {"layers", "gpt"});
  c.gpt.on = mtype == "gpt";
  c.init = m.choice("init", c.gpt.on ? nn::Init::gpt2 : nn::Init::kaiming_uniform, kInits);
  c.recompute = nn::parse_recompute(m.string("recompute", "none", {"none", "blocks", "all"}));
  if (c.gpt.on) {
    if (c.dataset != DatasetKind::text) fail_at(name, m.line(), "[model] type = \"gpt\" needs token data: [data] dataset = \"text\"");
    if (m.node("layers")) fail_at(name, line_of(m.node("layers")), "[model] type = \"gpt\" builds its own layers; remove 'layers'");
    if (d.node("block_size") && c.block_size > 0) fail_at(name, line_of(d.node("block_size")), "[model] type = \"gpt\" sets block_size; remove it from [data]");
    c.gpt.n_layer = m.integer("n_layer", 4, 1, 1 << 10);
    c.gpt.n_head = m.integer("n_head", 4, 1, 1 << 12);
    c.gpt.n_embd = m.integer("n_embd", 128, 1, 1 << 16);
    c.block_size = m.integer("block_size", 64, 1, 1 << 16);
    c.gpt.dropout = m.number("dropout", 0.0, 0.0, 0.999999);
    c.gpt.bias = m.boolean("bias", true);
    c.gpt.tie_weights = m.boolean("tie_weights", false);
    if (c.gpt.n_embd % c.gpt.n_head != 0)
      fail_at(name, line_of(m.node("n_embd")), "[model] n_embd " + std::to_string(c.gpt.n_embd) + " is not divisible by n_head " +
                                                  std::to_string(c.gpt.n_head));
    // the layers a gpt stands for (docs/cli.md): the same model as this layer list
    const int line = m.line();
    LayerSpec e;
    e.type = LayerKind::embedding, e.out = c.gpt.n_embd, e.p = c.gpt.dropout, e.line = line;
    c.layers.push_back(e);
    for (std::int64_t i = 0; i < c.gpt.n_layer; ++i) {
      LayerSpec b;
      b.type = LayerKind::transformer_block, b.n_head = c.gpt.n_head, b.p = c.gpt.dropout, b.bias = c.gpt.bias, b.line = line;
      c.layers.push_back(b);
    }
    LayerSpec ln;
    ln.type = LayerKind::layernorm, ln.bias = c.gpt.bias, ln.line = line;
    c.layers.push_back(ln);
    LayerSpec head;
    head.type = c.gpt.tie_weights ? LayerKind::tied_head : LayerKind::linear, head.out = 0, head.bias = false, head.line = line;
    c.layers.push_back(head);  // linear: out = the vocabulary, set when the data is known
  } else {
    const toml::node* ln = m.node("layers");
    if (!ln) fail_at(name, m.line(), "[model] needs 'layers', a list of { type = ... } tables (or type = \"gpt\")");
    if (!ln->is_array()) fail_at(name, line_of(ln), std::string("[model] layers must be an array of tables, got ") + type_name(*ln));
    const toml::array& arr = *ln->as_array();
    if (arr.empty()) fail_at(name, line_of(ln), "[model] layers is empty");
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const toml::node& e = arr[i];
      if (!e.is_table()) fail_at(name, line_of(&e), "model.layers[" + std::to_string(i) + "] must be a table, got " + type_name(e));
      c.layers.push_back(parse_layer(*e.as_table(), i, name, line_of(&e)));
    }
    if (c.dataset == DatasetKind::text && c.block_size == 0)
      fail_at(name, d.line(), "[data] dataset = \"text\" with a layer list needs block_size (tokens per window)");
  }
  m.finish();

  Section t = sub(root, "train", name);
  c.batch_size = t.integer("batch_size", 128, 1, 1 << 24);
  c.epochs = t.integer("epochs", 1, 0, 1 << 20);
  c.steps = t.integer("steps", 0, 0, INT64_MAX / 2);
  c.accumulate = t.integer("accumulate", 1, 1, 1 << 20);
  c.loss = t.choice("loss", LossKind::cross_entropy, kLosses);
  c.clip_grad_norm = t.number("clip_grad_norm", 0.0, 0.0, 1e300);
  c.shuffle = t.boolean("shuffle", true);
  c.drop_last = t.boolean("drop_last", true);
  c.log_every = t.integer("log_every", 0, 0, INT64_MAX / 2);
  c.precision = parse_precision(t.string("precision", "fp32", {"fp32", "bf16", "fp16"}));
  c.stochastic_rounding = t.string("rounding", "nearest", {"nearest", "stochastic"}) == "stochastic";
  if (c.stochastic_rounding && c.precision == Precision::fp32)
    fail_at(name, line_of(t.node("rounding")), "[train] rounding = \"stochastic\" needs precision = \"bf16\" or \"fp16\"");
  c.loss_scale = c.precision == Precision::fp16 ? 0 : 1;
  if (const toml::node* ls = t.node("loss_scale")) {
    if (ls->is_string()) {
      if (ls->as_string()->get() != "dynamic")
        fail_at(name, line_of(ls), "[train] loss_scale must be \"dynamic\" or a power of two, got \"" + ls->as_string()->get() + "\"");
      c.loss_scale = 0;
    } else {
      c.loss_scale = t.number("loss_scale", 1, 0x1p-24, 0x1p64);
      int ex = 0;
      if (std::frexp(c.loss_scale, &ex) != 0.5)
        fail_at(name, line_of(ls), "[train] loss_scale must be \"dynamic\" or a power of two (so that scaling is exact), got " + toml_float(c.loss_scale));
    }
  }
  c.loss_scale_interval = t.integer("loss_scale_interval", 2000, 1, INT64_MAX / 2);
  t.finish();
  if (c.batch_size % c.accumulate != 0)
    fail_at(name, t.line(), "[train] batch_size " + std::to_string(c.batch_size) + " is not divisible by accumulate " +
                                std::to_string(c.accumulate));

  Section o = sub(root, "optimizer", name);
  c.optimizer = o.choice("type", OptimizerKind::sgd, kOptimizers);
  c.lr = o.number("lr", 0.01, 0.0, 1e6);
  if (c.optimizer == OptimizerKind::sgd) {
    c.momentum = o.number("momentum", 0.0, 0.0, 1.0);
    c.nesterov = o.boolean("nesterov", false);
  } else {
    c.beta1 = o.number("beta1", 0.9, 0.0, 0.999999999);
    c.beta2 = o.number("beta2", 0.999, 0.0, 0.999999999);
    c.eps = o.number("eps", 1e-8, 1e-300, 1.0);
  }
  c.weight_decay = o.number("weight_decay", 0.0, 0.0, 1e6);
  if (c.optimizer != OptimizerKind::sgd)
    c.decay_matrices_only = o.string("decay", c.gpt.on ? "matrices" : "all", {"all", "matrices"}) == "matrices";
  o.finish();
  if (c.nesterov && c.momentum == 0) fail_at(name, o.line(), "[optimizer] nesterov needs momentum > 0");

  Section s = sub(root, "schedule", name);
  c.schedule = s.choice("type", optim::Schedule::Kind::constant, kSchedules);
  c.warmup_steps = s.integer("warmup_steps", 0, 0, INT64_MAX / 2);
  if (c.schedule == optim::Schedule::Kind::step) {
    c.gamma = s.number("gamma", 0.1, 0.0, 1e6);
    c.step_size = s.integer("step_size", 1000, 1, INT64_MAX / 2);
  } else if (c.schedule == optim::Schedule::Kind::cosine) {
    c.min_lr = s.number("min_lr", 0.0, 0.0, 1e6);
  }
  s.finish();

  Section e = sub(root, "eval", name);
  c.eval_batch_size = e.integer("batch_size", 1000, 1, 1 << 24);
  c.eval_every = e.integer("every", 0, 0, INT64_MAX / 2);
  c.eval_each_epoch = e.boolean("each_epoch", c.eval_every == 0);  // `every` alone: no evaluation at epoch ends
  if (c.dataset == DatasetKind::text) c.eval_windows = e.integer("windows", 0, 0, INT64_MAX / 2);
  e.finish();

  Section r = sub(root, "run", name);
  c.threads = static_cast<int>(r.integer("threads", 0, 0, 4096));
  c.workers = static_cast<int>(r.integer("workers", 0, 0, 256));
  r.finish();
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
  std::ostringstream o;
  o << "# resolved configuration (bitgrad " << kVersion << ", numerics " << kNumericsVersion << ")\n";
  o << "# config hash " << config_hash(c) << " covers everything but [run]\n";
  o << defining_toml(c, false);
  o << "\n[run]\nthreads = " << c.threads << "\nworkers = " << c.workers << "\n";
  return o.str();
}

std::string config_hash(const Config& c) {
  const std::string s = defining_toml(c, true);
  XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Digest128{h.high64, h.low64}.hex();
}

}  // namespace bitgrad::train
