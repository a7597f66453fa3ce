// Configuration files (TOML). Every key is checked: an unknown key or a wrong type is an error
// "FILE:LINE: ..." naming the key, so a typo never falls back to a default silently.
#include <xxhash.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "bitgrad/train.hpp"
#include "bitgrad/version.hpp"

namespace bitgrad::train {
namespace {

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
      if (!ok) fail_at(file_, line_of(n), where() + " " + key + " is '" + v + "'; expected one of " + list);
    }
    return v;
  }
  void finish() {
    if (!t_) return;
    for (auto&& [k, v] : *t_) {
      const std::string key(k.str());
      if (!seen_.count(key)) {
        std::string known;
        for (const auto& s : seen_) known += (known.empty() ? "" : ", ") + s;
        fail_at(file_, line_of(&v), "unknown key '" + key + "' in " + where() + " (known keys: " + known + ")");
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
  l.type = s.string("type", "",
                    {"linear", "conv2d", "flatten", "relu", "gelu", "tanh", "sigmoid", "dropout", "maxpool2d", "avgpool2d", "layernorm"});
  auto need = [&](const char* key) {
    if (!t.get(key)) fail_at(file, line, name + " (" + l.type + ") needs '" + key + "'");
  };
  if (l.type == "linear") {
    need("out");
    l.out = s.integer("out", 0, 1, 1 << 24);
    l.bias = s.boolean("bias", true);
  } else if (l.type == "conv2d") {
    need("out");
    need("kernel");
    l.out = s.integer("out", 0, 1, 1 << 16);
    l.kernel = static_cast<int>(s.integer("kernel", 0, 1, 64));
    l.stride = static_cast<int>(s.integer("stride", 1, 1, 64));
    l.padding = static_cast<int>(s.integer("padding", 0, 0, 64));
    l.bias = s.boolean("bias", true);
  } else if (l.type == "dropout") {
    need("p");
    l.p = s.number("p", 0, 0, 0.999999);
  } else if (l.type == "maxpool2d" || l.type == "avgpool2d") {
    need("kernel");
    l.kernel = static_cast<int>(s.integer("kernel", 0, 1, 64));
    l.stride = static_cast<int>(s.integer("stride", l.kernel, 1, 64));
  } else if (l.type == "layernorm") {
    l.eps = s.number("eps", 1e-5, 0, 1);
  }
  s.finish();
  return l;
}

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // a TOML float
  return s;
}
std::string q(const std::string& s) {
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
  o << "dataset = " << q(c.dataset) << "\n";
  if (c.dataset == "fashion-mnist") {
    o << "path = " << q(c.path) << "\nnormalize = " << (c.normalize ? "true" : "false") << "\n";
  } else if (c.dataset == "csv") {
    o << "train = " << q(c.train_csv) << "\ntest = " << q(c.test_csv) << "\nheader = " << (c.csv_header ? "true" : "false")
      << "\nlabel_column = " << c.label_column << "\ntargets = " << c.targets << "\n";
  } else {
    o << "samples = " << c.samples << "\ntest_samples = " << c.test_samples << "\nfeatures = " << c.features << "\n";
  }
  o << "crop_padding = " << c.crop_padding << "\nhflip = " << (c.hflip ? "true" : "false") << "\n";
  o << "\n[model]\ninit = " << q(c.init) << "\nlayers = [\n";
  for (const LayerSpec& l : c.layers) {
    o << "  { type = " << q(l.type);
    if (l.type == "linear") o << ", out = " << l.out << ", bias = " << (l.bias ? "true" : "false");
    if (l.type == "conv2d")
      o << ", out = " << l.out << ", kernel = " << l.kernel << ", stride = " << l.stride << ", padding = " << l.padding
        << ", bias = " << (l.bias ? "true" : "false");
    if (l.type == "dropout") o << ", p = " << fmt_double(l.p);
    if (l.type == "maxpool2d" || l.type == "avgpool2d") o << ", kernel = " << l.kernel << ", stride = " << l.stride;
    if (l.type == "layernorm") o << ", eps = " << fmt_double(l.eps);
    o << " },\n";
  }
  o << "]\n\n[train]\nbatch_size = " << c.batch_size << "\nepochs = " << c.epochs << "\nsteps = " << c.steps
    << "\nloss = " << q(c.loss) << "\nclip_grad_norm = " << fmt_double(c.clip_grad_norm) << "\nshuffle = " << (c.shuffle ? "true" : "false")
    << "\ndrop_last = " << (c.drop_last ? "true" : "false") << "\n";
  if (!for_hash) o << "accumulate = " << c.accumulate << "\nlog_every = " << c.log_every << "\n";
  o << "\n[optimizer]\ntype = " << q(c.optimizer) << "\nlr = " << fmt_double(c.lr);
  if (c.optimizer == "sgd")
    o << "\nmomentum = " << fmt_double(c.momentum) << "\nnesterov = " << (c.nesterov ? "true" : "false");
  else
    o << "\nbeta1 = " << fmt_double(c.beta1) << "\nbeta2 = " << fmt_double(c.beta2) << "\neps = " << fmt_double(c.eps);
  o << "\nweight_decay = " << fmt_double(c.weight_decay) << "\n";
  o << "\n[schedule]\ntype = " << q(c.schedule) << "\nwarmup_steps = " << c.warmup_steps;
  if (c.schedule == "step") o << "\ngamma = " << fmt_double(c.gamma) << "\nstep_size = " << c.step_size;
  if (c.schedule == "cosine") o << "\nmin_lr = " << fmt_double(c.min_lr);
  o << "\n\n[eval]\nbatch_size = " << c.eval_batch_size << "\neach_epoch = " << (c.eval_each_epoch ? "true" : "false") << "\n";
  return o.str();
}

}  // namespace

Config parse_config(const std::string& text, const std::string& name) {
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    fail_at(name, static_cast<int>(e.source().begin.line), "malformed TOML: " + std::string(e.description()));
  }
  Config c;
  c.file = name;
  Section top(&root, "", name, 1);
  c.seed = static_cast<std::uint64_t>(top.integer("seed", 0, 0, INT64_MAX));
  for (const char* s : {"data", "model", "train", "optimizer", "schedule", "eval", "run"}) top.node(s);
  top.finish();

  Section d = sub(root, "data", name);
  c.dataset = d.string("dataset", "fashion-mnist", {"fashion-mnist", "csv", "adder"});
  if (c.dataset == "fashion-mnist") {
    c.path = d.string("path", data::kFashionMnistDir);
    c.normalize = d.boolean("normalize", true);
  } else if (c.dataset == "csv") {
    if (!d.node("train")) fail_at(name, d.line(), "[data] dataset = \"csv\" needs 'train' (a CSV file)");
    c.train_csv = d.string("train", "");
    c.test_csv = d.string("test", "");
    c.csv_header = d.boolean("header", false);
    c.label_column = static_cast<int>(d.integer("label_column", -1, -1, 1 << 20));
    c.targets = static_cast<int>(d.integer("targets", 1, 1, 1 << 20));
  } else {
    c.samples = d.integer("samples", 100000, 1, INT64_MAX / 2);
    c.test_samples = d.integer("test_samples", 10000, 0, INT64_MAX / 2);
    c.features = static_cast<int>(d.integer("features", 10, 1, 1 << 20));
  }
  c.crop_padding = static_cast<int>(d.integer("crop_padding", 0, 0, 64));
  c.hflip = d.boolean("hflip", false);
  d.finish();

  Section m = sub(root, "model", name);
  c.init = m.string("init", "kaiming_uniform", {"kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal", "zeros"});
  const toml::node* ln = m.node("layers");
  if (!ln) fail_at(name, m.line(), "[model] needs 'layers', a list of { type = ... } tables");
  if (!ln->is_array()) fail_at(name, line_of(ln), std::string("[model] layers must be an array of tables, got ") + type_name(*ln));
  const toml::array& arr = *ln->as_array();
  if (arr.empty()) fail_at(name, line_of(ln), "[model] layers is empty");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const toml::node& e = arr[i];
    if (!e.is_table()) fail_at(name, line_of(&e), "model.layers[" + std::to_string(i) + "] must be a table, got " + type_name(e));
    c.layers.push_back(parse_layer(*e.as_table(), i, name, line_of(&e)));
  }
  m.finish();

  Section t = sub(root, "train", name);
  c.batch_size = t.integer("batch_size", 128, 1, 1 << 24);
  c.epochs = t.integer("epochs", 1, 0, 1 << 20);
  c.steps = t.integer("steps", 0, 0, INT64_MAX / 2);
  c.accumulate = t.integer("accumulate", 1, 1, 1 << 20);
  c.loss = t.string("loss", "cross_entropy", {"cross_entropy", "mse"});
  c.clip_grad_norm = t.number("clip_grad_norm", 0.0, 0.0, 1e300);
  c.shuffle = t.boolean("shuffle", true);
  c.drop_last = t.boolean("drop_last", true);
  c.log_every = t.integer("log_every", 0, 0, INT64_MAX / 2);
  t.finish();
  if (c.batch_size % c.accumulate != 0)
    fail_at(name, t.line(), "[train] batch_size " + std::to_string(c.batch_size) + " is not divisible by accumulate " +
                                std::to_string(c.accumulate));

  Section o = sub(root, "optimizer", name);
  c.optimizer = o.string("type", "sgd", {"sgd", "adam", "adamw"});
  c.lr = o.number("lr", 0.01, 0.0, 1e6);
  if (c.optimizer == "sgd") {
    c.momentum = o.number("momentum", 0.0, 0.0, 1.0);
    c.nesterov = o.boolean("nesterov", false);
  } else {
    c.beta1 = o.number("beta1", 0.9, 0.0, 0.999999999);
    c.beta2 = o.number("beta2", 0.999, 0.0, 0.999999999);
    c.eps = o.number("eps", 1e-8, 1e-300, 1.0);
  }
  c.weight_decay = o.number("weight_decay", 0.0, 0.0, 1e6);
  o.finish();
  if (c.nesterov && c.momentum == 0) fail_at(name, o.line(), "[optimizer] nesterov needs momentum > 0");

  Section s = sub(root, "schedule", name);
  c.schedule = s.string("type", "constant", {"constant", "step", "cosine"});
  c.warmup_steps = s.integer("warmup_steps", 0, 0, INT64_MAX / 2);
  if (c.schedule == "step") {
    c.gamma = s.number("gamma", 0.1, 0.0, 1e6);
    c.step_size = s.integer("step_size", 1000, 1, INT64_MAX / 2);
  } else if (c.schedule == "cosine") {
    c.min_lr = s.number("min_lr", 0.0, 0.0, 1e6);
  }
  s.finish();

  Section e = sub(root, "eval", name);
  c.eval_batch_size = e.integer("batch_size", 1000, 1, 1 << 24);
  c.eval_each_epoch = e.boolean("each_epoch", true);
  e.finish();

  Section r = sub(root, "run", name);
  c.threads = static_cast<int>(r.integer("threads", 0, 0, 4096));
  c.workers = static_cast<int>(r.integer("workers", 0, 0, 256));
  r.finish();
  return c;
}

Config load_config(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw Error(path + ": cannot open the configuration file");
  std::string text;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
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
