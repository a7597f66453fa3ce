// Datasets, the sampler and the data loader. A batch is a pure function of (dataset, seed,
// epoch, batch index): the epoch order is bitgrad's own Fisher-Yates on the Philox stream
// (seed, "shuffle").sub(epoch), augmentations draw from (seed, "augment").sub(epoch) by sample
// id, and loader workers only decide who builds a batch, never what is in it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/tensor.hpp"

namespace bitgrad::data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  virtual Shape sample_shape() const = 0;                 // one sample, no batch dimension
  virtual std::int64_t num_classes() const { return 0; }  // > 0: i64 class labels
  // One sample's targets: f32 values when num_classes() == 0, else its i64 labels (Shape{}: one
  // label; a text window: one per position)
  virtual Shape target_shape() const { return Shape{}; }
  // Writes sample i: sample_shape().numel() floats to x and either *label or the target to y.
  virtual void get(std::int64_t i, float* x, std::int64_t* label, float* y) const = 0;
  virtual std::string describe() const = 0;
};

// Fashion-MNIST from the gzipped IDX files of Debian's dataset-fashion-mnist
// (/usr/share/datasets/fashion-mnist). Pixels become p / 255 (f32), and with `normalize`
// (v - 0.2860) / 0.3530. Samples are [1, 28, 28]; 10 classes.
std::shared_ptr<Dataset> fashion_mnist(const std::string& dir, bool train, bool normalize = true);
inline const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Numbers separated by commas, one sample per line; `label_column` >= 0 makes a classification
// dataset with that column as the class (an integer in [0, classes)), otherwise the last
// `targets` columns are f32 regression targets. A header line is skipped when `header`.
// A value that is not a finite f32 (nan, inf, beyond 3.4e38) is refused, naming its line,
// unless `allow_nonfinite`.
std::shared_ptr<Dataset> csv_dataset(const std::string& path, bool header, int label_column, int targets = 1, bool allow_nonfinite = false);

// The "adder" regression: sample i has `features` values uniform in [0, 1) from
// (seed, "adder").sub(first + i); the target is their sum, added left to right in f32.
std::shared_ptr<Dataset> adder_dataset(std::int64_t n, int features, std::uint64_t seed, std::int64_t first = 0);

// Synthetic data of any shape (tests, the contract fuzzer): sample i's values are normal(0, 1)
// from (seed, "synthetic").sub(first + i); with classes > 0 its label is
// (seed, "synthetic-label").sub(first + i).below(0, classes), otherwise `targets` f32 targets
// uniform in [0, 1) from the same label stream.
std::shared_ptr<Dataset> synthetic_dataset(std::int64_t n, const Shape& sample, std::int64_t classes, std::int64_t targets,
                                           std::uint64_t seed, std::int64_t first = 0);

// ---- text ------------------------------------------------------------------------------------
// A text corpus: one UTF-8 file, or every regular file of a directory (not symlinks, not hidden,
// not `*.dat` — the fortune indexes; subdirectories are not entered) in byte order of their
// names, concatenated. The vocabulary is the sorted set of the corpus's characters (Unicode code
// points), or of its bytes with `bytes`; token = index in it. Tokens [0, train_tokens) are the
// training part, the last floor(n * val_fraction) tokens the validation part.
struct TextCorpus {
  std::string path;
  bool bytes = false;
  std::vector<std::string> files;      // in the order read
  std::vector<std::uint32_t> symbols;  // sorted code points (or bytes)
  std::vector<std::int32_t> tokens;
  std::int64_t train_tokens = 0;
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(symbols.size()); }
  // Throws naming the first character that is not in the vocabulary (or text that is not UTF-8).
  std::vector<std::int64_t> encode(const std::string& text, const std::string& what) const;
  std::string decode(const std::vector<std::int64_t>& tokens) const;
};
// The files a corpus path names (the rule above); throws when it names nothing readable.
std::vector<std::string> text_files(const std::string& path);
std::shared_ptr<const TextCorpus> load_text(const std::string& path, bool bytes, double val_fraction);
// A corpus's vocabulary as JSON, {"corpus": path, "bytes": bool, "symbols": [code points]}: a
// text run keeps it (vocabulary.json) so that inference encodes and decodes without the corpus.
std::string vocabulary_json(const TextCorpus& c);
// The corpus of such a vocabulary, without tokens (encode and decode only); throws naming `file`
// on text that is not one (symbols out of order, repeated, or not code points).
std::shared_ptr<const TextCorpus> vocabulary_from_json(const std::string& text, const std::string& file);
inline const char* kFortunesDir = "/usr/share/games/fortunes";

// Windows of block + 1 tokens: x = tokens [p, p + block) as f32, labels i64 [block] = tokens
// [p + 1, p + block + 1). Training: one sample per start p in [0, train_tokens - block), drawn
// by the sampler. Validation: the fixed windows p = v + i block (v = the validation part's first
// token) for i < min(max_windows, (n_val - 1) / block).
std::shared_ptr<Dataset> text_windows(std::shared_ptr<const TextCorpus> corpus, std::int64_t block, bool train,
                                      std::int64_t max_windows = 0);

struct Augment {
  int crop_padding = 0;  // random crop of the zero-padded image back to its size
  bool hflip = false;    // horizontal flip with probability 1/2
  bool active() const { return crop_padding > 0 || hflip; }
};

struct LoaderOptions {
  std::int64_t batch_size = 64;
  bool shuffle = true;
  bool drop_last = true;  // drop a last partial batch
  int workers = 0;        // 0: batches are built on the calling thread
  int prefetch = 4;       // batches built ahead per worker
  std::uint64_t seed = 0;
  Augment augment;
  // Data parallel: this process builds only rank `rank`'s shard of every batch — of the batch's
  // leaves of `leaf_rows` samples (the last one may be short), leaves
  // [rank n / world, (rank + 1) n / world) (dist/plan.hpp).
  int world = 1, rank = 0;
  std::int64_t leaf_rows = 32;
  // When set: this rank's rows [first, last) of a batch of `rows` samples, instead of the even
  // split above (a batch-norm model's layout, one node of the tree per rank: dist::Sharding).
  std::function<std::pair<std::int64_t, std::int64_t>(std::int64_t rows)> shard_of;
};

struct Batch {
  Tensor x;  // [B, sample...] f32 (data parallel: this rank's rows only)
  Tensor y;  // [B, target...]: i64 labels, or f32 targets
  std::int64_t epoch = 0, index = 0;  // position: batch `index` of epoch `epoch`
  std::int64_t rows = 0;   // samples in the whole batch (all ranks)
  std::int64_t first = 0;  // the batch row x's first row is
};

// Rows [first, last) of rank `rank`'s shard of a batch of `rows` samples (LoaderOptions).
std::pair<std::int64_t, std::int64_t> shard_rows(std::int64_t rows, std::int64_t leaf_rows, int world, int rank);

// The order of the samples in an epoch: (seed, "shuffle").sub(epoch).permutation(n), or 0..n-1.
std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch);

// Builds batch `index` of epoch `epoch` (a pure function; used by the loader and the tests).
// With use_kernel_threads (the loader without workers, on the training thread) the samples are
// split over the kernel threads; each sample depends only on its id, so the batch is the same.
Batch make_batch(const Dataset& ds, const LoaderOptions& o, const std::vector<std::int64_t>& order, std::int64_t epoch,
                 std::int64_t index, bool use_kernel_threads = false);

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> ds, LoaderOptions o);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  std::int64_t batches_per_epoch() const;
  // The next batch in order; after the last batch of an epoch comes batch 0 of the next one.
  Batch next();
  // Continue from batch `index` of epoch `epoch` (resuming a run).
  void seek(std::int64_t epoch, std::int64_t index);
  std::int64_t epoch() const;  // of the batch next() returns next
  std::int64_t index() const;
  const Dataset& dataset() const { return *ds_; }
  const LoaderOptions& options() const { return o_; }

 private:
  struct State;
  std::shared_ptr<const Dataset> ds_;
  LoaderOptions o_;
  std::unique_ptr<State> st_;
};

}  // namespace bitgrad::data
