// Modules of the convolution variants, adaptive and global pooling and upsampling (the ops in
// bitgrad/ops_spatial.hpp, their orders in numerics.md §35-§37).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bitgrad/nn.hpp"
#include "bitgrad/ops_spatial.hpp"

namespace bitgrad::nn {

// Conv1d / Conv2d with every option (one kernel size per spatial axis: one or two), or with
// `transpose` their adjoints ConvTranspose1d / 2d. weight [out, in / groups, k...] (transpose:
// [in, out / groups, k...]), bias [out]; initialised with fan-in weight.shape[1] * prod(k), fan-out weight.shape[0] * prod(k) (PyTorch's fans).
class Conv : public Module {
 public:
  Conv(std::int64_t in_channels, std::int64_t out_channels, std::vector<int> kernel, ConvOptions options = {}, bool bias = true,
       bool transpose = false);
  void init(Init weights, std::uint64_t seed, std::uint64_t& index) override;
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  void bind_parameters() override;
  Tensor weight, bias;
  std::int64_t in_channels, out_channels;
  std::vector<int> kernel;
  ConvOptions options;
  bool transpose;
};

// AdaptiveAvgPool2d / AdaptiveMaxPool2d to [out_h, out_w]; GlobalAvgPool is 1 x 1
class AdaptivePool2d : public Module {
 public:
  AdaptivePool2d(bool max, std::int64_t out_h, std::int64_t out_w);
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;

 private:
  bool max_;
  std::int64_t oh_, ow_;
};

// MaxPool2d / AvgPool2d with PyTorch's options (padding, dilation for max, ceil_mode,
// count_include_pad for avg): the ops max_pool / avg_pool of numerics.md §35
class Pool : public Module {
 public:
  Pool(bool max, PoolOptions options);
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;

 private:
  bool max_;
  PoolOptions o_;
};

// Upsample [N, C, H, W]: to (out_h, out_w), or by (scale_h, scale_w) when the sizes are 0
// (output floor(H scale), the scale handed on as PyTorch's); nearest or bilinear
class Upsample : public Module {
 public:
  Upsample(std::int64_t out_h, std::int64_t out_w, double scale_h, double scale_w, bool bilinear, bool align_corners = false);
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;

 private:
  std::int64_t oh_, ow_;
  double sh_, sw_;
  bool bilinear_, align_;
};

// ---- residual block ---------------------------------------------------------
// torchvision's BasicBlock of x [N, in, H, W]: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),
// conv1 3x3 with `stride` and padding 1, conv2 3x3 padding 1, both without bias; the shortcut is x,
// or downsample = (1x1 convolution with `stride`, no bias; batch norm) when the stride is not 1 or
// the channels change. Children and parameters named as torchvision's (conv1.weight, bn1.weight,
// bn1.running_mean, ..., downsample.0.weight, downsample.1.bias), in its registration order, so a
// state dict maps one to one.
class BasicBlock : public Module {
 public:
  BasicBlock(std::int64_t in_channels, std::int64_t out_channels, int stride = 1, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& x, const Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
  std::shared_ptr<Conv> conv1, conv2;
  std::shared_ptr<BatchNorm> bn1, bn2;
  std::shared_ptr<Sequential> downsample;  // null: the identity
  std::int64_t in_channels, out_channels;
  int stride;
};

}  // namespace bitgrad::nn
