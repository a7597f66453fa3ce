// The compiled graph behind onnx::GraphModule: value slots, the nodes in run order with their
// op entries, the initializers as parameters, buffers and constants. The op table (node_ops.cpp)
// sees a node through Call: its attributes, its inputs, the forward's context.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bitgrad/onnx.hpp"
#include "onnx/proto.hpp"

namespace bitgrad::onnx {

// A value of the graph: a bitgrad tensor and the ONNX element type its values are. float ->
// f32, double -> f64, int64 and int32 -> i64, bool -> u8 (0, 1).
struct Value {
  Tensor t;
  int ty = kUndefined;
};

struct OpDef;

struct Node {
  const NodeProto* proto = nullptr;  // owned by GraphInfo::model
  const OpDef* def = nullptr;
  std::vector<int> in, out;  // value slots; -1: an absent optional input, or an output nobody reads
  std::map<std::string, const AttributeProto*> attrs;
  std::uint64_t dropout_id = 0;  // Dropout: its number among the graph's Dropout nodes (nn::Dropout's layer_id)
  Tensor batches_tracked;        // BatchNormalization: PyTorch's num_batches_tracked buffer, when named so
  bool read_by_matmul_only = false;  // every reader is a MatMul (none is a graph output)
  // a MatMul whose one reader is the Add run next, of a file's tensor (a bias, checked when
  // run): the Add computes both (matmul_add, one GEMM); fused_into is the Add's index in
  // GraphInfo::nodes, fused_from the MatMul's, fused_input which of the Add's inputs is the product
  int fused_into = -1, fused_from = -1, fused_input = 0;
  std::string label() const;     // node 'NAME' (OpType)
};

struct GraphInfo;

// One node being run: what an op entry reads and writes.
struct Call {
  const Node& node;
  const GraphInfo& g;
  bool training;  // training semantics for Dropout and BatchNormalization
  const nn::Context& ctx;
  std::vector<const Value*> ins;  // nullptr: absent
  std::vector<Value> out;

  bool has(std::size_t i) const { return i < ins.size() && ins[i] != nullptr; }
  const Value& v(std::size_t i) const;  // throws naming the input when absent
  const Tensor& x(std::size_t i) const { return v(i).t; }
  bool wants(std::size_t i) const { return i < node.out.size() && node.out[i] >= 0; }
  // attributes (the entry's declared names only; checked at load)
  bool has_attr(const char* name) const { return node.attrs.count(name) != 0; }
  std::int64_t i(const char* name, std::int64_t dflt) const;
  double f(const char* name, double dflt) const;
  std::string s(const char* name, const std::string& dflt) const;
  std::vector<std::int64_t> ints(const char* name) const;  // empty when absent
  // an integer input's values (shapes, axes, indices read on the host)
  std::vector<std::int64_t> int_values(std::size_t i) const;
  [[noreturn]] void fail(const std::string& what) const;
};

struct OpDef {
  const char* type;
  std::vector<const char*> attrs;  // every attribute the entry reads; any other is refused at load
  int min_in, max_in;
  // load-time check of attribute values, inputs asked for and outputs used ("" when fine, else
  // what is missing)
  std::string (*check)(const Node& n, const GraphInfo& g);
  void (*run)(Call& c);
  bool foldable;  // a pure function of its inputs (not Dropout, BatchNormalization)
};
const OpDef* find_op(const std::string& type);

struct Initializer {
  enum Kind { parameter, buffer, constant };
  std::string name;
  Kind kind = constant;
  int slot = -1;
  int ty = kUndefined;
  Tensor t;  // parameters and buffers: the module's own tensors (the optimizer updates them in place)
};

struct GraphInfo {
  ModelProto model;
  std::string file;
  std::int64_t opset = 0;
  LoadOptions options;
  std::vector<std::string> slot_names;
  std::vector<Value> constants;  // per slot: initializers, Constant nodes and folded nodes; else empty
  std::vector<Node> nodes;       // run order (folded nodes removed)
  std::vector<Initializer> inits;
  std::vector<int> input_slots, output_slots;
  std::vector<std::string> input_names, output_names;
  std::vector<const ValueInfoProto*> input_info;
  std::size_t folded = 0;
  std::string where() const { return "onnx: " + file; }
};

// Runs the graph's nodes in order on `inputs`; `observer`, when given, sees each node's call
// after it ran (its inputs and outputs), as the sample analysis follows them (samples.cpp).
using NodeObserver = std::function<void(const Call&)>;
std::vector<Tensor> run_graph(const GraphInfo& g, const std::vector<Tensor>& inputs, const nn::Context& ctx, const NodeObserver* observer = nullptr);
// Where the samples of an input of shape `input` (axis 0) go through the graph (numerics.md §42).
SampleAnalysis analyze_samples(const GraphInfo& g, const Shape& input);

// value helpers shared by the engine and the table
Value value_of(const TensorProto& t, const std::string& where);  // a TensorProto's data (checked)
TensorProto tensor_proto_of(const std::string& name, const Value& v);
bool is_float(int ty);
bool is_int(int ty);  // int64, int32 (held as i64)
DType storage_of(int ty, const std::string& where);

}  // namespace bitgrad::onnx
