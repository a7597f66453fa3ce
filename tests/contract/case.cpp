#include "contract/case.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bitgrad/error.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::contract {
namespace {

// Draws from one Philox stream, one counter value per draw.
struct Draw {
  rng::Stream s;
  std::uint64_t i = 0;
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(s.below(i++, static_cast<std::uint64_t>(n))); }
  std::int64_t range(std::int64_t lo, std::int64_t hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
  bool coin(int percent = 50) { return below(100) < percent; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(below(static_cast<std::int64_t>(v.size())))];
  }
};

// The shape after a layer; empty when the layer cannot take `in`.
std::vector<std::int64_t> after(const Layer& l, std::vector<std::int64_t> in) {
  const std::string& t = l.type;
  if (t == "linear") {  // [F] or sequences [T, F]
    if (in.empty() || in.size() > 2) return {};
    in.back() = l.out;
    return in;
  }
  if (t == "flatten") {
    std::int64_t n = 1;
    for (auto d : in) n *= d;
    return {n};
  }
  if (t == "maxpool2d" || t == "avgpool2d") {  // PyTorch's sizes, with their options (numerics.md §35)
    if (in.size() != 3 || 2 * l.padding > l.kernel || (t == "avgpool2d" && l.dilation != 1)) return {};
    std::vector<std::int64_t> o{in[0]};
    for (std::size_t a = 1; a < 3; ++a) {
      const std::int64_t room = in[a] + 2 * l.padding - (static_cast<std::int64_t>(l.dilation) * (l.kernel - 1) + 1);
      if (room < 0) return {};
      std::int64_t n = (l.ceil_mode ? (room + l.stride - 1) / l.stride : room / l.stride) + 1;
      if (l.ceil_mode && (n - 1) * l.stride >= in[a] + l.padding) --n;
      o.push_back(n);
    }
    return o;
  }
  if (t == "conv2d") {
    if (in.size() != 3) return {};
    const int pad = l.padding;
    const std::int64_t h = (in[1] + 2 * pad - l.kernel) / l.stride + 1, w = (in[2] + 2 * pad - l.kernel) / l.stride + 1;
    if (in[1] + 2 * pad < l.kernel || in[2] + 2 * pad < l.kernel || h < 1 || w < 1) return {};
    return {t == "conv2d" ? l.out : in[0], h, w};
  }
  // numerics.md §33-§37: the conv variants (conv: 1-d on [C, L], 2-d on [C, H, W])
  if (t == "conv" || t == "conv1d" || t == "conv_transpose2d") {
    const std::size_t rank = t == "conv1d" ? 2 : t == "conv_transpose2d" ? 3 : in.size();
    if (in.size() != rank || (rank != 2 && rank != 3)) return {};
    if (l.groups < 1 || in[0] % l.groups || l.out % l.groups) return {};
    const std::int64_t span = static_cast<std::int64_t>(l.dilation) * (l.kernel - 1) + 1, sp = static_cast<std::int64_t>(rank) - 1;
    if (!l.pads.empty() && static_cast<std::int64_t>(l.pads.size()) != 2 * sp) return {};
    std::vector<std::int64_t> o{l.out};
    for (std::size_t a = 1; a < rank; ++a) {
      const std::int64_t pads = l.pads.empty() ? 2 * l.padding : l.pads[a - 1] + l.pads[a - 1 + static_cast<std::size_t>(sp)];
      std::int64_t n;
      if (t == "conv_transpose2d") {
        if (l.output_padding >= std::max(l.stride, l.dilation)) return {};
        n = (in[a] - 1) * l.stride - pads + span + l.output_padding;
      } else {
        if (in[a] + pads < span) return {};
        n = (in[a] + pads - span) / l.stride + 1;
      }
      if (n < 1) return {};
      o.push_back(n);
    }
    return o;
  }
  if (t == "adaptive_avgpool2d" || t == "adaptive_maxpool2d" || t == "global_avgpool") {
    if (in.size() != 3) return {};
    const std::int64_t n = t == "global_avgpool" ? 1 : l.size;
    return {in[0], n, n};
  }
  if (t == "upsample") {
    if (in.size() != 3) return {};
    if (l.size > 0) return {in[0], l.size, l.size};
    const auto h = static_cast<std::int64_t>(static_cast<double>(in[1]) * l.scale), w = static_cast<std::int64_t>(static_cast<double>(in[2]) * l.scale);
    if (h < 1 || w < 1) return {};
    return {in[0], h, w};
  }
  if (t == "groupnorm" || t == "instancenorm") {  // [C, ...]: groups dividing C, more than one value per group
    if (in.empty() || (t == "instancenorm" && in.size() < 2)) return {};
    const std::int64_t g = t == "instancenorm" ? in[0] : l.groups;
    std::int64_t per = 1;
    for (auto d : in) per *= d;
    if (g < 1 || in[0] % g || per / g < 2) return {};
    return in;
  }
  if (t == "rnn" || t == "lstm" || t == "gru") {  // sequences [T, F]
    if (in.size() != 2) return {};
    return l.last ? std::vector<std::int64_t>{l.out} : std::vector<std::int64_t>{in[0], l.out};
  }
  return in;  // activations, dropout, layer norm, batch norm, rms norm
}

std::string num(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  std::string s = o.str();
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// the option-rich layers (numerics.md §33-§37), from the case's stream of its own: a layer stack of
// images through the conv variants (stride, dilation, groups up to depthwise, transposed),
// upsampling (nearest, bilinear, by scale or size) and pooling (overlapping, adaptive, global);
// sequences [T, F] through conv1d and a recurrent layer (rnn, lstm, gru; one or two layers; all
// steps or the last); vectors through the new norms. Each block only where its shape fits, a
// sample at most 1024 values after each layer (bounded cost).
void option_rich_layers(Case& c, Draw& d) {
  const std::vector<std::string> acts = {"relu", "gelu", "tanh", "sigmoid"};
  const std::int64_t outputs = c.classes > 0 ? c.classes : c.targets;
  for (;;) {
    std::vector<Layer> layers;
    std::vector<std::int64_t> s;
    auto add = [&](const Layer& l) {
      const auto n = after(l, s);
      std::int64_t size = 1;
      for (auto v : n) size *= v;
      if (n.empty() || size > 1024) return;
      layers.push_back(l);
      s = n;
    };
    auto divisor = [&](std::int64_t n) {  // of the channels: 1 (plain) to n (depthwise)
      std::vector<std::int64_t> v;
      for (std::int64_t k = 1; k <= n; ++k)
        if (n % k == 0) v.push_back(k);
      return d.pick(v);
    };
    auto norm = [&] {
      Layer l{d.pick(std::vector<std::string>{"groupnorm", "instancenorm", "rmsnorm", "layernorm"})};
      if (l.type == "groupnorm") l.groups = divisor(s[0]);
      l.affine = d.coin(70);
      add(l);
    };
    auto conv = [&](const std::string& type) {
      Layer l{type};
      l.groups = d.coin() ? 1 : divisor(s[0]);
      l.out = l.groups * d.range(1, 3);
      l.kernel = static_cast<int>(d.range(1, 3));
      l.stride = static_cast<int>(d.range(1, 2));
      l.dilation = static_cast<int>(d.range(1, 2));
      l.padding = static_cast<int>(d.range(0, type == "conv_transpose2d" ? 1 : 2));
      if (type == "conv_transpose2d") l.output_padding = static_cast<int>(d.range(0, std::max(l.stride, l.dilation) - 1));
      l.bias = d.coin(80);
      if (d.coin(30))  // asymmetric padding, one entry per side
        for (std::size_t k = 0; k < 2 * (s.size() - 1); ++k) l.pads.push_back(static_cast<int>(d.range(0, type == "conv_transpose2d" ? 1 : 2)));
      add(l);
    };
    const std::int64_t family = d.below(3);
    if (family == 0) {  // images [C, H, W]
      c.shape = {d.range(1, 4), d.range(3, 9), d.range(3, 9)};
      s = c.shape;
      for (std::int64_t k = d.range(1, 3); k > 0; --k) {
        switch (d.below(5)) {
          case 0:
          case 1: conv("conv"); break;
          case 2: conv("conv_transpose2d"); break;
          case 3: {
            Layer u{"upsample"};
            if (d.coin(30)) u.size = d.range(2, 8);
            else u.scale = d.coin() ? 2.0 : 1.5;
            u.bilinear = d.coin();
            u.align_corners = u.bilinear && d.coin();
            add(u);
            break;
          }
          default: {
            Layer a{d.coin() ? "adaptive_avgpool2d" : "adaptive_maxpool2d"};
            a.size = d.range(1, 3);
            add(a);
          }
        }
        if (d.coin()) norm();
        if (d.coin(60)) add(Layer{d.pick(acts)});
        if (d.coin(40)) {  // pooling, overlapping or not
          const int k2 = static_cast<int>(d.range(1, 3));
          Layer p{d.coin() ? "maxpool2d" : "avgpool2d", 0, k2, static_cast<int>(d.range(1, k2))};
          if (d.coin(60)) {  // PyTorch's options: padding up to half the kernel, dilation (max), ceil_mode, count_include_pad (avg)
            p.kernel = static_cast<int>(d.range(2, 3));
            p.stride = static_cast<int>(d.range(1, p.kernel));
            p.padding = static_cast<int>(d.range(0, p.kernel / 2));
            if (p.type == "maxpool2d") p.dilation = static_cast<int>(d.range(1, 2));
            p.ceil_mode = d.coin();
            if (p.type == "avgpool2d") p.count_include_pad = d.coin();
          }
          add(p);
        }
      }
      if (d.coin(25)) add(Layer{"global_avgpool"});
      add(Layer{"flatten"});
    } else if (family == 1) {  // sequences [T, F]; conv1d reads them as [C, L]
      c.shape = {d.range(2, 8), d.range(1, 8)};
      s = c.shape;
      if (d.coin(40)) conv(d.coin() ? "conv1d" : "conv");
      if (d.coin(40)) norm();
      if (d.coin(85)) {
        Layer r{d.pick(std::vector<std::string>{"rnn", "lstm", "gru"})};
        r.out = d.range(1, 8);
        r.num_layers = d.range(1, 2);
        r.relu = r.type == "rnn" && d.coin();
        r.bias = d.coin(85);
        r.last = d.coin();
        add(r);
      }
      if (s.size() == 2) {
        if (d.coin(30)) add(Layer{d.coin() ? "rmsnorm" : "layernorm"});
        if (d.coin(30)) add(Layer{"linear", d.range(1, 8)});
        add(Layer{"flatten"});
      }
    } else {  // vectors [F]
      c.shape = {d.range(1, 30)};
      s = c.shape;
      add(Layer{"linear", d.range(1, 24)});
      norm();
      if (d.coin(70)) add(Layer{d.pick(acts)});
    }
    if (d.coin(40)) {
      add(Layer{"linear", d.range(1, 16)});
      if (d.coin(60)) add(Layer{d.pick(acts)});
    }
    add(Layer{"linear", outputs});
    Case x = c;
    x.layers = layers;
    if (x.valid()) {
      c = x;
      return;
    }
  }
}

// the losses beyond cross-entropy and MSE (numerics.md §30, §41): regression cases train with mse, l1, smooth_l1 (beta),
// huber (delta) or bce_with_logits; class cases with cross_entropy's label smoothing, class
// weights and ignore_index (at least one of them).
void drawn_loss(Case& c, Draw& d) {
  if (c.classes == 0) {
    c.loss = d.pick(std::vector<std::string>{"mse", "l1", "smooth_l1", "huber", "bce_with_logits"});
    c.beta = d.pick(std::vector<double>{0.0, 0.5, 1.0, 2.0});
    c.delta = d.pick(std::vector<double>{0.5, 1.0, 2.0});
    return;
  }
  if (d.coin()) c.label_smoothing = d.coin() ? 0.1 : 0.25;
  if (d.coin())
    for (std::int64_t k = 0; k < c.classes; ++k) c.class_weights.push_back(d.pick(std::vector<double>{0.25, 0.5, 1.0, 2.0, 3.0}));
  if (d.coin(35)) c.ignore_index = d.below(c.classes);
  if (c.label_smoothing == 0 && c.class_weights.empty() && c.ignore_index == -100) c.ignore_index = d.below(c.classes);
}

}  // namespace

std::vector<std::int64_t> shape_after(const Layer& l, const std::vector<std::int64_t>& in) { return after(l, in); }

bool Case::valid() const {
  if (!torch.empty()) return batch >= 1 && samples >= 1 && steps >= 1;
  std::vector<std::int64_t> s = shape;
  for (const Layer& l : layers) {
    s = after(l, s);
    if (s.empty()) return false;
  }
  const std::int64_t outputs = classes > 0 ? classes : targets;
  return !layers.empty() && s.size() == 1 && s[0] == outputs && layers.back().type == "linear" && batch >= 1 && samples >= 1 && steps >= 1 &&
         (class_weights.empty() || static_cast<std::int64_t>(class_weights.size()) == classes);
}

bool onnx_writable(const Case& c) {
  // the writer's layers with the options it writes: Gemm on one feature axis, Conv and pools
  // with square kernels, symmetric padding and no other options, the activations, Dropout,
  // LayerNormalization over the features, BatchNormalization
  std::vector<std::int64_t> s = c.shape;
  for (const Layer& l : c.layers) {
    const std::string& t = l.type;
    const bool plain_pool = (t == "maxpool2d" || t == "avgpool2d") && l.padding == 0 && l.dilation == 1 && !l.ceil_mode;
    const bool plain_conv = t == "conv2d" && l.pads.empty() && l.dilation == 1 && l.groups == 1;
    if (t == "linear" && s.size() != 1) return false;
    if (!(t == "linear" || plain_conv || plain_pool || t == "flatten" || t == "relu" || t == "tanh" || t == "sigmoid" || t == "gelu" ||
          t == "dropout" || t == "layernorm" || t == "batchnorm"))
      return false;
    s = after(l, s);
    if (s.empty()) return false;
  }
  return true;
}

namespace {
std::vector<TorchIdiom> g_torch;
}  // namespace

void load_torch_idioms(const std::string& dir) {
  std::ifstream in(dir + "/manifest.txt");
  BITGRAD_CHECK(in.good(), "contract_fuzz", "--torch ", dir, ": no manifest.txt (write it with tests/python/sample_axis_models.py --export DIR)");
  g_torch.clear();
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::istringstream f(line);
    TorchIdiom t;
    int bn = 0;
    BITGRAD_CHECK(static_cast<bool>(f >> t.name >> t.file >> t.kind >> t.mode >> bn >> t.seq), "contract_fuzz", dir,
                  "/manifest.txt: a line is not `name file kind mode batch_statistics seq`: ", line);
    t.batch_statistics = bn != 0;
    g_torch.push_back(t);
  }
  BITGRAD_CHECK(!g_torch.empty(), "contract_fuzz", dir, "/manifest.txt lists no graph");
}
const std::vector<TorchIdiom>& torch_idioms() { return g_torch; }
const TorchIdiom* torch_idiom(const Case& c) {
  for (const TorchIdiom& t : g_torch)
    if (!c.torch.empty() && t.name == c.torch) return &t;
  return nullptr;
}

bool splits_over_ranks(const Case& c) {
  const TorchIdiom* t = torch_idiom(c);
  // a graph refused before training ("output": its samples off axis 0) fails every run alike, but
  // mpirun words the failure its own way: no rank pairs for it
  return !t || (t->mode != "mixes_samples" && t->mode != "output" && !(t->mode == "per_block" && t->batch_statistics));
}

bool splits_the_batch(const Case& c) {
  if (const TorchIdiom* t = torch_idiom(c)) return splits_over_ranks(c) && !t->batch_statistics;  // §42; §31
  for (const Layer& l : c.layers)
    if (l.type == "batchnorm") return false;  // micro-batches refused (numerics §31); ranks exchange the statistics (§20)
  return true;
}

std::string Case::loss_name() const {
  if (!loss.empty()) return loss;
  return classes > 0 ? "cross_entropy" : "mse";
}

std::vector<std::string> features(const Case& c) {
  std::vector<std::string> f;
  for (const Layer& l : c.layers) {
    f.push_back(l.type);
    if (l.type == "conv" || l.type == "conv1d" || l.type == "conv_transpose2d") {
      if (l.stride > 1) f.push_back(l.type + "+stride");
      if (l.dilation > 1) f.push_back(l.type + "+dilation");
      if (l.groups > 1) f.push_back(l.type + "+groups");
      if (!l.pads.empty()) f.push_back(l.type + "+pads");
    }
    if (l.type == "maxpool2d" || l.type == "avgpool2d") {
      if (l.padding > 0) f.push_back(l.type + "+padding");
      if (l.dilation > 1) f.push_back(l.type + "+dilation");
      if (l.ceil_mode) f.push_back(l.type + "+ceil_mode");
      if (!l.count_include_pad) f.push_back(l.type + "+count_include_pad=false");
    }
    if (l.type == "conv" && c.shape.size() == 2 && &l == &c.layers.front()) f.push_back("conv(1d)");
    if (l.type == "upsample") f.push_back(l.bilinear ? (l.align_corners ? "upsample+bilinear+align_corners" : "upsample+bilinear") : "upsample+nearest");
    if (l.type == "rnn" || l.type == "lstm" || l.type == "gru") {
      f.push_back(l.type + (l.last ? "+last" : "+all"));
      if (l.num_layers > 1) f.push_back(l.type + "+num_layers");
    }
  }
  if (!c.torch.empty()) f.push_back("torch:" + c.torch);
  const std::string loss = c.loss_name();
  f.push_back("loss=" + loss);
  if (c.label_smoothing > 0) f.push_back("loss=cross_entropy+label_smoothing");
  if (!c.class_weights.empty()) f.push_back("loss=cross_entropy+class_weights");
  if (c.ignore_index != -100) f.push_back("loss=cross_entropy+ignore_index");
  return f;
}

std::string Case::toml() const {
  std::ostringstream o;
  const TorchIdiom* t = torch_idiom(*this);
  if (t && t->kind == "tokens") {  // a torch language model on the fortunes' characters
    o << "# contract fuzzer case (torch's " << t->name << ")\nseed = " << seed << "\n\n[data]\ndataset = \"text\"\n"
      << "path = \"/usr/share/games/fortunes\"\nvocabulary = \"characters\"\nval_fraction = 0.1\nblock_size = " << t->seq << "\n";
  } else {
    o << "# contract fuzzer case" << (t ? " (torch's " + t->name + ")" : std::string()) << "\nseed = " << seed
      << "\n\n[data]\ndataset = \"synthetic\"\nsamples = " << samples << "\nshape = [";
    for (std::size_t i = 0; i < shape.size(); ++i) o << (i ? ", " : "") << shape[i];
    o << "]\nclasses = " << classes << "\n";
    if (classes == 0) o << "targets = " << targets << "\n";
  }
  o << "\n[model]\n";
  if (onnx) o << "onnx = \"" << onnx_path << "\"\n";  // the layers as an ONNX graph
  else o << "layers = [\n";
  for (const Layer& l : onnx ? std::vector<Layer>{} : layers) {
    o << "  { type = \"" << l.type << "\"";
    if (l.type == "linear") o << ", out = " << l.out << (l.bias ? "" : ", bias = false");
    if (l.type == "conv2d")
      o << ", out = " << l.out << ", kernel = " << l.kernel << ", stride = " << l.stride << ", padding = " << l.padding
        << (l.bias ? "" : ", bias = false");
    if (l.type == "maxpool2d" || l.type == "avgpool2d") {
      o << ", kernel = " << l.kernel << ", stride = " << l.stride;
      if (l.padding > 0) o << ", padding = " << l.padding;
      if (l.dilation > 1) o << ", dilation = " << l.dilation;
      if (l.ceil_mode) o << ", ceil_mode = true";
      if (!l.count_include_pad) o << ", count_include_pad = false";
    }
    if (l.type == "dropout") o << ", p = " << num(l.p);
    if (l.type == "conv" || l.type == "conv1d" || l.type == "conv_transpose2d") {
      o << ", out = " << l.out << ", kernel = " << l.kernel << ", stride = " << l.stride;
      if (l.pads.empty()) o << ", padding = " << l.padding;
      else {
        o << ", pads = [";
        for (std::size_t i = 0; i < l.pads.size(); ++i) o << (i ? ", " : "") << l.pads[i];
        o << "]";
      }
      o << ", dilation = " << l.dilation << ", groups = " << l.groups;
      if (l.type == "conv_transpose2d") o << ", output_padding = " << l.output_padding;
      if (!l.bias) o << ", bias = false";
    }
    if (l.type == "adaptive_avgpool2d" || l.type == "adaptive_maxpool2d") o << ", size = " << l.size;
    if (l.type == "upsample") {
      if (l.size > 0) o << ", size = " << l.size;
      else o << ", scale = " << num(l.scale);
      o << ", bilinear = " << (l.bilinear ? "true" : "false") << (l.align_corners ? ", align_corners = true" : "");
    }
    if (l.type == "groupnorm") o << ", groups = " << l.groups;
    if (l.type == "groupnorm" || l.type == "instancenorm" || l.type == "rmsnorm") o << ", affine = " << (l.affine ? "true" : "false");
    if (l.type == "rnn" || l.type == "lstm" || l.type == "gru") {
      o << ", hidden = " << l.out << ", num_layers = " << l.num_layers << ", output = \"" << (l.last ? "last" : "all") << "\"";
      if (l.type == "rnn") o << ", nonlinearity = \"" << (l.relu ? "relu" : "tanh") << "\"";
      if (!l.bias) o << ", bias = false";
    }
    o << " },\n";
  }
  o << (onnx ? "" : "]\n") << "\n[train]\nbatch_size = " << batch << "\nsteps = " << steps << "\ndrop_last = " << (drop_last ? "true" : "false")
    << "\nshuffle = " << (shuffle ? "true" : "false") << "\nloss = \"" << loss_name() << "\"\n";
  if (label_smoothing > 0) o << "label_smoothing = " << num(label_smoothing) << "\n";
  if (!class_weights.empty()) {
    o << "class_weights = [";
    for (std::size_t i = 0; i < class_weights.size(); ++i) o << (i ? ", " : "") << num(class_weights[i]);
    o << "]\n";
  }
  if (ignore_index != -100) o << "ignore_index = " << ignore_index << "\n";
  if (loss == "smooth_l1") o << "beta = " << num(beta) << "\n";
  if (loss == "huber") o << "delta = " << num(delta) << "\n";
  if (clip > 0) o << "clip_grad_norm = " << num(clip) << "\n";
  if (precision != "fp32") o << "precision = \"" << precision << "\"\n" << (stochastic ? "rounding = \"stochastic\"\n" : "");
  o << "\n[optimizer]\ntype = \"" << optimizer << "\"\nlr = " << num(lr) << "\nweight_decay = " << num(weight_decay) << "\n";
  if (optimizer == "sgd") o << "momentum = " << num(momentum) << "\nnesterov = " << (nesterov ? "true" : "false") << "\n";
  o << "\n[schedule]\ntype = \"" << schedule << "\"\nwarmup_steps = " << warmup << "\n";
  if (schedule == "step") o << "step_size = 2\ngamma = 0.5\n";
  o << "\n[eval]\neach_epoch = false\n";
  return o.str();
}

Case generate(std::uint64_t seed, std::uint64_t index) {
  Draw d{rng::Stream(seed, "contract").sub(index)};
  for (;;) {
    Case c;
    c.seed = static_cast<std::uint64_t>(d.range(0, 1 << 20));
    const bool image = d.coin(55);
    c.shape = image ? std::vector<std::int64_t>{d.range(1, 3), d.range(3, 10), d.range(3, 10)} : std::vector<std::int64_t>{d.range(1, 40)};
    c.classes = d.coin(75) ? d.range(2, 7) : 0;
    c.targets = d.range(1, 3);
    const std::vector<std::string> acts = {"relu", "gelu", "tanh", "sigmoid"};
    std::vector<std::int64_t> s = c.shape;
    auto add = [&](const Layer& l) {
      const auto n = after(l, s);
      if (n.empty()) return;
      c.layers.push_back(l);
      s = n;
    };
    if (image) {
      for (int k = static_cast<int>(d.range(0, 2)); k > 0; --k) {
        Layer conv{"conv2d", d.range(1, 4), static_cast<int>(d.range(1, 3)), static_cast<int>(d.range(1, 2)), static_cast<int>(d.range(0, 1))};
        conv.bias = d.coin(80);
        add(conv);
        if (d.coin(40)) add(Layer{"layernorm"});
        if (d.coin(70)) add(Layer{d.pick(acts)});
        if (d.coin(40)) {
          const int k2 = static_cast<int>(d.range(1, 2));
          add(Layer{d.coin() ? "maxpool2d" : "avgpool2d", 0, k2, static_cast<int>(d.range(1, k2))});
        }
        if (d.coin(20)) add(Layer{"dropout", 0, 0, 1, 0, 0.25});
      }
      add(Layer{"flatten"});
    }
    for (int k = static_cast<int>(d.range(0, 2)); k > 0; --k) {
      Layer lin{"linear", d.range(1, 24)};
      lin.bias = d.coin(85);
      add(lin);
      if (d.coin(30)) add(Layer{"layernorm"});
      if (d.coin(70)) add(Layer{d.pick(acts)});
      if (d.coin(25)) add(Layer{"dropout", 0, 0, 1, 0, d.coin() ? 0.5 : 0.125});
    }
    add(Layer{"linear", c.classes > 0 ? c.classes : c.targets});
    c.batch = d.pick(std::vector<std::int64_t>{16, 20, 32, 48, 50, 64, 96, 100, 128});
    c.drop_last = d.coin();
    c.shuffle = d.coin(80);
    c.samples = c.batch + d.range(1, 3 * c.batch);
    c.steps = d.range(2, 7);
    c.optimizer = d.pick(std::vector<std::string>{"sgd", "adam", "adamw"});
    c.lr = c.optimizer == "sgd" ? 0.05 : 0.003;
    c.momentum = d.coin() ? 0.9 : 0.0;
    c.nesterov = c.momentum > 0 && d.coin();
    c.weight_decay = d.coin(30) ? 0.01 : 0.0;
    c.schedule = d.pick(std::vector<std::string>{"constant", "step", "cosine"});
    c.warmup = d.range(0, 2);
    c.clip = d.coin(30) ? 0.5 : 0.0;
    if (!c.valid()) continue;
    // the option-rich layers and the losses (streams of their own, so that every case they leave alone stays what it was):
    // one case in two gets a stack of the new layers instead of its own; every regression case
    // a loss drawn from five, one class case in two cross_entropy's options
    if (Draw e{rng::Stream(seed, "contract-layers").sub(index)}; e.coin()) option_rich_layers(c, e);
    if (Draw e{rng::Stream(seed, "contract-loss").sub(index)}; c.classes == 0 || e.coin()) drawn_loss(c, e);
    // About one case in 12 diverges: SGD at lr 1e6 (the largest allowed) for 7 steps overflows
    // weights and losses to inf and NaN, whose bits the contract covers too (numerics.md §1).
    // A stream of its own, so that every other case stays what it was before this draw existed.
    if (rng::Stream(seed, "contract-diverge").u64(index) % 12 == 0) {
      c.optimizer = "sgd", c.lr = 1e6, c.clip = 0, c.schedule = "constant", c.warmup = 0, c.steps = 7;
    }
    // one case in four gets a batchnorm after its first layer (its own stream: every other case
    // stays what it was); its matrix then leaves out accumulate > 1 and ranks, which `bitgrad
    // train` refuses for it (numerics.md §31).
    if (c.layers.size() >= 2 && rng::Stream(seed, "contract-batchnorm").u64(index) % 4 == 0)
      c.layers.insert(c.layers.begin() + 1, Layer{"batchnorm"});
    // one case in two in mixed precision (its own stream too): bf16 to nearest, bf16
    // stochastic, fp16 with dynamic loss scaling
    if (const std::uint64_t m = rng::Stream(seed, "contract-precision").u64(index) % 6; m < 3) {
      c.precision = m == 2 ? "fp16" : "bf16";
      c.stochastic = m == 1;
    }
    // one case in four trains its layers as an ONNX graph (its own stream), where the
    // writer (onnx_case.cpp) can say them
    c.onnx = rng::Stream(seed, "contract-onnx-case").u64(index) % 4 == 0 && onnx_writable(c);
    // with graphs torch exported (--torch), one case in three trains one of them (its
    // own stream: without --torch every case is what it was)
    if (!g_torch.empty() && rng::Stream(seed, "contract-torch").u64(index) % 3 == 0) {
      Draw e{rng::Stream(seed, "contract-torch-case").sub(index)};
      const TorchIdiom& t = g_torch[static_cast<std::size_t>(e.range(0, static_cast<std::int64_t>(g_torch.size()) - 1))];
      c.torch = t.name, c.onnx = true, c.onnx_path = t.file;
      c.layers.clear();
      c.classes = 5, c.targets = 1;
      c.shape = t.kind == "sequence" ? std::vector<std::int64_t>{4, t.seq} : std::vector<std::int64_t>{8};
      c.loss.clear(), c.label_smoothing = 0, c.class_weights.clear(), c.ignore_index = -100;
      c.precision = "fp32", c.stochastic = false;  // the graph's ops are not the layers that round
      c.batch = e.pick(std::vector<std::int64_t>{32, 48, 64, 96, 128});
      c.samples = c.batch + e.range(1, 2 * c.batch);
      c.steps = e.range(2, 3);
      if (c.lr > 1) c.lr = 0.05, c.steps = 2;  // not the diverging draw: these graphs are not layer lists
    }
    return c;
  }
}

std::vector<Case> simplifications(const Case& c) {
  std::vector<Case> out;
  auto keep = [&](Case x) {
    if (x.valid()) out.push_back(std::move(x));
  };
  for (std::size_t i = 0; i + 1 < c.layers.size(); ++i) {  // drop a layer (never the last)
    Case x = c;
    x.layers.erase(x.layers.begin() + static_cast<std::ptrdiff_t>(i));
    keep(x);
  }
  if (c.steps > 1) {
    Case x = c;
    x.steps = c.steps > 2 ? c.steps / 2 + (c.steps % 2) : 1;
    keep(x);
  }
  if (c.samples > c.batch + 1) {
    Case x = c;
    x.samples = c.batch + (c.samples - c.batch) / 2;
    keep(x);
  }
  auto plainer = [&](auto&& change) {
    Case x = c;
    change(x);
    if (x.toml() != c.toml()) keep(x);
  };
  plainer([](Case& x) { x.optimizer = "sgd", x.momentum = 0, x.nesterov = false, x.weight_decay = 0; });
  plainer([](Case& x) { x.schedule = "constant", x.warmup = 0; });
  plainer([](Case& x) { x.clip = 0; });
  plainer([](Case& x) { x.precision = "fp32", x.stochastic = false; });
  plainer([](Case& x) { x.shuffle = false; });
  plainer([](Case& x) { x.loss.clear(), x.label_smoothing = 0, x.class_weights.clear(), x.ignore_index = -100; });
  plainer([](Case& x) { x.label_smoothing = 0; });
  plainer([](Case& x) { x.class_weights.clear(); });
  plainer([](Case& x) { x.ignore_index = -100; });
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    plainer([&](Case& x) {
      Layer& l = x.layers[i];
      const bool wide = l.type == "conv2d" || l.type == "conv" || l.type == "conv1d" || l.type == "conv_transpose2d" || l.type == "rnn" ||
                        l.type == "lstm" || l.type == "gru";
      if (wide || (l.type == "linear" && i + 1 < x.layers.size())) l.out = std::max<std::int64_t>(1, l.out / 2);
    });
  }
  return out;
}

}  // namespace bitgrad::contract
