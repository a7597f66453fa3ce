#include "train/memory.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "bitgrad/error.hpp"
#include "bitgrad/onnx.hpp"
#include "bitgrad/storage.hpp"
#include "io/format.hpp"

namespace bitgrad::train {

double available_memory_bytes() { return memory::available_bytes(); }

void require_memory(double bytes, const std::string& what, const std::string& detail) {
  const double have = available_memory_bytes(), gib = 1024.0 * 1024.0 * 1024.0;
  if (have > 0 && bytes > have)
    throw Error(io::strprintf("%s needs about %.3g GiB of memory (%s), more than the %.3g GiB available", what.c_str(), bytes / gib,
                              detail.c_str(), have / gib));
}

// An imported graph's forward at the batch of `in` (its storage held at once, the most of it):
// measured on a probe forward of 3 samples (or the batch the file fixes) under a memory::Budget,
// as the import measures its load-time forward, and scaled per sample. `in` becomes the output's
// shape at the batch.
static double graph_forward_bytes(const onnx::GraphModule& g, Shape& in) {
  const std::int64_t batch = in[0];
  const std::vector<std::int64_t> declared = g.input_dims(0);
  const std::int64_t probe = !declared.empty() && declared[0] > 0 ? declared[0] : std::min<std::int64_t>(batch, 3);
  std::vector<std::int64_t> dims = in.vec();
  dims[0] = probe;
  memory::Budget measure(std::numeric_limits<double>::infinity(), "train: the memory estimate of " + g.describe());
  std::vector<std::int64_t> out = g.output_shape(Shape(dims)).vec();
  if (!out.empty() && out[0] == probe) out[0] = batch;
  in = Shape(out);
  return measure.peak() / static_cast<double>(probe) * static_cast<double>(batch);
}

void check_run_memory(const Config& c, const data::Dataset& train, const data::Dataset* test, const nn::Sequential& model, int workers) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  // the epoch's sample order (int64), the next epoch's beside it
  const double order = 16.0 * static_cast<double>(train.size());
  // parameters, gradients, micro-batch accumulation and up to two optimizer slots, in the dtype
  double params = 0;
  for (const Tensor& p : model.parameters()) params += static_cast<double>(p.numel()) * static_cast<double>(dtype_size(p.dtype()));
  params *= 5;
  // each layer's output for a batch, kept for the backward pass and met by its gradient
  const std::int64_t batch = std::max(c.train.batch_size, c.eval.batch_size);
  Shape s = train.sample_shape();
  std::vector<std::int64_t> dims{batch};
  for (std::int64_t d : s.vec()) dims.push_back(d);
  Shape cur(dims);
  double acts = 3.0 * static_cast<double>(cur.numel()) * 4;
  for (const auto& [name, m] : model.children()) {
    if (const auto* g = dynamic_cast<const onnx::GraphModule*>(m.get())) {
      acts += 3.0 * graph_forward_bytes(*g, cur);
      continue;
    }
    cur = m->output_shape(cur);
    acts += 3.0 * static_cast<double>(cur.numel()) * 8;  // f32 or f64, a value, a saved copy and a gradient
  }
  // batches the loader holds ahead (inputs and targets, f32)
  const double ahead = static_cast<double>(2 * workers + 2) * static_cast<double>(c.train.batch_size) *
                       static_cast<double>(s.numel() + train.target_shape().numel() + 1) * 4;
  const double total = order + params + acts + ahead + (test ? 8.0 * static_cast<double>(test->size()) : 0.0);
  require_memory(total, "train: this run",
                 io::strprintf("sample order of %lld samples %.3g GiB, parameters with their gradients and optimizer state %.3g GiB, "
                               "activations of a batch %.3g GiB",
                               static_cast<long long>(train.size()), order / gib, params / gib, (acts + ahead) / gib));
}

}  // namespace bitgrad::train
