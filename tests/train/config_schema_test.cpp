// The configuration schema: its hash is config format 1 for every configuration (runs made
// before the schema resume under it), its resolved TOML reads back to the same hash, and its
// errors name FILE:LINE and the key.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bitgrad/io.hpp"
#include "bitgrad/train.hpp"
#include "io/format.hpp"
#include "support/runs.hpp"

namespace bitgrad::test {
namespace {

using train::DatasetKind;
using train::LayerKind;
using train::LayerSpec;
using train::OptimizerKind;
using train::to_string;

// ---- The text config_hash hashed before the schema (main at ebe9ddf), kept here only: every
// configuration must hash to what it did then, or the runs made then no longer resume. ----
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
std::string legacy_defining_toml(const train::Config& c, bool for_hash) {
  std::ostringstream o;
  o << "seed = " << c.seed << "\n\n[data]\n";
  o << "dataset = " << toml_string(to_string(c.data.dataset)) << "\n";
  if (c.data.dataset == DatasetKind::fashion_mnist) {
    o << "path = " << toml_string(c.data.path) << "\nnormalize = " << (c.data.normalize ? "true" : "false") << "\n";
  } else if (c.data.dataset == DatasetKind::csv) {
    o << "train = " << toml_string(c.data.train_csv) << "\ntest = " << toml_string(c.data.test_csv) << "\nheader = " << (c.data.csv_header ? "true" : "false")
      << "\nlabel_column = " << c.data.label_column << "\ntargets = " << c.data.targets << "\nallow_nonfinite = " << (c.data.allow_nonfinite ? "true" : "false") << "\n";
  } else if (c.data.dataset == DatasetKind::adder) {
    o << "samples = " << c.data.samples << "\ntest_samples = " << c.data.test_samples << "\nfeatures = " << c.data.features << "\n";
  } else if (c.data.dataset == DatasetKind::text) {
    o << "path = " << toml_string(c.data.path) << "\nvocabulary = " << (c.data.text_bytes ? "\"bytes\"" : "\"characters\"")
      << "\nval_fraction = " << toml_float(c.data.val_fraction) << "\n";
    if (!c.model.gpt.on) o << "block_size = " << c.data.block_size << "\n";
  } else {
    o << "samples = " << c.data.samples << "\ntest_samples = " << c.data.test_samples << "\nshape = [";
    for (std::size_t i = 0; i < c.data.shape.size(); ++i) o << (i ? ", " : "") << c.data.shape[i];
    o << "]\nclasses = " << c.data.classes << "\n";
    if (c.data.classes == 0) o << "targets = " << c.data.targets << "\n";
  }
  o << "crop_padding = " << c.data.crop_padding << "\nhflip = " << (c.data.hflip ? "true" : "false") << "\n";
  o << "\n[model]\ninit = " << toml_string(nn::init_name(c.model.init)) << "\n";
  if (!for_hash) o << "recompute = " << toml_string(nn::recompute_name(c.model.recompute)) << "\n";  // T9: the same bits
  if (c.model.gpt.on) {
    o << "type = \"gpt\"\nn_layer = " << c.model.gpt.n_layer << "\nn_head = " << c.model.gpt.n_head << "\nn_embd = " << c.model.gpt.n_embd
      << "\nblock_size = " << c.data.block_size << "\ndropout = " << toml_float(c.model.gpt.dropout) << "\nbias = " << (c.model.gpt.bias ? "true" : "false")
      << "\ntie_weights = " << (c.model.gpt.tie_weights ? "true" : "false") << "\n";
  }
  o << (c.model.gpt.on ? "# the layers it stands for\n# layers = [\n" : "layers = [\n");
  for (const LayerSpec& l : c.model.layers) {
    if (c.model.gpt.on) o << "# ";
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
  o << (c.model.gpt.on ? "# ]" : "]") << "\n\n[train]\nbatch_size = " << c.train.batch_size << "\nepochs = " << c.train.epochs << "\nsteps = " << c.train.steps
    << "\nloss = " << toml_string(to_string(c.train.loss)) << "\nclip_grad_norm = " << toml_float(c.train.clip_grad_norm) << "\nshuffle = " << (c.train.shuffle ? "true" : "false")
    << "\ndrop_last = " << (c.train.drop_last ? "true" : "false") << "\n";
  if (!for_hash) o << "accumulate = " << c.train.accumulate << "\nlog_every = " << c.train.log_every << "\n";
  // mixed precision: in the hash only when not fp32, so the hashes of f32 runs stay as they were
  if (!for_hash || c.train.precision != Precision::fp32) {
    o << "precision = " << toml_string(precision_name(c.train.precision)) << "\nrounding = " << (c.train.stochastic_rounding ? "\"stochastic\"" : "\"nearest\"")
      << "\nloss_scale = " << (c.train.loss_scale == 0 ? std::string("\"dynamic\"") : toml_float(c.train.loss_scale))
      << "\nloss_scale_interval = " << c.train.loss_scale_interval << "\n";
  }
  o << "\n[optimizer]\ntype = " << toml_string(to_string(c.optimizer.type)) << "\nlr = " << toml_float(c.optimizer.lr);
  if (c.optimizer.type == OptimizerKind::sgd)
    o << "\nmomentum = " << toml_float(c.optimizer.momentum) << "\nnesterov = " << (c.optimizer.nesterov ? "true" : "false");
  else
    o << "\nbeta1 = " << toml_float(c.optimizer.beta1) << "\nbeta2 = " << toml_float(c.optimizer.beta2) << "\neps = " << toml_float(c.optimizer.eps);
  o << "\nweight_decay = " << toml_float(c.optimizer.weight_decay) << "\n";
  if (c.optimizer.type != OptimizerKind::sgd) o << "decay = " << (c.optimizer.decay_matrices_only ? "\"matrices\"" : "\"all\"") << "\n";
  o << "\n[schedule]\ntype = " << toml_string(to_string(c.schedule.type)) << "\nwarmup_steps = " << c.schedule.warmup_steps;
  if (c.schedule.type == optim::Schedule::Kind::step) o << "\ngamma = " << toml_float(c.schedule.gamma) << "\nstep_size = " << c.schedule.step_size;
  if (c.schedule.type == optim::Schedule::Kind::cosine) o << "\nmin_lr = " << toml_float(c.schedule.min_lr);
  o << "\n\n[eval]\nbatch_size = " << c.eval.batch_size << "\neach_epoch = " << (c.eval.each_epoch ? "true" : "false") << "\nevery = " << c.eval.every
    << "\n";
  if (c.data.dataset == DatasetKind::text) o << "windows = " << c.eval.windows << "\n";
  return o.str();
}


std::string legacy_hash(const train::Config& c) {
  const std::string s = legacy_defining_toml(c, true);
  const XXH128_hash_t h = XXH3_128bits(s.data(), s.size());
  return Digest128{h.high64, h.low64}.hex();
}

// What resolved_toml printed before the schema (less its two comment lines).
std::string legacy_resolved(const train::Config& c) {
  return legacy_defining_toml(c, false) + "\n[run]\nthreads = " + std::to_string(c.run.threads) + "\nworkers = " + std::to_string(c.run.workers) + "\n";
}
std::string without_header(const std::string& resolved) {
  std::size_t at = 0;
  for (int i = 0; i < 2; ++i) at = resolved.find('\n', at) + 1;
  return resolved.substr(at);
}

void expect_as_before(const std::string& text, const std::string& name) {
  SCOPED_TRACE(name);
  const train::Config c = train::parse_config(text, name);
  EXPECT_EQ(train::config_hash(c), legacy_hash(c));
  const std::string resolved = train::resolved_toml(c);
  EXPECT_EQ(without_header(resolved), legacy_resolved(c));
  // the resolved file reads back to the same configuration
  EXPECT_EQ(train::config_hash(train::parse_config(resolved, name + " (resolved)")), train::config_hash(c));
}

TEST(ConfigSchema, EveryShippedConfigurationHashesAsBefore) {
  std::vector<std::string> files;
  for (const char* dir : {"examples", "tests/consumer", "tests/fuzz/corpus/config"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(BITGRAD_SOURCE_DIR) + "/" + dir))
      if (e.path().extension() == ".toml") files.push_back(e.path().string());
  ASSERT_GE(files.size(), 8u);
  // the later layer kinds (batchnorm, lstm, resblock, ...) had no hash before the schema: a
  // configuration using them reads back from its resolved TOML to the same hash
  auto legacy_layers = [](const train::Config& c) {
    for (const LayerSpec& l : c.model.layers)
      if (static_cast<int>(l.type) > static_cast<int>(LayerKind::tied_head)) return false;
    return true;
  };
  for (const std::string& f : files) {
    const std::string text = io::read_file(f);
    const train::Config c = train::parse_config(text, f);
    if (legacy_layers(c)) {
      expect_as_before(text, f);
    } else {
      EXPECT_EQ(train::config_hash(train::parse_config(train::resolved_toml(c), f + " (resolved)")), train::config_hash(c)) << f;
    }
  }
  expect_as_before(kMlp, "kMlp");
  expect_as_before(kAdder, "kAdder");
}

TEST(ConfigSchema, TheHashOfARunMadeBeforeTheSchemaIsPinned) {
  // `bitgrad train examples/fashion_mlp.toml` printed "config 4a21ca4c3c81" at ebe9ddf
  const train::Config c = train::load_config(std::string(BITGRAD_SOURCE_DIR) + "/examples/fashion_mlp.toml");
  EXPECT_EQ(train::config_hash(c).substr(0, 12), "4a21ca4c3c81");
  EXPECT_EQ(train::config_hash(train::parse_config(kAdder, "adder.toml")), legacy_hash(train::parse_config(kAdder, "adder.toml")));
}

// Random configurations over every section, choice and key (each present or left to its
// default): the schema's hash and resolved TOML are the old ones for each.
struct Draw {
  std::uint64_t state;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }
  bool coin() { return below(2) == 0; }
  template <class T>
  T pick(std::initializer_list<T> v) {
    return v.begin()[below(static_cast<std::int64_t>(v.size()))];
  }
};

std::string random_config(Draw& d) {
  std::ostringstream o;
  auto maybe = [&](const std::string& line) {
    if (d.coin()) o << line << "\n";
  };
  maybe("seed = " + std::to_string(d.below(1 << 20)));
  const std::string dataset = d.pick({"fashion-mnist", "csv", "adder", "synthetic", "text"});
  const bool gpt = dataset == "text" && d.coin();
  o << "[data]\ndataset = \"" << dataset << "\"\n";
  if (dataset == "fashion-mnist") maybe("path = \"some/dir\""), maybe("normalize = false");
  if (dataset == "csv") {
    o << "train = \"a.csv\"\n";
    maybe("test = \"b \\\"q\\\".csv\""), maybe("header = true"), maybe("label_column = 3"), maybe("targets = 2"), maybe("allow_nonfinite = true");
  }
  if (dataset == "adder") maybe("samples = 777"), maybe("test_samples = 0"), maybe("features = 3");
  if (dataset == "synthetic") {
    maybe("samples = 64"), maybe("test_samples = 16"), maybe("shape = [2, 5, 5]");
    if (d.coin()) o << "classes = 0\n", maybe("targets = 3");
    else maybe("classes = 4");
  }
  if (dataset == "text") {
    maybe("path = \"corpus\""), maybe("vocabulary = \"bytes\""), maybe("val_fraction = 0.25");
    if (!gpt) o << "block_size = " << d.pick({8, 16}) << "\n";
  }
  maybe("crop_padding = 2"), maybe("hflip = true");
  o << "[model]\n";
  maybe(std::string("init = \"") + d.pick({"kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal", "zeros", "gpt2"}) + "\"");
  maybe(std::string("recompute = \"") + d.pick({"none", "blocks", "all"}) + "\"");
  if (gpt) {
    o << "type = \"gpt\"\n";
    maybe("n_layer = 2"), maybe("n_head = 2"), maybe("n_embd = 16"), maybe("block_size = 32"), maybe("dropout = 0.1"), maybe("bias = false"),
        maybe("tie_weights = true");
  } else {
    if (d.coin()) o << "type = \"layers\"\n";
    o << "layers = [\n";
    const int n = 1 + static_cast<int>(d.below(6));
    for (int i = 0; i < n; ++i) {
      switch (d.below(12)) {
        case 0: o << "  { type = \"linear\", out = 7" << (d.coin() ? ", bias = false" : "") << " },\n"; break;
        case 1: o << "  { type = \"conv2d\", out = 3, kernel = 3" << (d.coin() ? ", stride = 2, padding = 1, bias = false" : "") << " },\n"; break;
        case 2: o << "  { type = \"flatten\" },\n"; break;
        case 3: o << "  { type = \"" << d.pick({"relu", "gelu", "tanh", "sigmoid"}) << "\" },\n"; break;
        case 4: o << "  { type = \"dropout\", p = " << d.pick({"0.5", "0.1", "0"}) << " },\n"; break;
        case 5: o << "  { type = \"" << d.pick({"maxpool2d", "avgpool2d"}) << "\", kernel = 2" << (d.coin() ? ", stride = 1" : "") << " },\n"; break;
        case 6: o << "  { type = \"layernorm\"" << (d.coin() ? ", eps = 1e-6, bias = false" : "") << " },\n"; break;
        case 7: o << "  { type = \"embedding\", dim = 8" << (d.coin() ? ", dropout = 0.2" : "") << " },\n"; break;
        case 8: o << "  { type = \"transformer_block\", n_head = 2" << (d.coin() ? ", dropout = 0.2, bias = false" : "") << " },\n"; break;
        case 9: o << "  { type = \"tied_head\" },\n"; break;
        default: o << "  { type = \"linear\", out = 1 },\n"; break;
      }
    }
    o << "]\n";
  }
  o << "[train]\n";
  const int acc = d.pick({1, 2, 4});
  maybe("batch_size = " + std::to_string(32 * acc)), maybe("epochs = 3"), maybe("steps = 11"), maybe("accumulate = " + std::to_string(acc));
  maybe(std::string("loss = \"") + d.pick({"cross_entropy", "mse"}) + "\""), maybe("clip_grad_norm = 1.5"), maybe("shuffle = false"),
      maybe("drop_last = false"), maybe("log_every = 5");
  const std::string precision = d.pick({"fp32", "bf16", "fp16"});
  if (precision != "fp32" || d.coin()) o << "precision = \"" << precision << "\"\n";
  if (precision != "fp32") maybe("rounding = \"stochastic\""), maybe(d.coin() ? "loss_scale = \"dynamic\"" : "loss_scale = 1024"), maybe("loss_scale_interval = 7");
  o << "[optimizer]\n";
  const std::string opt = d.pick({"sgd", "adam", "adamw"});
  if (opt != "sgd" || d.coin()) o << "type = \"" << opt << "\"\n";
  maybe("lr = 0.125"), maybe("weight_decay = 0.01");
  if (opt == "sgd") {
    if (d.coin()) o << "momentum = 0.9\n", maybe("nesterov = true");
  } else {
    maybe("beta1 = 0.8"), maybe("beta2 = 0.95"), maybe("eps = 1e-6"), maybe(d.coin() ? "decay = \"all\"" : "decay = \"matrices\"");
  }
  o << "[schedule]\n";
  const std::string sched = d.pick({"constant", "step", "cosine"});
  maybe("type = \"" + sched + "\"");
  maybe("warmup_steps = 3");
  if (sched == "step") maybe("gamma = 0.5"), maybe("step_size = 10");
  if (sched == "cosine") maybe("min_lr = 0.001");
  o << "[eval]\n";
  maybe("batch_size = 50"), maybe("each_epoch = true"), maybe("every = 20");
  if (dataset == "text") maybe("windows = 5");
  if (d.coin()) o << "[run]\n", maybe("threads = 3"), maybe("workers = 2");
  return o.str();
}

TEST(ConfigSchema, RandomConfigurationsHashAsBefore) {
  Draw d{12345};
  int parsed = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string text = random_config(d);
    train::Config c;
    try {
      c = train::parse_config(text, "random.toml");
    } catch (const Error&) {
      continue;  // a rule across keys refused it (e.g. the schedule's type left to constant)
    }
    ++parsed;
    expect_as_before(text, "random config " + std::to_string(i) + ":\n" + text);
  }
  EXPECT_GE(parsed, 1500);
}

void expect_config_error(const std::string& text, const std::string& message) {
  try {
    train::parse_config(text, "cfg.toml");
    FAIL() << "expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(ConfigSchema, ErrorsNameFileLineAndKey) {
  const std::string text = "[data]\ndataset = \"text\"\n";
  expect_config_error(text + "block_size = 8\n[model]\ntype = \"gpt\"\n", "cfg.toml:3: [model] type = \"gpt\" sets block_size; remove it from [data]");
  expect_config_error(text + "[model]\ntype = \"gpt\"\nlayers = []\n", "cfg.toml:5: [model] type = \"gpt\" builds its own layers; remove 'layers'");
  expect_config_error(text + "[model]\ntype = \"gpt\"\nn_embd = 10\nn_head = 3\n", "cfg.toml:5: [model] n_embd 10 is not divisible by n_head 3");
  expect_config_error("[data]\ndataset = \"adder\"\n[model]\ntype = \"gpt\"\n", "cfg.toml:3: [model] type = \"gpt\" needs token data");
  expect_config_error(text + "[model]\nlayers = [ { type = \"relu\" } ]\n", "cfg.toml:1: [data] dataset = \"text\" with a layer list needs block_size");
  expect_config_error("[data]\ndataset = \"csv\"\n", "cfg.toml:1: [data] dataset = \"csv\" needs 'train' (a CSV file)");
  expect_config_error("[model]\nlayers = [ { out = 3 } ]\n", "cfg.toml:2: model.layers[0] needs a type");
  expect_config_error("[model]\nlayers = [\n { type = \"conv2d\", out = 3 } ]\n", "cfg.toml:3: model.layers[0] (conv2d) needs 'kernel'");
  expect_config_error("[model]\nlayers = [ { type = \"relu\", p = 3 } ]\n", "cfg.toml:2: unknown key 'p' in model.layers[0] (known keys: type)");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[train]\nprecision = \"fp8\"\n",
               "cfg.toml:4: [train] precision is 'fp8'; expected one of fp32, bf16, fp16");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[train]\nrounding = \"stochastic\"\n",
               "cfg.toml:4: [train] rounding = \"stochastic\" needs precision");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[train]\nprecision = \"fp16\"\nloss_scale = 3\n",
               "cfg.toml:5: [train] loss_scale must be \"dynamic\" or a power of two (so that scaling is exact), got 3.0");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[train]\nprecision = \"fp16\"\nloss_scale = \"auto\"\n",
               "cfg.toml:5: [train] loss_scale must be \"dynamic\" or a power of two, got \"auto\"");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[train]\nbatch_size = 10\naccumulate = 4\n",
               "cfg.toml:3: [train] batch_size 10 is not divisible by accumulate 4");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[optimizer]\nnesterov = true\n", "cfg.toml:3: [optimizer] nesterov needs momentum > 0");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[eval]\nevery = -1\n", "cfg.toml:4: [eval] every must be in [0, ");
  expect_config_error("seed = \"x\"\n", "cfg.toml:1: top level seed must be an integer, got a string");
  expect_config_error("[model]\nlayers = [ { type = \"relu\" } ]\n[run]\nthreads = 1.5\n", "cfg.toml:4: [run] threads must be an integer, got a number");
  expect_config_error("data = 3\n", "cfg.toml:1: [data] must be a table, got an integer");
}

}  // namespace
}  // namespace bitgrad::test
