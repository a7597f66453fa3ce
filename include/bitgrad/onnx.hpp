// ONNX import and export (docs/onnx.md "Bring your PyTorch model"). onnx::load reads a
// model file (opsets 13-17 of the default domain) into a GraphModule: an nn::Module whose forward
// runs the graph's nodes with bitgrad's ops in topological order, whose parameters are the
// graph's float initializers under their names (in the graph's initializer order; PyTorch's
// exporter names them after its state_dict keys) and whose buffers are BatchNormalization's
// running statistics (with PyTorch's num_batches_tracked beside them). Subgraphs on constants
// (Shape/Gather/Concat/Unsqueeze/Reshape chains, Constant nodes) are folded at load. An op,
// attribute, input or dtype bitgrad lacks is one error naming the op type, the node's name and
// what is missing, raised by load before anything runs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bitgrad/nn.hpp"

namespace bitgrad::onnx {

struct LoadOptions {
  // true: Dropout and BatchNormalization follow nn::Context::training (dropout keyed like
  // nn::Dropout; batch statistics, running statistics updated with PyTorch's momentum rule);
  // false: always evaluation semantics (no dropout, the running statistics), whatever the context.
  bool training = true;
  // The storage the import may hold at once (its initializers, the constants folded at load and
  // the load-time forward at the declared input shape), checked before each allocation: past it,
  // load raises naming the step (0: the memory the system has available).
  double memory_bytes = 0;
};

struct GraphInfo;  // the compiled graph (src/onnx/graph_impl.hpp)

// Where a graph's samples go (numerics.md §42, docs/contract.md): the input's axis 0 followed
// through every node of a forward at a probe shape. batch_rule: every node that sees samples has
// them on axis 0, one each, and its gradients sum them by the batch rule, so micro-batches of
// whole 32-sample blocks and ranks give the whole batch's bits, as for a layer list. per_block:
// the samples stay apart but some node holds them elsewhere (torch's sequence-first attention) or
// sums its gradient otherwise (an embedding's Gather): training runs every 32-sample block as its
// own forward and backward, combined by the batch's tree, which keeps T5 and T6. mixes_samples:
// a node combines samples (a reduction, softmax, slice or recurrence along them): micro-batches
// and ranks are refused.
struct SampleAnalysis {
  enum class Mode { batch_rule, per_block, mixes_samples };
  Mode mode = Mode::batch_rule;
  std::string node;                // the first node that decided the mode ("node 'NAME' (OpType)"); empty for batch_rule
  std::string why;                 // what that node does with the samples
  bool batch_statistics = false;   // BatchNormalization with training semantics over the samples (numerics §31)
  bool output_on_axis0 = false;    // the first output holds the samples on axis 0, one each (what a training loss reads)
  std::string output;              // when an output does not: which and where its samples are
  static std::string mode_name(Mode m);
};

class GraphModule : public nn::Module {
 public:
  explicit GraphModule(std::shared_ptr<GraphInfo> g);
  // x: the graph's one non-initializer input (f32/f64 for float inputs, i64 or integral floats for
  // int64 token inputs); returns its first output.
  Tensor forward(const Tensor& x, const nn::Context& ctx) override;
  void init(nn::Init weights, std::uint64_t seed, std::uint64_t& index) override;  // none: the file's weights are the model
  // every input in the graph's order, every output
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const nn::Context& ctx);
  // the first output's shape for an input shape: an evaluation forward of zeros, once per shape
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;

  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  // declared input dimensions (-1 where symbolic), ONNX element type names ("float", "int64")
  std::vector<std::int64_t> input_dims(std::size_t i) const;
  std::string input_type(std::size_t i) const;
  std::size_t node_count() const;    // nodes run per forward
  std::size_t folded_count() const;  // nodes folded to constants at load
  std::int64_t opset() const;
  // Whether a node of this op type runs per forward (not folded at load): the session treats a
  // graph running BatchNormalization in training mode as a batchnorm model (numerics §20, §31).
  bool runs_op(const std::string& op_type) const;
  bool training_semantics() const;  // LoadOptions::training
  // a training-mode BatchNormalization runs per forward (the session treats it as a batch norm)
  bool uses_batch_statistics() const override { return training_semantics() && runs_op("BatchNormalization"); }
  // Where the samples of an input of `input` shape (axis 0, at least 2 samples) go (an evaluation
  // forward of zeros at that shape: no statistics move, nothing is drawn).
  SampleAnalysis samples(const Shape& input) const;
  // The same for a batch of samples of shape `sample` (no batch axis), probed at the declared
  // batch when the file fixes one above 1, else at 3 samples: what training checks before its
  // first step.
  SampleAnalysis samples_of_batches(const Shape& sample) const;
  // Whether a forward of this input shape that trains or takes gradients runs each 32-sample
  // block apart (ops::per_block): the graph is per_block without batch statistics (§42).
  bool runs_per_block(const Shape& input) const;
  // The same at the shape of the latest forward's input (3 samples of it), else at the declared
  // input shape (3 samples where the batch is free); an error when neither fixes every dimension.
  SampleAnalysis samples() const;
  // The model as an ONNX file with the current parameters and buffers as its initializers (the
  // rest of the graph as it was read): bitgrad export --onnx.
  std::string to_onnx_bytes() const;

 private:
  std::shared_ptr<GraphInfo> g_;
  std::vector<Tensor> params_, buffers_;  // in initializer order (what the graph reads)
  mutable std::mutex seen_mutex_;
  std::vector<std::int64_t> seen_;  // the latest forward's input shape (samples())
  mutable std::vector<std::pair<std::vector<std::int64_t>, SampleAnalysis>> analyses_;  // by probe shape, the latest few
};

std::shared_ptr<GraphModule> load(const std::string& path, const LoadOptions& options = LoadOptions());
std::shared_ptr<GraphModule> load_bytes(const std::string& bytes, const std::string& name, const LoadOptions& options = LoadOptions());
// Whether the file's graph has a node of this op type (the session refuses BatchNormalization's
// batch statistics with micro-batches or ranks, as for a batchnorm layer).
bool uses_op(const std::string& path, const std::string& op_type);
// The ONNX op types the importer runs (sorted).
std::vector<std::string> op_types();
// Parses a file's bytes only (the fuzz target): the protobuf reader and the importer's checks,
// nothing run.
void check_bytes(const std::string& bytes, const std::string& name);

}  // namespace bitgrad::onnx
