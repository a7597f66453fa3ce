// torchvision's BasicBlock (bitgrad/nn_spatial.hpp): two 3x3 convolutions with batch norm and a
// shortcut, made of the existing modules so its numerics are theirs (conv2d, batch_norm, relu, add).
#include "bitgrad/nn_spatial.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::str;
namespace {
// a square kernel without bias, stride and padding the same on both axes
std::shared_ptr<Conv> square_conv(std::int64_t ic, std::int64_t oc, int k, int s, int p) {
  ConvOptions o;
  o.stride = {s, s};
  o.pads = {p, p, p, p};
  return std::make_shared<Conv>(ic, oc, std::vector<int>{k, k}, o, false);
}
}  // namespace

BasicBlock::BasicBlock(std::int64_t ic, std::int64_t oc, int s, double eps, double momentum) : in_channels(ic), out_channels(oc), stride(s) {
  BITGRAD_CHECK(ic > 0 && oc > 0 && s > 0, "BasicBlock", "invalid geometry: channels ", ic, " -> ", oc, ", stride ", s);
  conv1 = square_conv(ic, oc, 3, s, 1);
  bn1 = std::make_shared<BatchNorm>(2, oc, eps, momentum, true);
  conv2 = square_conv(oc, oc, 3, 1, 1);
  bn2 = std::make_shared<BatchNorm>(2, oc, eps, momentum, true);
  register_module("conv1", conv1);  // torchvision's order: conv1, bn1, relu, conv2, bn2, downsample
  register_module("bn1", bn1);
  register_module("conv2", conv2);
  register_module("bn2", bn2);
  if (s != 1 || ic != oc) {
    downsample = std::make_shared<Sequential>();
    downsample->add(square_conv(ic, oc, 1, s, 0));
    downsample->add(std::make_shared<BatchNorm>(2, oc, eps, momentum, true));
    register_module("downsample", downsample);
  }
}

Tensor BasicBlock::forward(const Tensor& x, const Context& ctx) {
  Tensor h = relu(bn1->forward(conv1->forward(x, ctx), bn1->child_context(ctx, "bn1")));
  h = bn2->forward(conv2->forward(h, ctx), bn2->child_context(ctx, "bn2"));
  return relu(add(h, downsample ? downsample->forward(x, downsample->child_context(ctx, "downsample")) : x));
}

Shape BasicBlock::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() == 4 && in[1] == in_channels, describe().c_str(), "expects images [N, ", in_channels, ", H, W], got ", in.str());
  return bn2->output_shape(conv2->output_shape(bn1->output_shape(conv1->output_shape(in))));
}

std::string BasicBlock::describe() const { return str("BasicBlock(", in_channels, ", ", out_channels, ", stride=", stride, ")"); }

}  // namespace bitgrad::nn
