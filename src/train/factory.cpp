// The datasets and the model a configuration describes.
#include "bitgrad/layers.hpp"
#include "bitgrad/nn_spatial.hpp"
#include "bitgrad/onnx.hpp"
#include "bitgrad/train.hpp"
#include "io/format.hpp"
#include "train/layer_table.hpp"
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

namespace {
// `specs` added to `model` in order from inputs of `shape` (which becomes the output's), each
// layer's parameters counted against the memory available before it allocates them. Errors name
// the file, the layer's line and the layer.
void add_layers(nn::Sequential& model, const std::vector<LayerSpec>& specs, Shape& shape, layers::Env& env) {
  double param_bytes = 0;  // so far, counted before a layer allocates its own
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& l = specs[i];
    env.line = l.line;
    env.where = "model.layers[" + std::to_string(i) + "] (" + to_string(l.type) + ")";
    std::shared_ptr<nn::Module> m;
    try {
      layers::with_entry(l.type, [&](auto entry) {
        using E = decltype(entry);
        const double count = E::params(l, shape, env);
        param_bytes += count * 4;
        // a parameter, its gradient, an accumulator and two optimizer slots
        if (count > 0)
          require_memory(5 * param_bytes, env.file + ":" + std::to_string(l.line) + ": " + env.where + ": the model up to this layer",
                         std::to_string(static_cast<long long>(count)) + " parameters in this layer");
        m = E::build(l, shape, env);
      });
      shape = m->output_shape(shape);
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind(env.file + ":", 0) == 0) throw;
      fail_in_config(env.file, l.line, env.where + ": " + msg);
    }
    model.add(m);
  }
}
}  // namespace

std::shared_ptr<nn::Sequential> build_layers(const std::vector<LayerSpec>& specs, const Shape& input, std::int64_t vocabulary, const std::string& file) {
  auto model = std::make_shared<nn::Sequential>();
  layers::Env env;
  env.file = file;
  env.classes = vocabulary;
  env.token_windows = vocabulary > 0;
  env.all = &specs;
  Shape shape = input;
  add_layers(*model, specs, shape, env);
  return model;
}

std::vector<LayerKindInfo> layer_kinds() {
  std::vector<LayerKindInfo> out;
  layers::for_each_entry([&out](auto entry, LayerKind k) {
    const layers::Example& ex = decltype(entry)::example;
    LayerKindInfo i;
    i.name = to_string(k);
    i.python = ex.python;
    i.options = ex.options;
    i.before = ex.before;
    i.input = layers::example_input(ex.input).vec();
    i.vocabulary = ex.input == layers::Input::tokens ? layers::kExampleVocabulary : 0;
    out.push_back(std::move(i));
  });
  return out;
}

std::shared_ptr<nn::Sequential> build_model(const Config& c, const data::Dataset& ds) {
  if (!c.model.onnx.empty()) return build_onnx_model(c, ds);
  auto model = std::make_shared<nn::Sequential>();
  Shape shape{1};
  for (std::int64_t d : ds.sample_shape()) shape.push_back(d);
  layers::Env env;
  env.file = c.file;
  env.classes = ds.num_classes();
  env.token_windows = ds.num_classes() > 0 && ds.target_shape().ndim() == 1;
  env.all = &c.model.layers;
  add_layers(*model, c.model.layers, shape, env);
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
