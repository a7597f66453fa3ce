#include "train/loss_scaler.hpp"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "bitgrad/autograd.hpp"
#include "io/format.hpp"
#include "kernels/tensor_ops.hpp"

namespace bitgrad::train {

// dynamic loss scaling starts at 2^16 (numerics.md §25)
constexpr int kInitialScaleLog2 = 16;

LossScaler::LossScaler(const TrainConfig& t) : precision_(t.precision), interval_(t.loss_scale_interval), dynamic_(t.loss_scale == 0) {
  if (dynamic_) log2_ = kInitialScaleLog2;
  else {
    int ex = 0;
    std::frexp(t.loss_scale, &ex);  // a power of two (the configuration checks it)
    log2_ = ex - 1;
  }
}

double LossScaler::scale() const { return std::ldexp(1.0, log2_); }

bool LossScaler::unscale(const optim::NamedTensors& params, std::int64_t step) {
  if (!dynamic_ && log2_ == 0 && precision_ != Precision::fp16) return true;
  NoGradGuard ng;
  // the first parameter, in registration order, whose gradient holds a NaN or an infinity
  for (const auto& [name, p] : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    Tensor c = kern::contiguous(g);
    bool finite = true;
    BITGRAD_DISPATCH_FLOAT(c.dtype(), "loss scaling", T, [&] {
      // not finite: the exponent bits all ones (NaN, +-inf). An integer scan that vectorizes
      // (a sum of x - x, the test before, was one dependency chain as long as the tensor).
      using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
      constexpr U exp = static_cast<U>(sizeof(T) == 4 ? 0x7F800000ull : 0x7FF0000000000000ull);
      const T* v = c.data<T>();
      const std::int64_t n = c.numel();
      U any = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        U b;
        std::memcpy(&b, v + i, sizeof b);
        any |= (b & exp) == exp;
      }
      finite = any == 0;
    });
    if (finite) continue;
    if (!dynamic_)
      throw Error(io::strprintf("train: %s overflow at step %lld: the gradient of parameter '%s' is not finite (loss scale 2^%d); use "
                                "[train] loss_scale = \"dynamic\" or a smaller scale, and --detect-anomaly to name the first op whose "
                                "result is not finite",
                                precision_name(precision_), static_cast<long long>(step + 1), name.c_str(), log2_));
    --log2_;
    good_ = 0;
    return false;
  }
  if (log2_ != 0) {
    // 2^-k is exact, and so is every product but one that falls among the subnormals
    const double inv = std::ldexp(1.0, -log2_);
    for (const auto& [name, p] : params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      Tensor c = g.is_contiguous() ? g : g.contiguous_copy();
      BITGRAD_DISPATCH_FLOAT(c.dtype(), "loss scaling", T, [&] {
        T* v = c.mutable_data<T>();
        const T f = static_cast<T>(inv);
        const std::int64_t n = c.numel();
        for (std::int64_t i = 0; i < n; ++i) v[i] *= f;
      });
      if (!g.is_contiguous()) g.copy_from(c);
    }
  }
  if (dynamic_ && ++good_ == interval_) {
    ++log2_;
    good_ = 0;
  }
  return true;
}

void LossScaler::save(store::CheckpointInfo& info) const {
  info.dynamic_scale = dynamic_;
  info.loss_scale_log2 = log2_;
  info.loss_scale_good = good_;
}

void LossScaler::restore(const store::CheckpointInfo& info) {
  if (dynamic_ && info.dynamic_scale) {
    log2_ = info.loss_scale_log2;
    good_ = info.loss_scale_good;
  }
}

void LossScaler::add_to(Fingerprint& fp) const {
  if (!dynamic_) return;
  const std::int64_t ls[2] = {log2_, good_};
  fp.add_bytes(ls, sizeof ls);
}

}  // namespace bitgrad::train
