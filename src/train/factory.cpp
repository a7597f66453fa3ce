// The datasets and the model a configuration describes.
#include "bitgrad/nn_spatial.hpp"
#include "bitgrad/onnx.hpp"
#include "bitgrad/train.hpp"
#include "io/format.hpp"
#include "train/memory.hpp"

#include <map>
#include <mutex>

namespace bitgrad::train {
namespace {
[[noreturn]] void fail_in_config(const std::string& file, int line, const std::string& what) {
  throw Error(file + ":" + std::to_string(line) + ": " + what);
}

// The training and the validation set of a text configuration share one corpus, read once per
// process (a map looked up by the corpus's settings, never iterated).
std::shared_ptr<const data::TextCorpus> corpus_of(const Config& c) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const data::TextCorpus>> cache;
  const std::string key = c.data.path + (c.data.text_bytes ? "\nbytes\n" : "\nchars\n") + io::strprintf("%.17g", c.data.val_fraction);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end())
    if (auto sp = it->second.lock()) return sp;
  auto sp = data::load_text(c.data.path, c.data.text_bytes, c.data.val_fraction);
  cache[key] = sp;
  return sp;
}
}  // namespace

std::shared_ptr<const data::TextCorpus> text_corpus(const Config& c) {
  if (c.data.dataset != DatasetKind::text) throw Error(c.file + ": the dataset is not text");
  return corpus_of(c);
}

std::shared_ptr<data::Dataset> train_dataset(const Config& c) {
  switch (c.data.dataset) {
    case DatasetKind::fashion_mnist: return data::fashion_mnist(c.data.path, true, c.data.normalize);
    case DatasetKind::csv: return data::csv_dataset(c.data.train_csv, c.data.csv_header, c.data.label_column, c.data.targets, c.data.allow_nonfinite);
    case DatasetKind::synthetic: return data::synthetic_dataset(c.data.samples, Shape(c.data.shape), c.data.classes, c.data.targets, c.seed);
    case DatasetKind::text: return data::text_windows(corpus_of(c), c.data.block_size, true);
    case DatasetKind::adder: break;
  }
  return data::adder_dataset(c.data.samples, c.data.features, c.seed);
}

std::shared_ptr<data::Dataset> test_dataset(const Config& c) {
  switch (c.data.dataset) {
    case DatasetKind::fashion_mnist: return data::fashion_mnist(c.data.path, false, c.data.normalize);
    case DatasetKind::csv: return c.data.test_csv.empty() ? nullptr : data::csv_dataset(c.data.test_csv, c.data.csv_header, c.data.label_column, c.data.targets, c.data.allow_nonfinite);
    case DatasetKind::synthetic:
      return c.data.test_samples > 0 ? data::synthetic_dataset(c.data.test_samples, Shape(c.data.shape), c.data.classes, c.data.targets, c.seed, c.data.samples) : nullptr;
    case DatasetKind::text: return c.data.val_fraction > 0 ? data::text_windows(corpus_of(c), c.data.block_size, false, c.eval.windows) : nullptr;
    case DatasetKind::adder: break;
  }
  return c.data.test_samples > 0 ? data::adder_dataset(c.data.test_samples, c.data.features, c.seed, c.data.samples) : nullptr;
}

namespace {
// [train] class_weights: one per class of the dataset
void check_class_weights(const Config& c, std::int64_t classes) {
  const auto n = static_cast<std::int64_t>(c.train.class_weights.size());
  if (n > 0 && n != classes)
    fail_in_config(c.file, c.train.class_weights_line,
            "[train] class_weights has " + std::to_string(n) + " values but the dataset has " + std::to_string(classes) + " classes: give one per class");
}
}  // namespace

// [model] onnx = "...": the graph as the one layer of a Sequential (its parameters are
// "0." + the ONNX initializer names; bitgrad export writes them without the "0."), checked
// against the dataset as a layer list is
std::shared_ptr<nn::Sequential> build_onnx_model(const Config& c, const data::Dataset& ds) {
  auto model = std::make_shared<nn::Sequential>();
  const std::string where = c.file + ": [model] onnx = " + c.model.onnx;
  std::shared_ptr<onnx::GraphModule> g;
  Shape shape{1};
  for (std::int64_t d : ds.sample_shape()) shape.push_back(d);
  try {
    g = onnx::load(c.model.onnx);
    // the loss reads the samples on the output's axis 0 (numerics §42): a graph that leaves them
    // elsewhere ([T, N, V], sequence-first) is stopped here, before any shape could match by chance
    const onnx::SampleAnalysis a = g->samples_of_batches(ds.sample_shape());
    if (a.mode != onnx::SampleAnalysis::Mode::mixes_samples && !a.output_on_axis0)
      throw Error("the training loss reads the samples on axis 0 of the graph's first output, one each, but its " + a.output +
                  " (numerics.md §42); put the samples back on axis 0 in the model, as a batch-first output");
    shape = g->output_shape(shape);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  model->add(g);
  const std::int64_t outputs = shape.ndim() >= 2 ? shape.numel() / shape[0] : 0;
  if (ds.num_classes() > 0 && ds.target_shape().ndim() == 1) {
    const std::int64_t T = ds.target_shape()[0];
    if (c.train.loss != LossKind::cross_entropy || shape.ndim() != 3 || shape[1] != T || shape[2] != ds.num_classes())
      throw Error(where + ": the model gives " + shape.str() + " per batch; the dataset's windows of " + std::to_string(T) +
                  " tokens need [N, " + std::to_string(T) + ", " + std::to_string(ds.num_classes()) + "] and loss = \"cross_entropy\"");
    check_class_weights(c, ds.num_classes());
  } else if (ds.num_classes() > 0) {
    if (c.train.loss != LossKind::cross_entropy || shape.ndim() != 2 || outputs != ds.num_classes())
      throw Error(where + ": the model gives " + shape.str() + " per batch; the dataset's " + std::to_string(ds.num_classes()) +
                  " classes need [N, " + std::to_string(ds.num_classes()) + "] and loss = \"cross_entropy\"");
    check_class_weights(c, ds.num_classes());
  } else if (c.train.loss == LossKind::cross_entropy || outputs != ds.target_shape().numel()) {
    throw Error(where + ": the model gives " + shape.str() + " per batch; the dataset's targets need " +
                std::to_string(ds.target_shape().numel()) + " values per sample and a loss for real-valued targets "
                "(mse, l1, smooth_l1, huber or bce_with_logits)");
  }
  model->set_recompute(c.model.recompute);
  std::uint64_t site = 0;
  model->number_sites(site);
  return model;
}

std::shared_ptr<nn::Sequential> build_model(const Config& c, const data::Dataset& ds) {
  if (!c.model.onnx.empty()) return build_onnx_model(c, ds);
  auto model = std::make_shared<nn::Sequential>();
  Shape shape{1};
  for (std::int64_t d : ds.sample_shape()) shape.push_back(d);
  std::uint64_t dropout_id = 0;
  nn::TokenEmbedding* embed = nullptr;  // the last one, for a tied head
  double param_bytes = 0;  // so far, counted before a layer allocates its own
  for (std::size_t i = 0; i < c.model.layers.size(); ++i) {
    const LayerSpec& l = c.model.layers[i];
    const std::string where = "model.layers[" + std::to_string(i) + "] (" + to_string(l.type) + ")";
    std::shared_ptr<nn::Module> m;
    double count = 0;
    if (shape.ndim() >= 2) {
      const double last = static_cast<double>(shape[shape.ndim() - 1]);
      if (l.type == LayerKind::linear) count = last * static_cast<double>(l.out) + (l.bias ? static_cast<double>(l.out) : 0.0);
      if (l.type == LayerKind::conv2d && shape.ndim() == 4)
        count = static_cast<double>(shape[1]) * static_cast<double>(l.out) * static_cast<double>(l.kernel) * static_cast<double>(l.kernel) +
                (l.bias ? static_cast<double>(l.out) : 0.0);
      if (l.type == LayerKind::conv || l.type == LayerKind::conv1d || l.type == LayerKind::conv_transpose2d) {
        // weight [out, C / groups, k...] (transposed: [C, out / groups, k...]), and a bias of out
        const bool one_d = l.type == LayerKind::conv1d || (l.type == LayerKind::conv && shape.ndim() == 3);
        const double k = static_cast<double>(l.kernel), taps = one_d ? k : k * k;
        count = static_cast<double>(shape[1]) * static_cast<double>(l.out) / static_cast<double>(l.groups > 0 ? l.groups : 1) * taps +
                (l.bias ? static_cast<double>(l.out) : 0.0);
      }
      if (l.type == LayerKind::layernorm) count = 2 * last;
      if (l.type == LayerKind::batchnorm) count = 2 * static_cast<double>(shape[1]);
      if (l.type == LayerKind::embedding) count = static_cast<double>(ds.num_classes() + shape[1]) * static_cast<double>(l.out);
      if (l.type == LayerKind::transformer_block) count = 12 * last * last + 13 * last;
      if (l.type == LayerKind::rmsnorm) count = last;
      if (l.type == LayerKind::groupnorm || l.type == LayerKind::instancenorm) count = 2 * static_cast<double>(shape[1]);
      if (l.type == LayerKind::rnn || l.type == LayerKind::lstm || l.type == LayerKind::gru) {
        const double G = l.type == LayerKind::lstm ? 4 : l.type == LayerKind::gru ? 3 : 1, H = static_cast<double>(l.out);
        count = G * H * (last + H + 2) + static_cast<double>(l.num_layers - 1) * G * H * (2 * H + 2);
      }
      if (l.type == LayerKind::resblock && shape.ndim() == 4) {  // two 3x3 convolutions, two batch norms, the downsample's
        const double C = static_cast<double>(shape[1]), O = static_cast<double>(l.out);
        count = 9 * C * O + 9 * O * O + 4 * O + (l.stride != 1 || shape[1] != l.out ? C * O + 2 * O : 0.0);
      }
      if (l.type == LayerKind::linear && l.out == 0) count = last * static_cast<double>(ds.num_classes());
    }
    param_bytes += count * 4;
    // a parameter, its gradient, an accumulator and two optimizer slots
    if (count > 0) require_memory(5 * param_bytes, c.file + ":" + std::to_string(l.line) + ": " + where + ": the model up to this layer",
                                  std::to_string(static_cast<long long>(count)) + " parameters in this layer");
    try {
      switch (l.type) {
        case LayerKind::linear:
          if (shape.ndim() < 2) fail_in_config(c.file, l.line, where + ": no input");
          if (shape.ndim() > 3)
            fail_in_config(c.file, l.line, where + " expects inputs [N, features] or sequences [N, T, features], the layer before gives " + shape.str() +
                                        "; add a flatten layer");
          // out = 0: the vocabulary (the output layer of a gpt)
          m = std::make_shared<nn::Linear>(shape[shape.ndim() - 1], l.out > 0 ? l.out : ds.num_classes(), l.bias);
          break;
        case LayerKind::conv2d:
          if (shape.ndim() != 4) fail_in_config(c.file, l.line, where + " expects images [N, C, H, W], the layer before gives " + shape.str());
          m = std::make_shared<nn::Conv2d>(shape[1], l.out, l.kernel, l.stride, l.padding, l.bias);
          break;
        case LayerKind::flatten: m = std::make_shared<nn::Flatten>(); break;
        case LayerKind::relu: m = std::make_shared<nn::ActivationLayer>(nn::Activation::relu); break;
        case LayerKind::gelu: m = std::make_shared<nn::ActivationLayer>(nn::Activation::gelu); break;
        case LayerKind::tanh: m = std::make_shared<nn::ActivationLayer>(nn::Activation::tanh); break;
        case LayerKind::sigmoid: m = std::make_shared<nn::ActivationLayer>(nn::Activation::sigmoid); break;
        case LayerKind::dropout: m = std::make_shared<nn::Dropout>(l.p, dropout_id++); break;
        case LayerKind::maxpool2d:
        case LayerKind::avgpool2d:
          if (l.padding > 0 || l.dilation != 1 || l.ceil_mode || !l.count_include_pad) {  // PyTorch's options (numerics.md §35)
            if (shape.ndim() != 4) fail_in_config(c.file, l.line, where + " expects images [N, C, H, W], the layer before gives " + shape.str());
            PoolOptions o;
            o.kernel.assign(2, l.kernel);
            o.stride.assign(2, l.stride);
            o.pads.assign(4, l.padding);
            o.dilation.assign(2, l.dilation);
            o.ceil_mode = l.ceil_mode;
            o.count_include_pad = l.count_include_pad;
            m = std::make_shared<nn::Pool>(l.type == LayerKind::maxpool2d, o);
            break;
          }
          m = std::make_shared<nn::Pool2d>(l.type == LayerKind::maxpool2d, l.kernel, l.stride);
          break;
        case LayerKind::layernorm: m = std::make_shared<nn::LayerNorm>(shape[shape.ndim() - 1], l.eps, l.bias); break;
        case LayerKind::batchnorm:
          if (shape.ndim() < 2 || shape.ndim() > 4)
            fail_in_config(c.file, l.line, where + " expects [N, C], [N, C, L] (BatchNorm1d) or images [N, C, H, W] (BatchNorm2d), the layer before gives " +
                                        shape.str());
          m = std::make_shared<nn::BatchNorm>(shape.ndim() == 4 ? 2 : 1, shape[1], l.eps, l.momentum, l.bias);
          break;
        case LayerKind::embedding: {
          if (shape.ndim() != 2 || ds.num_classes() <= 0 || ds.target_shape().ndim() != 1)
            fail_in_config(c.file, l.line, where + " expects token windows [N, T] of a text dataset, the layer before gives " + shape.str());
          auto e = std::make_shared<nn::TokenEmbedding>(ds.num_classes(), shape[1], l.out, l.p, dropout_id++);
          embed = e.get();
          m = e;
          break;
        }
        case LayerKind::transformer_block: {
          if (shape.ndim() != 3) fail_in_config(c.file, l.line, where + " expects sequences [N, T, D], the layer before gives " + shape.str());
          if (shape[2] % l.n_head != 0)
            fail_in_config(c.file, l.line, where + ": n_embd " + std::to_string(shape[2]) + " is not divisible by n_head " + std::to_string(l.n_head));
          std::int64_t blocks = 0;
          for (const LayerSpec& b : c.model.layers) blocks += b.type == LayerKind::transformer_block;
          m = std::make_shared<nn::TransformerBlock>(shape[2], l.n_head, l.p, l.bias, blocks, dropout_id);
          dropout_id += nn::TransformerBlock::kDropouts;
          break;
        }
        case LayerKind::conv:
        case LayerKind::conv1d:
        case LayerKind::conv_transpose2d: {
          const bool one_d = l.type == LayerKind::conv1d || (l.type == LayerKind::conv && shape.ndim() == 3);
          if (shape.ndim() != (one_d ? 3 : 4))
            fail_in_config(c.file, l.line, where + " expects " + (one_d ? "sequences [N, C, L]" : "images [N, C, H, W]") + ", the layer before gives " + shape.str());
          const std::size_t sp = one_d ? 1 : 2;
          ConvOptions o;
          o.stride.assign(sp, l.stride);
          o.pads.assign(2 * sp, l.padding);
          if (!l.pads.empty()) {  // asymmetric: ONNX's [begin..., end...]
            if (l.pads.size() != 2 * sp)
              fail_in_config(c.file, l.line, where + ": pads needs " + std::to_string(2 * sp) + " entries ([begin..., end...]) for inputs " + shape.str() + ", got " +
                                          std::to_string(l.pads.size()));
            o.pads = l.pads;
          }
          o.dilation.assign(sp, l.dilation);
          o.groups = l.groups;
          if (l.type == LayerKind::conv_transpose2d) o.output_padding.assign(sp, l.output_padding);
          m = std::make_shared<nn::Conv>(shape[1], l.out, std::vector<int>(sp, l.kernel), o, l.bias, l.type == LayerKind::conv_transpose2d);
          break;
        }
        case LayerKind::adaptive_avgpool2d: m = std::make_shared<nn::AdaptivePool2d>(false, l.size, l.size); break;
        case LayerKind::global_avgpool: m = std::make_shared<nn::AdaptivePool2d>(false, 1, 1); break;
        case LayerKind::upsample:
          m = l.size > 0 ? std::make_shared<nn::Upsample>(l.size, l.size, 0.0, 0.0, l.bilinear, l.align_corners)
                         : std::make_shared<nn::Upsample>(0, 0, l.scale, l.scale, l.bilinear, l.align_corners);
          break;
        case LayerKind::resblock:  // torchvision's BasicBlock
          if (shape.ndim() != 4) fail_in_config(c.file, l.line, where + " expects images [N, C, H, W], the layer before gives " + shape.str());
          m = std::make_shared<nn::BasicBlock>(shape[1], l.out, l.stride, l.eps, l.momentum);
          break;
        case LayerKind::tied_head:
          if (!embed) fail_in_config(c.file, l.line, where + " ties the output to an embedding; put an embedding layer before it");
          m = std::make_shared<nn::TiedHead>(embed->wte);
          break;
        case LayerKind::rmsnorm:
          if (shape.ndim() < 2) fail_in_config(c.file, l.line, where + ": no input");
          m = std::make_shared<nn::RMSNorm>(std::vector<std::int64_t>{shape[shape.ndim() - 1]}, l.eps, l.affine);
          break;
        case LayerKind::groupnorm:
        case LayerKind::instancenorm:
          if (shape.ndim() < (l.type == LayerKind::instancenorm ? 3 : 2))
            fail_in_config(c.file, l.line, where + " expects inputs [N, C, ...], the layer before gives " + shape.str());
          m = std::make_shared<nn::GroupNorm>(l.groups, shape[1], l.eps, l.affine, l.type == LayerKind::instancenorm);
          break;
        case LayerKind::rnn:
        case LayerKind::lstm:
        case LayerKind::gru: {
          if (shape.ndim() != 3)
            fail_in_config(c.file, l.line, where + " expects sequences [N, T, features] (e.g. after an embedding), the layer before gives " + shape.str());
          const RnnMode mode = l.type == LayerKind::lstm ? RnnMode::lstm : l.type == LayerKind::gru ? RnnMode::gru
                               : l.relu                  ? RnnMode::rnn_relu
                                                         : RnnMode::rnn_tanh;
          m = std::make_shared<nn::Recurrent>(mode, shape[2], l.out, l.num_layers, l.bias, true, l.last_only);
          break;
        }
      }
      shape = m->output_shape(shape);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind(c.file + ":", 0) == 0) throw;
      fail_in_config(c.file, l.line, where + ": " + msg);
    }
    model->add(m);
  }
  const std::int64_t outputs = shape.ndim() >= 2 ? shape.numel() / shape[0] : 0;
  if (ds.num_classes() > 0 && ds.target_shape().ndim() == 1) {  // sequences: a label per position
    const std::int64_t T = ds.target_shape()[0];
    if (c.train.loss != LossKind::cross_entropy)
      fail_in_config(c.file, c.model.layers.back().line, "the dataset has token labels; use loss = \"cross_entropy\" in [train]");
    check_class_weights(c, ds.num_classes());
    if (shape.ndim() != 3 || shape[1] != T || shape[2] != ds.num_classes())
      fail_in_config(c.file, c.model.layers.back().line, "the model gives " + shape.str() + " per batch but the dataset has windows of " + std::to_string(T) +
                                                " tokens of a vocabulary of " + std::to_string(ds.num_classes()) + ": the last layer must give [N, " +
                                                std::to_string(T) + ", " + std::to_string(ds.num_classes()) + "]");
  } else if (ds.num_classes() > 0) {
    if (c.train.loss != LossKind::cross_entropy)
      fail_in_config(c.file, c.model.layers.back().line, "the dataset has class labels; use loss = \"cross_entropy\" in [train]");
    check_class_weights(c, ds.num_classes());
    if (shape.ndim() != 2 || outputs != ds.num_classes())
      fail_in_config(c.file, c.model.layers.back().line, "the model gives " + shape.str() + " per batch but the dataset has " +
                                                std::to_string(ds.num_classes()) + " classes: the last layer must give [N, " +
                                                std::to_string(ds.num_classes()) + "]");
  } else {
    if (c.train.loss == LossKind::cross_entropy)
      fail_in_config(c.file, c.model.layers.back().line,
              "the dataset has real-valued targets; use loss = \"mse\", \"l1\", \"smooth_l1\", \"huber\" or \"bce_with_logits\" in [train]");
    if (outputs != ds.target_shape().numel())
      fail_in_config(c.file, c.model.layers.back().line, "the model gives " + std::to_string(outputs) + " values per sample but the targets have " +
                                                std::to_string(ds.target_shape().numel()));
  }
  nn::initialize(*model, c.model.init, c.seed);
  model->set_recompute(c.model.recompute);
  std::uint64_t site = 0;  // the stochastic-rounding keys' tensor numbers
  model->number_sites(site);
  return model;
}

}  // namespace bitgrad::train
