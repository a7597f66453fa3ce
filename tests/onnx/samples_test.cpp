// Where an imported graph's samples go (src/onnx/samples.cpp, numerics.md §42): small graphs
// written with the reader's structs, each with the mode the analysis must find and the node it
// names. The torch-exported idioms are tests/python/test_sample_axis.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bitgrad/onnx.hpp"
#include "support/onnx_protos.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using Mode = onnx::SampleAnalysis::Mode;

onnx::SampleAnalysis analysed(std::vector<onnx::NodeProto> nodes, std::vector<onnx::TensorProto> inits, std::vector<std::int64_t> input) {
  std::vector<std::int64_t> declared = input;
  declared[0] = -1;  // a free batch: nothing runs at load
  onnx::ValueInfoProto x = info("x", declared);
  x.dim_params[0] = "N";
  auto g = onnx::load_bytes(onnx::serialize_model(model_of(std::move(nodes), std::move(inits), {x})), "samples.onnx");
  return g->samples(Shape(input));
}

std::vector<float> values(std::size_t n) { return std::vector<float>(n, 0.25f); }

TEST(OnnxSamples, SamplesOnAxisZeroAtEveryParameterAreTheBatchRule) {
  // x [N, 3] W + b, relu; a Gemm
  const auto a = analysed({node("MatMul", "mm", {"x", "W"}, {"xw"}), node("Add", "add", {"xw", "b"}, {"s"}), node("Relu", "relu", {"s"}, {"y"})},
                          {floats("W", {3, 2}, values(6)), floats("b", {2}, values(2))}, {4, 3});
  EXPECT_EQ(a.mode, Mode::batch_rule) << a.node << ": " << a.why;
  EXPECT_TRUE(a.output_on_axis0);
  EXPECT_FALSE(a.batch_statistics);
}

TEST(OnnxSamples, SequenceFirstAtAParameterRunsPerBlock) {
  // x [N, T, 3] -> [T, N, 3] (torch's sequence-first), times W, and back
  onnx::NodeProto t1 = node("Transpose", "to_seq_first", {"x"}, {"t"});
  onnx::NodeProto t2 = node("Transpose", "back", {"tw"}, {"y"});
  for (onnx::NodeProto* n : {&t1, &t2}) {
    onnx::AttributeProto perm;
    perm.name = "perm";
    perm.type = onnx::kAttrInts;
    perm.ints = {1, 0, 2};
    n->attribute.push_back(perm);
  }
  const auto a = analysed({t1, node("MatMul", "proj", {"t", "W"}, {"tw"}), t2}, {floats("W", {3, 2}, values(6))}, {4, 5, 3});
  EXPECT_EQ(a.mode, Mode::per_block);
  EXPECT_EQ(a.node, "node 'proj' (MatMul)");
  EXPECT_NE(a.why.find("holding the samples on axis 1 of [5, N, 3]"), std::string::npos) << a.why;
  EXPECT_TRUE(a.output_on_axis0);
}

TEST(OnnxSamples, HeadsFoldedIntoTheBatchAxisAreFollowed) {
  // [N, 6] -> [N·2, 3] (two entries per sample, as torch's attention folds the heads in) -> [N, 6]
  const auto a = analysed({node("Reshape", "fold", {"x", "folded"}, {"f"}), node("Relu", "relu", {"f"}, {"r"}),
                           node("Reshape", "unfold", {"r", "flat"}, {"u"}), node("MatMul", "mm", {"u", "W"}, {"y"})},
                          {int64s("folded", {2}, {-1, 3}), int64s("flat", {2}, {-1, 6}), floats("W", {6, 2}, values(12))}, {4, 6});
  EXPECT_EQ(a.mode, Mode::batch_rule) << a.node << ": " << a.why;
}

TEST(OnnxSamples, AReductionOverTheSamplesMixesThem) {
  // x - mean over the batch: a node that mixes samples, named with what it does
  onnx::NodeProto mean = node("ReduceMean", "batch_mean", {"x"}, {"m"});
  onnx::AttributeProto axes;
  axes.name = "axes";
  axes.type = onnx::kAttrInts;
  axes.ints = {0};
  mean.attribute.push_back(axes);
  const auto a = analysed({mean, node("Sub", "centre", {"x", "m"}, {"c"}), node("MatMul", "mm", {"c", "W"}, {"y"})},
                          {floats("W", {3, 2}, values(6))}, {4, 3});
  EXPECT_EQ(a.mode, Mode::mixes_samples);
  EXPECT_EQ(a.node, "node 'batch_mean' (ReduceMean)");
  EXPECT_NE(a.why.find("axis 0 of [N, 3] (the samples' axis)"), std::string::npos) << a.why;
}

TEST(OnnxSamples, AParameterReadTwiceRunsPerBlockAndAnOutputOffAxisZeroIsNamed) {
  const auto twice = analysed({node("MatMul", "mm1", {"x", "W"}, {"a"}), node("MatMul", "mm2", {"x", "W"}, {"b"}), node("Add", "add", {"a", "b"}, {"y"})},
                              {floats("W", {3, 3}, values(9))}, {4, 3});
  EXPECT_EQ(twice.mode, Mode::per_block);
  EXPECT_EQ(twice.node, "node 'mm2' (MatMul)");
  onnx::NodeProto t = node("Transpose", "t", {"x"}, {"y"});
  const auto off = analysed({t}, {}, {4, 5});
  EXPECT_FALSE(off.output_on_axis0);
  EXPECT_NE(off.output.find("output 'y' holds the samples on axis 1 of [5, N]"), std::string::npos) << off.output;
}

}  // namespace
}  // namespace bitgrad::test
