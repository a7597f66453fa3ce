// The ONNX importer from C++: models built with the reader's own structs, written by
// its writer and read back; the one-line error for what bitgrad lacks; the reader's refusals; the
// same bits at every thread count. The PyTorch round trips are tests/python/test_onnx_*.py.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/node.hpp"
#include "bitgrad/onnx.hpp"
#include "bitgrad/runtime.hpp"
#include "onnx/proto.hpp"
#include "support/onnx_protos.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using namespace bitgrad::onnx;

// y = relu(x W + b), x [2, 3]
ModelProto linear_relu(std::int64_t opset = 17) {
  ModelProto m;
  m.ir_version = 8;
  m.opset_import.push_back({"", opset});
  m.graph.name = "g";
  m.graph.initializer = {floats("W", {3, 2}, {0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f}), floats("b", {2}, {0.1f, -0.2f})};
  m.graph.input = {info("x", {2, 3})};
  m.graph.output = {info("y", {})};
  m.graph.node = {node("MatMul", "mm", {"x", "W"}, {"xw"}), node("Add", "add", {"xw", "b"}, {"s"}), node("Relu", "relu", {"s"}, {"y"})};
  m.has_graph = true;
  return m;
}

TEST(OnnxImport, WrittenReadAndRunWithBitgradsOps) {
  auto g = load_bytes(serialize_model(linear_relu()), "mem.onnx");
  ASSERT_EQ(g->named_parameters().size(), 2u);
  EXPECT_EQ(g->named_parameters()[0].first, "W");
  EXPECT_EQ(g->named_parameters()[1].first, "b");
  const Tensor x = Tensor::from<float>(std::vector<float>{1, 2, 3, -1, 0.5f, 4}, Shape{2, 3});
  const Tensor y = g->forward(x, nn::Context{});
  const auto& p = g->named_parameters();
  const Tensor want = relu(add(matmul(x, p[0].second), p[1].second));
  EXPECT_EQ(y.to_vector<float>(), want.to_vector<float>());
  // the module's current weights written back, read again: the same bits
  auto again = load_bytes(g->to_onnx_bytes(), "again.onnx");
  for (std::size_t i = 0; i < 2; ++i)
    EXPECT_EQ(again->named_parameters()[i].second.to_vector<float>(), p[i].second.to_vector<float>());
}

TEST(OnnxImport, WhatBitgradLacksIsOneLineNamingNodeOpAndWhat) {
  ModelProto m = linear_relu();
  m.graph.node.push_back(node("Atan", "my_atan", {"y"}, {"z1"}));
  m.graph.node.push_back(node("Mod", "my_mod", {"y", "y"}, {"z2"}));
  NodeProto conv = node("Relu", "relu2", {"y"}, {"z3"});
  AttributeProto a;
  a.name = "alpha";
  a.type = kAttrFloat;
  conv.attribute.push_back(a);
  m.graph.node.push_back(conv);
  try {
    load_bytes(serialize_model(m), "lacks.onnx");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string s = e.what();
    EXPECT_EQ(s, "onnx: lacks.onnx: node 'my_atan' (Atan): bitgrad has no op for ONNX Atan (and 2 more nodes bitgrad cannot run: Mod Relu)");
  }
  try {
    load_bytes(serialize_model(linear_relu(12)), "old.onnx");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("opset 12; bitgrad imports opsets 13 to 17"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, TheReaderRefusesBadBytesWithAnError) {
  const std::string good = serialize_model(linear_relu());
  for (std::size_t cut : {std::size_t(1), good.size() / 3, good.size() / 2, good.size() - 1}) {
    EXPECT_THROW(load_bytes(good.substr(0, cut), "cut.onnx"), Error) << cut;
  }
  EXPECT_THROW(load_bytes(std::string("\x08") + std::string(10, '\xff') + "\x01", "varint.onnx"), Error);
  EXPECT_THROW(load_bytes(std::string("\x0b\x00", 2), "group.onnx"), Error);  // wire type 3
  Limits tight;
  tight.max_count = 2;
  EXPECT_THROW(parse_model(good, "count.onnx", tight), Error);  // three nodes
}

TEST(OnnxImport, AHostileShapeIsAnErrorNamingTheNode) {
  // a 200-byte file reshaping 4 values to [2^62 + 1, 4] (4 elements once the product
  // wraps) and summing them read past the storage; declared inputs of [2^32, 2^32] and [2^62, 4]
  ModelProto m;
  m.ir_version = 8;
  m.opset_import.push_back({"", 17});
  m.graph.name = "g";
  TensorProto shape;
  shape.name = "shape";
  shape.data_type = kInt64;
  shape.dims = {2};
  shape.int64_data = {(std::int64_t{1} << 62) + 1, 4};
  m.graph.initializer = {shape};
  m.graph.input = {info("x", {4})};
  m.graph.output = {info("y", {})};
  m.graph.node = {node("Reshape", "huge", {"x", "shape"}, {"r"}), node("ReduceSum", "sum", {"r"}, {"y"})};
  m.has_graph = true;
  EXPECT_THROW_MSG(load_bytes(serialize_model(m), "hostile.onnx"), "node 'huge' (Reshape)");
  for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{std::int64_t{1} << 32, std::int64_t{1} << 32},
                                                std::vector<std::int64_t>{std::int64_t{1} << 62, 4}}) {
    ModelProto d = linear_relu();
    d.graph.input = {info("x", dims)};
    EXPECT_THROW_MSG(load_bytes(serialize_model(d), "declared.onnx"), "more than 2^56 elements");
  }
}

// An import's storage held at once is bounded before it is taken: a declared input of
// [2^30, 3] drove the loader to the OOM killer, six folded ConstantOfShape nodes of 2^27 each
// reached 4.1 GB under a per-node cap. Each is now refused at the allocation past the budget,
// naming the step (LoadOptions::memory_bytes, or what the system has available).
TEST(OnnxImport, AnImportsMemoryIsBoundedBeforeItIsTaken) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  LoadOptions quarter;
  quarter.memory_bytes = 0.25 * gib;
  ModelProto wide = linear_relu();
  wide.graph.input = {info("x", {std::int64_t{1} << 30, 3})};
  EXPECT_THROW_MSG(load_bytes(serialize_model(wide), "wide.onnx", quarter),
                   "onnx: wide.onnx: the load-time forward at the declared input shape [1073741824, 3]: needs more than the 256 MiB of memory "
                   "it may take (128 bytes held, 12 GiB more asked)");
  ModelProto huge = linear_relu();  // 16 TiB: past what any machine here has, refused by the default budget
  huge.graph.input = {info("x", {std::int64_t{1} << 40, 4})};
  EXPECT_THROW_MSG(load_bytes(serialize_model(huge), "huge.onnx"), "of memory it may take (128 bytes held, 16 TiB more asked)");
  std::vector<NodeProto> nodes;
  std::vector<std::string> made;
  for (int k = 0; k < 6; ++k) {
    made.push_back("c" + std::to_string(k));
    nodes.push_back(node("ConstantOfShape", made.back(), {"n"}, {made.back()}));
  }
  nodes.push_back(node("Sum", "all", made, {"s"}));
  nodes.push_back(node("Add", "add", {"x", "s"}, {"y"}));
  LoadOptions some;
  some.memory_bytes = 1.25 * gib;
  EXPECT_THROW_MSG(load_bytes(serialize_model(model_of(nodes, {int64s("n", {1}, {std::int64_t{1} << 27})}, {info("x", {1})})), "six.onnx", some),
                   "onnx: six.onnx: node 'c2' (ConstantOfShape), folded at load: needs more than the 1.25 GiB of memory it may take (1 GiB held, "
                   "512 MiB more asked)");
  // within the budget, the storage it held is given back
  memory::Budget outer(1e18, "outer");
  auto g = load_bytes(serialize_model(linear_relu()), "small.onnx", quarter);
  EXPECT_GT(outer.peak(), 0);
  EXPECT_LT(outer.held(), outer.peak()) << "the load-time forward's storage was given back";
}

TEST(OnnxImport, TheSameBitsAtEveryThreadCount) {
  std::vector<float> x(2 * 3);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.37f - 1.f;
  std::vector<float> first;
  for (const int threads : {1, 2, 3}) {
    ThreadCountScope scope(threads);
    auto g = load_bytes(serialize_model(linear_relu()), "t.onnx");
    const Tensor y = sum(g->forward(Tensor::from<float>(x, Shape{2, 3}), nn::Context{}));
    y.backward();
    std::vector<float> bits = g->named_parameters()[0].second.grad().to_vector<float>();
    bits.push_back(y.item());
    if (first.empty()) first = bits;
    EXPECT_EQ(bits, first) << threads << " threads";
  }
}

// A Transpose read only by MatMuls stays a view (a torch-exported Linear's W^T: matmul reads it
// through its strides); one read by anything else is copied. Either way the output and the
// weight's gradient have the bits of the same ops on contiguous copies.
TEST(OnnxImport, ATransposeReadByMatMulsAloneIsAViewWithTheSameBits) {
  auto transpose_node = [](const std::string& name, const std::string& in, const std::string& out) {
    NodeProto n = node("Transpose", name, {in}, {out});
    AttributeProto perm;
    perm.name = "perm";
    perm.type = kAttrInts;
    perm.ints = {1, 0};
    n.attribute.push_back(perm);
    return n;
  };
  std::vector<float> w(5 * 3), xv(4 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.3f - 2.f;
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 1.f - static_cast<float>(i) * 0.17f;
  // s = x W^T [4, 5]; y = (s^T s) relu(s^T)  [5, 4]: W^T read by a MatMul only, s^T by a MatMul and a Relu
  ModelProto m = model_of({transpose_node("wt", "W", "Wt"), node("MatMul", "mm", {"x", "Wt"}, {"s"}), transpose_node("st", "s", "sT"),
                           node("MatMul", "gram", {"sT", "s"}, {"p"}), node("Relu", "relu", {"sT"}, {"q"}),
                           node("MatMul", "out", {"p", "q"}, {"y"})},
                          {floats("W", {5, 3}, w)}, {info("x", {4, 3})});
  for (const int threads : {1, 3}) {
    ThreadCountScope scope(threads);
    auto g = load_bytes(serialize_model(m), "views.onnx");
    const Tensor x = Tensor::from<float>(xv, Shape{4, 3});
    const Tensor y = g->forward(x, nn::Context{});
    sum(y).backward();
    Tensor W = Tensor::from<float>(w, Shape{5, 3});
    W.set_requires_grad(true);
    const Tensor s = matmul(x, contiguous(transpose(W, 0, 1)));
    const Tensor st = contiguous(transpose(s, 0, 1));
    const Tensor want = matmul(matmul(st, s), relu(st));
    sum(want).backward();
    EXPECT_EQ(y.to_vector<float>(), want.to_vector<float>()) << threads << " threads";
    EXPECT_EQ(g->named_parameters()[0].second.grad().to_vector<float>(), W.grad().to_vector<float>()) << threads << " threads";
  }
}

// An exported Linear's MatMul and the Add of its bias run as one matmul_add (bias first or
// second); an Add of anything but a bias of b's columns, or a MatMul read twice, runs as
// written. Every output and gradient has the bits of the ops written out.
TEST(OnnxImport, AMatMulAndItsBiasAddRunAsOneOpWithTheSameBits) {
  std::vector<float> w(3 * 5), bv(5), rv(4 * 5), xv(2 * 4 * 3);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.3f - 2.f;
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = 0.25f * static_cast<float>(i) - 0.5f;
  for (std::size_t i = 0; i < rv.size(); ++i) rv[i] = 0.1f * static_cast<float>(i);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = 1.f - static_cast<float>(i) * 0.17f;
  // y = ((x W + b) + (b + x W)) + (x W + R) + relu(x W) : two fused pairs, an Add of a [4, 5]
  // tensor, and a MatMul read twice
  ModelProto m = model_of({node("MatMul", "m1", {"x", "W"}, {"p1"}), node("Add", "a1", {"p1", "b"}, {"s1"}),
                           node("MatMul", "m2", {"x", "W"}, {"p2"}), node("Add", "a2", {"b", "p2"}, {"s2"}),
                           node("MatMul", "m3", {"x", "W"}, {"p3"}), node("Add", "a3", {"p3", "R"}, {"s3"}),
                           node("MatMul", "m4", {"x", "W"}, {"p4"}), node("Add", "a4", {"p4", "b"}, {"s4"}), node("Relu", "r4", {"p4"}, {"q4"}),
                           node("Add", "t1", {"s1", "s2"}, {"u1"}), node("Add", "t2", {"u1", "s3"}, {"u2"}),
                           node("Add", "t3", {"u2", "s4"}, {"u3"}), node("Add", "t4", {"u3", "q4"}, {"y"})},
                          {floats("W", {3, 5}, w), floats("b", {5}, bv), floats("R", {4, 5}, rv)}, {info("x", {2, 4, 3})});
  for (const int threads : {1, 3}) {
    ThreadCountScope scope(threads);
    auto g = load_bytes(serialize_model(m), "bias.onnx");
    const Tensor x = Tensor::from<float>(xv, Shape{2, 4, 3});
    const Tensor y = g->forward(x, nn::Context{});
    sum(y).backward();
    Tensor W = Tensor::from<float>(w, Shape{3, 5}), b = Tensor::from<float>(bv, Shape{5}), R = Tensor::from<float>(rv, Shape{4, 5});
    for (Tensor* t : {&W, &b, &R}) t->set_requires_grad(true);
    // in the graph's order: the backward accumulates W's four gradients in reverse creation order
    const Tensor s1 = add(matmul(x, W), b), s2 = add(b, matmul(x, W)), s3 = add(matmul(x, W), R), p4 = matmul(x, W);
    const Tensor want = add(add(add(add(s1, s2), s3), add(p4, b)), relu(p4));
    sum(want).backward();
    EXPECT_EQ(y.to_vector<float>(), want.to_vector<float>()) << threads << " threads";
    for (const auto& [name, p] : g->named_parameters()) {
      const Tensor& mine = name == "W" ? W : name == "b" ? b : R;
      EXPECT_EQ(p.grad().to_vector<float>(), mine.grad().to_vector<float>()) << name << ", " << threads << " threads";
    }
  }
  // which pairs fused: the op that made the output of y = Add(MatMul(x, W), c)
  auto last_op = [&](const std::string& c_name, std::vector<TensorProto> inits, std::vector<ValueInfoProto> inputs) {
    ModelProto one = model_of({node("MatMul", "m", {"x", "W"}, {"p"}), node("Add", "a", {"p", c_name}, {"y"})}, std::move(inits), std::move(inputs));
    auto g = load_bytes(serialize_model(one), "one.onnx");
    std::vector<Tensor> in = {Tensor::from<float>(xv, Shape{2, 4, 3})};
    if (c_name == "c_in") in.push_back(Tensor::from<float>(bv, Shape{5}));
    const Tensor y = g->run(in, nn::Context{})[0];
    const autograd::AutogradMeta* meta = autograd::meta_if(y);
    return meta && meta->grad_fn.get() ? std::string(meta->grad_fn->op) : std::string("none");
  };
  EXPECT_EQ(last_op("b", {floats("W", {3, 5}, w), floats("b", {5}, bv)}, {info("x", {2, 4, 3})}), "matmul_add");
  EXPECT_EQ(last_op("R", {floats("W", {3, 5}, w), floats("R", {4, 5}, rv)}, {info("x", {2, 4, 3})}), "add");
  EXPECT_EQ(last_op("c_in", {floats("W", {3, 5}, w)}, {info("x", {2, 4, 3}), info("c_in", {5})}), "add");
}

}  // namespace
}  // namespace bitgrad::test
