// ONNX models built with the reader's own structs (src/onnx/proto.hpp), for the importer's tests.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "onnx/proto.hpp"

namespace bitgrad::test {

inline onnx::TensorProto floats(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<float>& v) {
  onnx::TensorProto t;
  t.name = name;
  t.data_type = onnx::kFloat;
  t.dims = dims;
  t.has_raw = true;
  t.raw_data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return t;
}

inline onnx::ValueInfoProto info(const std::string& name, std::vector<std::int64_t> dims) {
  onnx::ValueInfoProto v;
  v.name = name;
  v.tensor_type = true;
  v.elem_type = onnx::kFloat;
  v.has_shape = !dims.empty();
  v.dims = dims;
  v.dim_params.assign(dims.size(), "");
  return v;
}

inline onnx::NodeProto node(const std::string& type, const std::string& name, std::vector<std::string> in, std::vector<std::string> out) {
  onnx::NodeProto n;
  n.op_type = type;
  n.name = name;
  n.input = std::move(in);
  n.output = std::move(out);
  return n;
}

inline onnx::TensorProto int64s(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& v) {
  onnx::TensorProto t;
  t.name = name;
  t.data_type = onnx::kInt64;
  t.dims = dims;
  t.int64_data = v;
  return t;
}

// A model of opset 17 with these nodes, initializers and inputs, and one output `y`.
inline onnx::ModelProto model_of(std::vector<onnx::NodeProto> nodes, std::vector<onnx::TensorProto> inits, std::vector<onnx::ValueInfoProto> inputs) {
  onnx::ModelProto m;
  m.ir_version = 8;
  m.opset_import.push_back({"", 17});
  m.graph.name = "g";
  m.graph.initializer = std::move(inits);
  m.graph.input = std::move(inputs);
  m.graph.output = {info("y", {})};
  m.graph.node = std::move(nodes);
  m.has_graph = true;
  return m;
}

}  // namespace bitgrad::test
