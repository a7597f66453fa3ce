// ONNX import and export (issue 31; docs/onnx.md "Bring your PyTorch model"). onnx::load reads a
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
#include <string>
#include <vector>

#include "bitgrad/nn.hpp"

namespace bitgrad::onnx {

struct LoadOptions {
  // true: Dropout and BatchNormalization follow nn::Context::training (dropout keyed like
  // nn::Dropout; batch statistics, running statistics updated with PyTorch's momentum rule);
  // false: always evaluation semantics (no dropout, the running statistics), whatever the context.
  bool training = true;
};

struct GraphInfo;  // the compiled graph (src/onnx/graph_impl.hpp)

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
  // The model as an ONNX file with the current parameters and buffers as its initializers (the
  // rest of the graph as it was read): bitgrad export --onnx.
  std::string to_onnx_bytes() const;

 private:
  std::shared_ptr<GraphInfo> g_;
  std::vector<Tensor> params_, buffers_;  // in initializer order (what the graph reads)
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
