// Scans (numerics.md §29), forward and backward side by side.
//   cumsum: x [.., L, ..] -> y same shape. Along the axis, in the scan's direction (first to
//   last, or last to first with reverse), acc = +0; then per element: inclusive y = (acc = acc + x),
//   exclusive y = acc, then acc = acc + x. One sequential chain per line, in the dtype: the
//   lines (every other index) are independent, so threads and vector lanes split them freely.
//   Backward: the same scan of g in the opposite direction (exclusive stays exclusive).
#include "kernels/thread_pool.hpp"
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

Tensor scan_raw(const Tensor& x, int axis, bool exclusive, bool reverse) {
  const Shape& s = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
  const std::int64_t L = s.ndim() ? s[axis] : 1;
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(s, x.dtype());
  BITGRAD_DISPATCH_FLOAT(x.dtype(), "cumsum", T, [&] {
    const T* px = xc.data<T>();
    T* py = kern::out_ptr<T>(y);
    // one task = one outer index: its inner lines run side by side (the inner loop vectorises
    // across independent chains; no line is ever split)
    kern::parallel_for(outer, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(1, L * inner)), [&](std::int64_t b, std::int64_t e) {
      std::vector<T> acc(static_cast<std::size_t>(inner));
      for (std::int64_t o = b; o < e; ++o) {
        std::fill(acc.begin(), acc.end(), T(0));
        for (std::int64_t k = 0; k < L; ++k) {
          const std::int64_t l = reverse ? L - 1 - k : k;
          const T* xr = px + (o * L + l) * inner;
          T* yr = py + (o * L + l) * inner;
          for (std::int64_t i = 0; i < inner; ++i) {
            T& a = acc[static_cast<std::size_t>(i)];
            if (exclusive) {
              yr[i] = kern::canon(a);
              a = a + xr[i];
            } else {
              a = a + xr[i];
              yr[i] = kern::canon(a);
            }
          }
        }
      }
    });
  });
  return y;
}

struct ScanSaved {
  int axis;
  bool exclusive, reverse;
};
void cumsum_bw(Node& n, const Tensor& g, Tensor* gi) {
  const ScanSaved& s = n.payload<ScanSaved>();
  gi[0] = scan_raw(g, s.axis, s.exclusive, !s.reverse);
}

}  // namespace

Tensor cumsum(const Tensor& x, int axis, bool exclusive, bool reverse, CallSite site) {
  ops::check_float("cumsum", x);
  if (x.ndim() > 0) axis = x.shape().normalize_axis(axis, "cumsum");
  else BITGRAD_CHECK(axis == 0 || axis == -1, "cumsum", "axis ", axis, " is out of range for a 0-d tensor");
  if (x.ndim() == 0) axis = 0;
  Tensor y = scan_raw(x, axis, exclusive, reverse);
  if (Node* n = ops::record("cumsum", cumsum_bw, {&x}, y, site)) n->set_payload(ScanSaved{axis, exclusive, reverse});
  return y;
}

}  // namespace bitgrad
