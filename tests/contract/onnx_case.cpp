// A contract case's layers as an ONNX graph: the contract fuzzer trains it through
// [model] onnx and checks T1-T9 on it as on the layer list. Weights are drawn here (the importer
// keeps a file's weights): uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) from (seed, "contract-onnx").
#include <cmath>
#include <cstring>

#include "bitgrad/rng.hpp"
#include "contract/case.hpp"
#include "onnx/proto.hpp"

namespace bitgrad::contract {
namespace {

using namespace bitgrad::onnx;

struct Builder {
  ModelProto m;
  rng::Stream stream;
  std::uint64_t drawn = 0;
  int names = 0;

  std::string fresh(const std::string& base) { return base + "_" + std::to_string(names++); }

  std::string tensor(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<float>& v) {
    TensorProto t;
    t.name = name;
    t.data_type = kFloat;
    t.dims = dims;
    t.has_raw = true;
    t.raw_data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    m.graph.initializer.push_back(t);
    return name;
  }
  std::string weights(const std::string& name, const std::vector<std::int64_t>& dims, std::int64_t fan_in) {
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    const double b = 1.0 / std::sqrt(static_cast<double>(fan_in));
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = static_cast<float>((2.0 * stream.uniform_f64(drawn++) - 1.0) * b);
    return tensor(name, dims, v);
  }
  std::string filled(const std::string& name, std::int64_t n, float value) {
    return tensor(name, {n}, std::vector<float>(static_cast<std::size_t>(n), value));
  }
  // a Constant node, not an initializer (a float initializer would be a trained parameter)
  std::string scalar(float value) {
    AttributeProto a;
    a.name = "value";
    a.type = kAttrTensor;
    a.t.data_type = kFloat;
    a.t.has_raw = true;
    a.t.raw_data.assign(reinterpret_cast<const char*>(&value), 4);
    a.has_t = true;
    return node("Constant", {}, {a});
  }
  std::string node(const std::string& type, std::vector<std::string> in, std::vector<AttributeProto> attrs = {}, int outputs = 1) {
    NodeProto n;
    n.op_type = type;
    n.name = fresh(type);
    n.input = std::move(in);
    for (int k = 0; k < outputs; ++k) n.output.push_back(n.name + "_out" + std::to_string(k));
    n.attribute = std::move(attrs);
    m.graph.node.push_back(n);
    return m.graph.node.back().output[0];
  }
};

AttributeProto ints(const std::string& name, std::vector<std::int64_t> v) {
  AttributeProto a;
  a.name = name;
  a.type = kAttrInts;
  a.ints = std::move(v);
  return a;
}
AttributeProto integer(const std::string& name, std::int64_t v) {
  AttributeProto a;
  a.name = name;
  a.type = kAttrInt;
  a.i = v;
  return a;
}
AttributeProto real(const std::string& name, float v) {
  AttributeProto a;
  a.name = name;
  a.type = kAttrFloat;
  a.f = v;
  return a;
}

ValueInfoProto value(const std::string& name, std::vector<std::int64_t> dims) {
  ValueInfoProto v;
  v.name = name;
  v.tensor_type = true;
  v.elem_type = kFloat;
  v.has_shape = !dims.empty();
  v.dim_params.assign(dims.size(), "");
  if (!dims.empty()) v.dim_params[0] = "batch";
  v.dims = std::move(dims);
  return v;
}

}  // namespace

std::string onnx_model_bytes(const Case& c) {
  Builder b{ModelProto{}, rng::Stream(c.seed, "contract-onnx")};
  b.m.ir_version = 8;
  b.m.opset_import.push_back({"", 17});
  b.m.graph.name = "contract";
  b.m.has_graph = true;
  std::vector<std::int64_t> in{-1};
  for (const auto d : c.shape) in.push_back(d);
  b.m.graph.input.push_back(value("x", in));
  std::string x = "x";
  std::vector<std::int64_t> s = c.shape;
  int k = 0;
  for (const Layer& l : c.layers) {
    std::string p = "l";  // (not "l" + to_string: GCC 12's -Wrestrict false positive)
    p += std::to_string(k++);
    const std::string& t = l.type;
    if (t == "linear") {
      std::vector<std::string> ins{x, b.weights(p + ".weight", {l.out, s[0]}, s[0])};
      if (l.bias) ins.push_back(b.weights(p + ".bias", {l.out}, s[0]));
      if (l.bias && k % 2 == 0) {  // every second layer as PyTorch exports a Linear on 3-d input:
        // the weight transposed (read as a view), MatMul, the bias added first (run as one matmul_add)
        x = b.node("Add", {ins[2], b.node("MatMul", {x, b.node("Transpose", {ins[1]}, {ints("perm", {1, 0})})})});
      } else {
        x = b.node("Gemm", ins, {integer("transB", 1)});
      }
    } else if (t == "conv2d") {
      const std::int64_t fan = s[0] * l.kernel * l.kernel;
      std::vector<std::string> ins{x, b.weights(p + ".weight", {l.out, s[0], l.kernel, l.kernel}, fan)};
      if (l.bias) ins.push_back(b.weights(p + ".bias", {l.out}, fan));
      x = b.node("Conv", ins,
                 {ints("kernel_shape", {l.kernel, l.kernel}), ints("strides", {l.stride, l.stride}),
                  ints("pads", {l.padding, l.padding, l.padding, l.padding})});
    } else if (t == "maxpool2d" || t == "avgpool2d") {
      x = b.node(t == "maxpool2d" ? "MaxPool" : "AveragePool", {x}, {ints("kernel_shape", {l.kernel, l.kernel}), ints("strides", {l.stride, l.stride})});
    } else if (t == "flatten") {
      x = b.node("Flatten", {x}, {integer("axis", 1)});
    } else if (t == "relu" || t == "tanh" || t == "sigmoid") {
      x = b.node(t == "relu" ? "Relu" : t == "tanh" ? "Tanh" : "Sigmoid", {x});
    } else if (t == "gelu") {  // x * 0.5 * (1 + erf(x / sqrt 2)): ONNX before opset 20 has no Gelu
      const std::string e = b.node("Erf", {b.node("Div", {x, b.scalar(1.41421356237309504880f)})});
      x = b.node("Mul", {x, b.node("Mul", {b.scalar(0.5f), b.node("Add", {b.scalar(1.0f), e})})});
    } else if (t == "dropout") {
      AttributeProto on;  // training_mode: a bool Constant
      on.name = "value";
      on.type = kAttrTensor;
      on.t.data_type = kBool;
      on.t.has_raw = true;
      on.t.raw_data = std::string(1, '\x01');
      on.has_t = true;
      x = b.node("Dropout", {x, b.scalar(static_cast<float>(l.p)), b.node("Constant", {}, {on})});
    } else if (t == "layernorm") {
      const std::int64_t d = s.back();
      x = b.node("LayerNormalization", {x, b.filled(p + ".weight", d, 1.0f), b.filled(p + ".bias", d, 0.0f)},
                 {integer("axis", -1), real("epsilon", 1e-5f)});
    } else if (t == "batchnorm") {
      const std::int64_t ch = s[0];
      x = b.node("BatchNormalization",
                 {x, b.filled(p + ".weight", ch, 1.0f), b.filled(p + ".bias", ch, 0.0f), b.filled(p + ".running_mean", ch, 0.0f),
                  b.filled(p + ".running_var", ch, 1.0f)},
                 {real("epsilon", 1e-5f), real("momentum", 0.9f), integer("training_mode", 1)});
    }
    s = shape_after(l, s);
  }
  std::vector<std::int64_t> out{-1};
  for (const auto d : s) out.push_back(d);
  b.m.graph.output.push_back(value(x, out));
  return serialize_model(b.m);
}

}  // namespace bitgrad::contract
