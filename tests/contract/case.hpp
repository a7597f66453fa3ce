// The contract fuzzer's training set-ups: a seeded generator of small random configurations
// (every layer type the configuration accepts, synthetic data of random shapes, batch sizes
// that are and are not multiples of 32, drop_last both ways, every optimizer, schedule and
// clipping), their TOML text, and the simplifications the shrinker tries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bitgrad::contract {

struct Layer {
  std::string type;  // linear conv2d flatten relu gelu tanh sigmoid dropout maxpool2d avgpool2d layernorm batchnorm, and
                     // the option-rich: conv conv1d conv_transpose2d adaptive_avgpool2d adaptive_maxpool2d global_avgpool upsample rmsnorm
                     // groupnorm instancenorm rnn lstm gru
  std::int64_t out = 0;  // rnn, lstm, gru: hidden
  int kernel = 0, stride = 1, padding = 0;
  double p = 0.0;
  bool bias = true;
  // the option-rich layers (the keys of docs/cli.md's layer table)
  int dilation = 1, output_padding = 0;
  std::int64_t groups = 1, num_layers = 1, size = 0;  // size: adaptive_avgpool2d / _maxpool2d, upsample (0: scale)
  double scale = 2.0;
  bool bilinear = false, align_corners = false, affine = true, relu = false, last = false;
  std::vector<int> pads = {};  // conv variants: asymmetric, ONNX's [begin..., end...] (empty: padding)
  bool ceil_mode = false, count_include_pad = true;  // pooling (with padding, and dilation for max)
};

struct Case {
  std::uint64_t seed = 0;
  std::vector<std::int64_t> shape;  // one sample
  std::int64_t classes = 0, targets = 1;
  std::int64_t samples = 0;
  std::vector<Layer> layers;
  std::int64_t batch = 32;
  bool drop_last = true, shuffle = true;
  std::string optimizer = "sgd";
  double lr = 0.01, momentum = 0, weight_decay = 0;
  bool nesterov = false;
  std::string schedule = "constant";
  std::int64_t warmup = 0;
  double clip = 0;
  std::string precision = "fp32";  // [train] precision (mixed precision: bf16, fp16)
  bool stochastic = false;         // [train] rounding = "stochastic"
  std::int64_t steps = 4;
  // the layers written as an ONNX graph (onnx_model_bytes) and trained as [model] onnx =
  // onnx_path (set by the driver where it wrote the file)
  bool onnx = false;
  std::string onnx_path;
  // a graph torch exported (tests/python/sample_axis_models.py, --torch DIR): its name
  // in the manifest; onnx_path is its file, and the data is what it takes (no layers)
  std::string torch;
  // [train] loss: "" for the default (cross_entropy with classes, else mse); the others:
  // losses and cross_entropy's options (numerics.md §30, §41)
  std::string loss;
  double label_smoothing = 0, beta = 1, delta = 1;
  std::vector<double> class_weights;
  std::int64_t ignore_index = -100;

  std::string toml() const;
  std::string loss_name() const;  // the [train] loss it trains with
  // The shape after each layer is valid (the generator and the shrinker keep only such cases).
  bool valid() const;
};

// the graphs of `sample_axis_models.py --export DIR` (DIR/manifest.txt: name, file,
// kind — tokens, sequence or vector — what the sample analysis finds, batch statistics, sequence
// length). With some loaded, one case in three trains one of them instead of its own layers.
struct TorchIdiom {
  std::string name, file, kind, mode;
  bool batch_statistics = false;
  std::int64_t seq = 0;
};
void load_torch_idioms(const std::string& dir);
const std::vector<TorchIdiom>& torch_idioms();
const TorchIdiom* torch_idiom(const Case& c);  // null for a case of its own layers
// Whether `bitgrad train` runs the case on several ranks (not when a torch graph mixes samples,
// numerics.md §42).
bool splits_over_ranks(const Case& c);

// The case's layers as an ONNX model (opset 17; onnx_case.cpp): Gemm, Conv, pools, activations
// (GELU as its erf formula), Dropout in training mode, LayerNormalization, BatchNormalization in
// training mode, initial weights drawn from (seed, "contract-onnx").
std::string onnx_model_bytes(const Case& c);
// Whether onnx_model_bytes can write every layer of the case (with its options and shapes).
bool onnx_writable(const Case& c);
// The shape after a layer (empty when the layer cannot take `in`).
std::vector<std::int64_t> shape_after(const Layer& l, const std::vector<std::int64_t>& in);
// Whether `bitgrad train` runs this case with micro-batches (accumulate > 1); the settings matrix
// leaves those pairs out where it does not. A batchnorm model is refused micro-batches
// (numerics.md §31) but runs on ranks with accumulate = 1, the statistics exchanged (§20).
bool splits_the_batch(const Case& c);

// The layer types and losses a case draws ("loss=l1", "loss=cross_entropy+label_smoothing", ...),
// for the census (contract_fuzz --census).
std::vector<std::string> features(const Case& c);

// Case number `index` of the stream `seed`: a pure function of both.
Case generate(std::uint64_t seed, std::uint64_t index);

// Simpler variants of c (fewer layers, steps, samples; plainer optimizer and schedule), the
// most aggressive first; each is valid.
std::vector<Case> simplifications(const Case& c);

}  // namespace bitgrad::contract
