// Convolution variants, pooling with options, adaptive and global pooling, upsampling
// (numerics.md §35-§37). Differentiable ops as those of bitgrad/ops.hpp: each
// records a node when grad is enabled, the last argument is the caller's source location.
#pragma once

#include <cstdint>
#include <vector>

#include "bitgrad/autograd.hpp"
#include "bitgrad/tensor.hpp"

namespace bitgrad {

// ---- pooling and upsampling, more (numerics.md §35, §36) ---------------------
// x [N, C, H, W], or [N, C, L] for one spatial axis (kernel of one entry). Per axis: stride
// (empty: the kernel), dilation (empty: 1; max only), pads in ONNX's order [begin..., end...]
// (empty: 0). ceil_mode: the output size rounds up, a last window starting past the input and
// its begin padding dropped (PyTorch's rule). avg: count_include_pad divides by the window's
// extent within the padded input, else by its taps inside the input (ONNX's default; PyTorch's
// default is true). Windows are taken in row-major order of their taps inside the input.
struct PoolOptions {
  std::vector<int> kernel;
  std::vector<int> stride = {};
  std::vector<int> pads = {};
  std::vector<int> dilation = {};
  bool ceil_mode = false;
  bool count_include_pad = false;
};
Tensor max_pool(const Tensor& x, const PoolOptions& options, CallSite site = CallSite::current());
Tensor avg_pool(const Tensor& x, const PoolOptions& options, CallSite site = CallSite::current());
// PyTorch's bins: output i covers [floor(i L / O), ceil((i + 1) L / O)) on each axis
Tensor adaptive_avg_pool2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, CallSite site = CallSite::current());
Tensor adaptive_max_pool2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, CallSite site = CallSite::current());
Tensor adaptive_avg_pool1d(const Tensor& x, std::int64_t out_l, CallSite site = CallSite::current());
Tensor adaptive_max_pool1d(const Tensor& x, std::int64_t out_l, CallSite site = CallSite::current());
// x [N, C, d1, ...] (one or more spatial axes) -> [N, C, 1, ...]: ONNX GlobalAveragePool /
// GlobalMaxPool, the spatial axes as one window in row-major order
Tensor global_avg_pool(const Tensor& x, CallSite site = CallSite::current());
Tensor global_max_pool(const Tensor& x, CallSite site = CallSite::current());
// x [N, C, H, W] -> [N, C, out_h, out_w], PyTorch's F.interpolate: scale_h / scale_w are its
// scale_factor (0: none, the sizes' ratio is used)
Tensor upsample_nearest2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, double scale_h = 0, double scale_w = 0,
                          CallSite site = CallSite::current());
Tensor upsample_bilinear2d(const Tensor& x, std::int64_t out_h, std::int64_t out_w, bool align_corners, double scale_h = 0,
                           double scale_w = 0, CallSite site = CallSite::current());

// ---- convolution variants (numerics.md §37) -------------------------------------
// Per spatial axis (two for x [N, C, H, W], one for x [N, C, L]): stride (empty: 1), pads in
// ONNX's order [begin..., end...] (empty: 0), dilation (empty: 1); groups split the channels
// (groups = C: depthwise). output_padding: conv_transpose only, added at the end of each axis.
struct ConvOptions {
  std::vector<int> stride = {};
  std::vector<int> pads = {};
  std::vector<int> dilation = {};
  int groups = 1;
  std::vector<int> output_padding = {};
};
// x [N, C, H, W], weight [OC, C / groups, KH, KW], bias [OC] (optional) -> [N, OC, OH, OW],
// OH = (H + pad_begin + pad_end - (d (KH - 1) + 1)) / s + 1; 1-d: x [N, C, L], weight [OC, C / g, K].
// Each output one fma chain over its group's (c, kh, kw) as conv2d, then + bias.
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options,
            CallSite site = CallSite::current());
// The adjoint of conv (its input gradient): x [N, C, H, W], weight [C, OC / groups, KH, KW],
// bias [OC] -> [N, OC, OH, OW], OH = (H - 1) s - pad_begin - pad_end + d (KH - 1) + 1 + output_padding
Tensor conv_transpose(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options,
                      CallSite site = CallSite::current());

}  // namespace bitgrad
