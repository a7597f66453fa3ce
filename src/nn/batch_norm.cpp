// BatchNorm1d / BatchNorm2d: the batch_norm op (numerics.md §31) with PyTorch's parameters and
// buffers (weight, bias; running_mean, running_var, num_batches_tracked).
#include "bitgrad/nn.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::str;

BatchNorm::BatchNorm(int spatial_dims, std::int64_t features, double eps, double momentum, bool affine)
    : dims_(spatial_dims), features_(features), eps_(eps), momentum_(momentum) {
  BITGRAD_CHECK(spatial_dims == 1 || spatial_dims == 2, "BatchNorm", "is BatchNorm1d or BatchNorm2d, got ", spatial_dims, " dimensions");
  BITGRAD_CHECK(features > 0, "BatchNorm", "features must be positive, got ", features);
  BITGRAD_CHECK(eps >= 0, "BatchNorm", "eps must be >= 0, got ", eps);
  BITGRAD_CHECK(momentum >= 0 && momentum <= 1, "BatchNorm", "momentum must be in [0, 1], got ", momentum);
  if (affine) {
    weight = register_parameter("weight", Tensor::ones(Shape{features}));
    bias = register_parameter("bias", Tensor::zeros(Shape{features}));
  }
  running_mean = register_buffer("running_mean", Tensor::zeros(Shape{features}));
  running_var = register_buffer("running_var", Tensor::ones(Shape{features}));
  num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros(Shape{}, DType::i64));
}

void BatchNorm::init(Init, std::uint64_t, std::uint64_t& index) {
  NoGradGuard ng;
  if (weight.defined()) {
    weight.fill_(1.0);
    bias.fill_(0.0);
    index += 2;
  }
  running_mean.fill_(0.0);
  running_var.fill_(1.0);
  num_batches_tracked.fill_(0.0);
}

Tensor BatchNorm::forward(const Tensor& x, const Context& ctx) {
  if (!ctx.training) return batch_norm(x, running_mean, running_var, weight, bias, false, momentum_, eps_);
  if (recomputing()) return batch_norm(x, Tensor(), Tensor(), weight, bias, true, momentum_, eps_);  // updated by the first forward
  Tensor y = batch_norm(x, running_mean, running_var, weight, bias, true, momentum_, eps_);
  num_batches_tracked.mutable_data<std::int64_t>()[0] += 1;
  return y;
}

Shape BatchNorm::output_shape(const Shape& in) const {
  const bool ok = dims_ == 1 ? (in.ndim() == 2 || in.ndim() == 3) : in.ndim() == 4;
  BITGRAD_CHECK(ok && in[1] == features_, describe().c_str(), "expects inputs ",
                dims_ == 1 ? "[N, " + std::to_string(features_) + "] or [N, " + std::to_string(features_) + ", L]"
                           : "[N, " + std::to_string(features_) + ", H, W]",
                ", got ", in.str());
  return in;
}

std::string BatchNorm::describe() const {
  return str("BatchNorm", dims_, "d(", features_, ", eps=", eps_, ", momentum=", momentum_, weight.defined() ? "" : ", affine=False", ")");
}

void BatchNorm::bind_parameters() {
  weight = own_parameter("weight");
  bias = own_parameter("bias");
}

}  // namespace bitgrad::nn
