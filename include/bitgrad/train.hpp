// Training: the typed configuration, datasets and model of a configuration file, and the step
// loop (loader -> forward -> backward -> gradient reducer -> optimizer) with evaluation,
// metrics, checkpoints and resume. docs/cli.md documents the configuration file.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bitgrad/data.hpp"
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/nn.hpp"
#include "bitgrad/optim.hpp"

namespace bitgrad::train {

// Every choice of the configuration file is parsed once into one of these; names() lists the
// spellings the file uses (errors quote them), to_string gives them back.
enum class DatasetKind { fashion_mnist, csv, adder, synthetic, text };
// l1, smooth_l1 (beta), huber (delta), bce_with_logits on real-valued targets
enum class LossKind { cross_entropy, mse, l1, smooth_l1, huber, bce_with_logits };
enum class OptimizerKind { sgd, adam, adamw };
// The kinds of [model] layers, one line each (X-macros): the enum and its TOML names come from
// here, and src/train/layer_table.hpp holds one entry per line (its options, schema, parameter
// count, build and Python class): a line without its entry does not compile. The TOML name is
// the identifier.
#define BITGRAD_LAYER_KINDS(X)                                                                                          \
  X(linear) X(conv2d) X(flatten) X(relu) X(gelu) X(tanh) X(sigmoid) X(dropout) X(maxpool2d) X(avgpool2d) X(layernorm) \
  X(embedding) X(transformer_block) X(tied_head) /* token models (text datasets) */                                    \
  X(batchnorm)                                   /* BatchNorm1d / 2d by the input's dimensions */                      \
  X(rmsnorm) X(groupnorm) X(instancenorm) X(rnn) X(lstm) X(gru) /* normalisation, recurrence */                        \
  X(conv) X(conv1d) X(conv_transpose2d) /* bitgrad/nn_spatial.hpp: Conv1d/2d with every option, by the input's rank */ \
  X(adaptive_avgpool2d) X(adaptive_maxpool2d) X(global_avgpool) X(upsample)                                            \
  X(resblock) /* torchvision's BasicBlock (nn::BasicBlock) */
enum class LayerKind {
#define BITGRAD_LAYER_ENUM(name) name,
  BITGRAD_LAYER_KINDS(BITGRAD_LAYER_ENUM)
#undef BITGRAD_LAYER_ENUM
};
const char* to_string(DatasetKind k);
const char* to_string(LossKind k);
const char* to_string(OptimizerKind k);
const char* to_string(LayerKind k);
const char* to_string(optim::Schedule::Kind k);

struct LayerSpec {
  LayerKind type = LayerKind::linear;
  std::int64_t out = 0;
  int kernel = 0, stride = 0, padding = 0;
  double p = 0.0, eps = 1e-5;
  double momentum = 0.1;  // batchnorm (its `affine` is `bias`)
  bool bias = true;
  std::int64_t n_head = 0;  // transformer_block
  // groupnorm's groups (and conv's); rmsnorm, groupnorm, instancenorm's affine; rnn, lstm, gru:
  // hidden size in `out`, num_layers, relu (rnn's nonlinearity), last_only (output = "last")
  std::int64_t groups = 1, num_layers = 1;
  bool affine = true, relu = false, last_only = false;
  // conv, conv1d, conv_transpose2d (dilation, output_padding); adaptive_avgpool2d
  // (size); upsample (scale or size, bilinear, align_corners)
  int dilation = 1, output_padding = 0;
  std::int64_t size = 0;
  double scale = 0.0;
  bool bilinear = false, align_corners = false;
  // conv's pads in ONNX's order [begin..., end...] (asymmetric; empty: `padding` on
  // every side); maxpool2d / avgpool2d with `padding`, `dilation` (max), ceil_mode, count_include_pad (avg)
  std::vector<int> pads;
  bool ceil_mode = false, count_include_pad = true;
  int line = 0;  // in the configuration file, for errors
};

// The configuration file's tables, one struct each (docs/cli.md documents the keys; the schema
// in src/train/config.cpp reads, checks, prints and hashes them).
struct DataConfig {  // [data]
  DatasetKind dataset = DatasetKind::fashion_mnist;
  std::string path;  // fashion-mnist directory, text corpus
  bool normalize = true;
  int crop_padding = 0;
  bool hflip = false;
  std::string train_csv, test_csv;
  bool csv_header = false;
  bool allow_nonfinite = false;  // csv: train on nan / inf values instead of refusing them
  int label_column = -1;
  int targets = 1;
  std::int64_t samples = 0, test_samples = 0;  // adder
  int features = 10;                           // adder
  std::vector<std::int64_t> shape{8};          // synthetic: one sample
  std::int64_t classes = 10;                   // synthetic: 0 for regression on `targets` values
  bool text_bytes = false;                     // text: byte-level vocabulary (else characters)
  double val_fraction = 0.1;                   // text: the corpus's last part, for validation
  std::int64_t block_size = 0;                 // text: tokens per window ([model] block_size for gpt)
};

struct ModelConfig {  // [model]
  std::vector<LayerSpec> layers;  // for type = "gpt", the layers it stands for
  nn::Init init = nn::Init::kaiming_uniform;
  nn::Recompute recompute = nn::Recompute::none;  // activation checkpointing (T9: not in the hash)
  // an ONNX file as the model (onnx = "..."; a relative path is resolved against the
  // configuration file's directory when it is read); empty: the layers
  std::string onnx;
  struct Gpt {
    bool on = false;
    std::int64_t n_layer = 4, n_head = 4, n_embd = 128;
    double dropout = 0.0;
    bool bias = true, tie_weights = false;
  } gpt;
};

struct TrainConfig {  // [train]
  std::int64_t batch_size = 128;
  std::int64_t epochs = 1;
  std::int64_t steps = 0;  // > 0: the planned length in steps instead of epochs
  std::int64_t accumulate = 1;
  LossKind loss = LossKind::cross_entropy;
  double clip_grad_norm = 0.0;
  bool shuffle = true;
  bool drop_last = true;
  std::int64_t log_every = 0;  // 0: about 10 lines an epoch
  // mixed precision (numerics.md §24-25): matmul operands and results in bf16 / fp16 values,
  // f32 master weights and optimizer state
  Precision precision = Precision::fp32;
  bool stochastic_rounding = false;          // rounding = "stochastic" (training's forward only)
  double loss_scale = 1;                     // 0: dynamic (fp16's default); else fixed, a power of two
  std::int64_t loss_scale_interval = 2000;   // dynamic: steps without overflow before the scale doubles
  // the loss's options (numerics.md §38); each in the hash only where it is not the
  // default, so every configuration written before them hashes as it did
  double label_smoothing = 0.0;        // cross_entropy
  std::vector<double> class_weights;   // cross_entropy: one per class, empty for none
  std::int64_t ignore_index = -100;    // cross_entropy: targets equal to it add nothing (PyTorch's default)
  double beta = 1.0;                   // smooth_l1
  double delta = 1.0;                  // huber
  int class_weights_line = 0;          // in the configuration file, for errors
};

struct OptimizerConfig {  // [optimizer]
  OptimizerKind type = OptimizerKind::sgd;
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  bool decay_matrices_only = false;  // weight decay on parameters of 2 or more dimensions only
};

struct ScheduleConfig {  // [schedule]
  optim::Schedule::Kind type = optim::Schedule::Kind::constant;
  double gamma = 0.1, min_lr = 0.0;
  std::int64_t step_size = 1000, warmup_steps = 0;
};

struct EvalConfig {  // [eval]
  std::int64_t batch_size = 1000;
  bool each_epoch = true;
  std::int64_t every = 0;    // also every N steps (0: never)
  std::int64_t windows = 0;  // text: validation windows evaluated (0: all)
};

struct RunConfig {  // [run] (not part of the hash: they cannot change a result)
  int threads = 0, workers = 0;
};

struct Config {
  std::string file;  // where it was read from (errors)
  std::uint64_t seed = 0;
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  EvalConfig eval;
  RunConfig run;

  // Files the configuration reads (hashed into manifests).
  std::vector<std::string> data_files() const;
};

// Reads and checks a configuration; errors are one line "FILE:LINE: what".
Config load_config(const std::string& path);
Config parse_config(const std::string& text, const std::string& name);
// The resolved configuration (every value, defaults included) as TOML.
std::string resolved_toml(const Config& c);
// XXH3-128 (hex) of the settings that define the training (everything but [run]).
std::string config_hash(const Config& c);

// Datasets, model and loss of a configuration.
std::shared_ptr<data::Dataset> train_dataset(const Config& c);
std::shared_ptr<data::Dataset> test_dataset(const Config& c);  // may be null
std::shared_ptr<nn::Sequential> build_model(const Config& c, const data::Dataset& ds);
// The corpus of a text configuration (its vocabulary encodes prompts and decodes samples).
std::shared_ptr<const data::TextCorpus> text_corpus(const Config& c);

struct RunOptions {
  int threads = 0;               // 0: config / BITGRAD_THREADS
  int workers = -1;              // -1: config
  std::int64_t steps = -1;       // stop after this many steps in total (-1: the plan)
  std::int64_t epochs = -1;      // stop after this many epochs in total
  std::optional<std::uint64_t> seed;
  std::int64_t accumulate = 0;   // 0: config
  std::string out;               // run directory ("" : runs/<config name>[-N])
  std::string resume;            // run directory to continue
  std::int64_t checkpoint_every = 0;  // also every N steps (0: epoch ends only)
  bool checkpoint_epochs = true;       // a checkpoint at each epoch's end
  int progress = -1;             // -1: a bar when stdout is a terminal, 0: log lines, 1: bar
  std::optional<std::uint64_t> perturb_order;  // evaluate every reduction in a seeded random order
  std::int64_t grad_stats_every = 0;  // per-parameter gradient statistics into the metrics
  // data parallel (launched by mpirun; docs/distributed.md)
  double dist_timeout = 0;                // seconds a rank waits for the others (0: BITGRAD_DIST_TIMEOUT or 300)
  std::int64_t replica_check_every = 100;  // compare the ranks' parameters every N steps (0: at start and end only)
};

struct RunResult {
  Digest128 fingerprint;  // final parameters and optimizer state
  std::int64_t steps = 0;
  double last_loss = 0;
  std::vector<double> test_accuracy;  // per evaluated epoch (classification)
  std::vector<double> test_loss;
  std::string out_dir;
};

// Where a run or study goes when no directory is named: runs/<prefix><the configuration file's
// name without .toml>, with -2, -3 ... until the name is free when `numbered` (a run; audit and
// sensitivity use the prefixes "audit-" and "sensitivity-" without numbers).
std::string default_run_dir(const std::string& config_path, const std::string& prefix, bool numbered);

// Trains to the stop point: the run directory (resolved configuration, metrics, checkpoints),
// progress output, evaluation at each epoch's end, resume. It runs in an execution context of
// its own (bitgrad/runtime.hpp: the configuration's thread count, else the caller's; the
// caller's code path), so the caller's context is untouched and runs on several threads of one
// process do not share a pool. Without instruments: `instruments::train` (bitgrad/instruments.hpp) adds the
// manifest, the traces and anomaly detection, as `bitgrad train` does.
RunResult run(Config cfg, const RunOptions& opt, std::ostream& out);

// A graceful stop (bitgrad installs it for SIGINT and SIGTERM): once requested, `run` stops
// after the step in progress, writes a checkpoint and throws Interrupted. The request is one
// flag for the process and stays until clear_stop_request(); request_stop is
// async-signal-safe.
void request_stop(int signal_number);
int stop_requested();  // the signal number asked with, 0: none
void clear_stop_request();
struct Interrupted : Error {
  Interrupted(const std::string& what, int signal_number) : Error(what), signal(signal_number) {}
  int signal;
};

// Data parallel: a rank that fails before run() reaches its start-up exchange (a configuration
// it cannot read) joins that exchange with its error, so every rank refuses alike (throws
// dist::CollectiveError, which rank 0 reports once). With one process: throws Error(error).
[[noreturn]] void fail_start(const std::string& error);

// A micro-batch of `rows` samples is a complete subtree of the batch rule's pairwise tree (a
// power-of-two number of whole 32-sample blocks): accumulating such micro-batches gives the
// bits of one batch (contract T5).
bool whole_subtree(std::int64_t rows);
// Whether the configuration's list has a batchnorm layer or a resblock (which holds two or three).
bool has_batch_norm(const Config& c);
// Whether `model` holds an nn::BatchNorm anywhere (nested blocks too): its training statistics
// are the whole batch's, so accumulate > 1 is refused and on several ranks each rank holds one
// node of the batch's tree with the statistics exchanged (numerics.md §20, §31).
bool has_batch_norm(const nn::Module& model);

}  // namespace bitgrad::train
