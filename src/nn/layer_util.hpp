// Helpers the layer files share: descriptions and the initialisation stream of a parameter.
#pragma once

#include <sstream>
#include <string>

#include "bitgrad/nn.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::nn::detail {

template <class... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// Parameter `index` (registration order across the model) draws from (seed, "init").sub(index).
inline rng::Stream init_stream(std::uint64_t seed, std::uint64_t& index) { return rng::Stream(seed, "init").sub(index++); }

// Mixed precision (numerics.md §24): tensor k of a module's matmul-like op in the run's
// precision. Stochastic rounding (training only) draws from (seed, "round").sub(8 site + k)
// .sub(step), element index from the micro-batch's first sample for an activation (so a
// sample's rounding does not depend on the split, ranks or threads), from 0 for a parameter's
// copy, whose gradient reaches the f32 master unrounded.
// `at`: the layer's call, which op traces and anomaly reports name.
inline Tensor lowp(const Tensor& t, const Context& ctx, std::uint64_t site, std::uint64_t k, bool parameter = false,
                   CallSite at = CallSite::current()) {
  if (ctx.precision == Precision::fp32 || !t.defined()) return t;
  if (!ctx.stochastic || !ctx.training) return round_to(t, ctx.precision, nullptr, 0, !parameter, at);
  const rng::Stream s = rng::Stream(ctx.seed, "round").sub(8 * site + k).sub(ctx.step);
  const std::int64_t rows = t.ndim() > 0 ? t.shape()[0] : 1;
  const std::int64_t row_size = rows > 0 ? t.numel() / rows : 0;
  return round_to(t, ctx.precision, &s, parameter ? 0 : static_cast<std::uint64_t>(ctx.row_offset * row_size), !parameter, at);
}

// y = x W^T + b with x, W, b and y in the run's precision (tensors 0-3 of the site)
inline Tensor lowp_linear(const Tensor& x, const Tensor& w, const Tensor& b, const Context& ctx, std::uint64_t site,
                          CallSite at = CallSite::current()) {
  if (ctx.precision == Precision::fp32) return linear(x, w, b, at);
  return lowp(linear(lowp(x, ctx, site, 0, false, at), lowp(w, ctx, site, 1, true, at), lowp(b, ctx, site, 2, true, at), at), ctx, site, 3,
              false, at);
}

}  // namespace bitgrad::nn::detail
