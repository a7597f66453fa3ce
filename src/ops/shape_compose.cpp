// More shape ops: squeeze, unsqueeze, stack, split, chunk, tile, flip, pad, tril,
// triu. Most are compositions of the ops of shape.cpp, so their gradients are those ops' (and
// their orders numerics.md §11 and §6); pad's constant mode and tril/triu are nodes of their own
// (copies and masks, no arithmetic). Orders: numerics.md §27.
#include <algorithm>

#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// "[a, b, c]" of a list of integers, for errors
template <class I>
std::string list_str(const std::vector<I>& v) {
  std::string r = "[";
  for (std::size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

// ---- pad, constant mode: y [.., begin + n + end, ..] = value around x --------------------------
struct PadSaved {
  std::int64_t begin[kMaxDims];
};
// the region of t (of y's shape) that holds x (of shape xs)
Tensor pad_region(const Tensor& t, const Shape& xs, const std::int64_t* begin) {
  std::int64_t off = t.offset();
  for (int d = 0; d < xs.ndim(); ++d) off += begin[d] * t.strides()[d];
  return Tensor::view_of(t, xs, t.strides(), off);
}
void pad_constant_bw(Node& n, const Tensor& g, Tensor* gi) {
  gi[0] = pad_region(g, n.in_shape[0], n.payload<PadSaved>().begin).contiguous_copy();
}

// ---- tril / triu over the last two axes: y = x where kept, else 0 ----------------------------------
struct TriSaved {
  std::int64_t k;
  bool upper;
};
// Kept: j <= i + k (lower) or j >= i + k (upper). Zero is all-zero bytes in every dtype.
template <class T>
void tri_rows(const T* s, std::int64_t batch, std::int64_t R, std::int64_t C, std::int64_t k, bool upper, T* o) {
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t i = 0; i < R; ++i) {
      // kept columns: [0, min(C, i + k + 1)) for tril, [max(0, i + k), C) for triu
      std::int64_t lo = 0, hi = C;
      if (upper) lo = std::clamp<std::int64_t>(i + k, 0, C);
      else hi = std::clamp<std::int64_t>(i + k + 1, 0, C);
      const std::int64_t at = (b * R + i) * C;
      std::copy(s + at + lo, s + at + std::max(lo, hi), o + at + lo);
    }
}
Tensor tri_mask(const Tensor& x, std::int64_t k, bool upper) {
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::zeros(x.shape(), x.dtype());
  const int r = x.ndim();
  const std::int64_t R = x.shape()[r - 2], C = x.shape()[r - 1];
  const std::int64_t batch = R * C > 0 ? x.numel() / (R * C) : 0;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    tri_rows(xc.data<T>(), batch, R, C, k, upper, kern::out_ptr<T>(y));
  };
  switch (x.dtype()) {
    case DType::f32: run(float{}); break;
    case DType::f64: run(double{}); break;
    case DType::i64: run(std::int64_t{}); break;
    case DType::u8: run(std::uint8_t{}); break;
    case DType::bf16: run(bf16_t{}); break;
    case DType::f16: run(f16_t{}); break;
  }
  return y;
}
void tri_bw(Node& n, const Tensor& g, Tensor* gi) {
  const TriSaved& s = n.payload<TriSaved>();
  gi[0] = tri_mask(g, s.k, s.upper);
}

Tensor tri(const char* op, const Tensor& x, std::int64_t k, bool upper, CallSite site) {
  BITGRAD_CHECK(x.defined(), op, "the input is undefined");
  BITGRAD_CHECK(x.ndim() >= 2, op, "the input must have at least 2 dimensions (the last two a matrix), got shape ",
                x.shape().str());
  Tensor y = tri_mask(x, k, upper);
  if (Node* n = ops::record(op, tri_bw, {&x}, y, site)) n->set_payload(TriSaved{k, upper});
  return y;
}

}  // namespace

Tensor squeeze(const Tensor& x, const std::vector<int>& axes, CallSite site) {
  BITGRAD_CHECK(x.defined(), "squeeze", "the input is undefined");
  std::vector<char> drop(static_cast<std::size_t>(x.ndim()), 0);
  if (axes.empty()) {
    for (int d = 0; d < x.ndim(); ++d) drop[static_cast<std::size_t>(d)] = x.shape()[d] == 1;
  } else {
    for (int a : axes) {
      const int d = x.shape().normalize_axis(a, "squeeze");
      BITGRAD_CHECK(x.shape()[d] == 1, "squeeze", "axis ", a, " of shape ", x.shape().str(), " has size ", x.shape()[d],
                    "; only axes of size 1 can be squeezed");
      drop[static_cast<std::size_t>(d)] = 1;
    }
  }
  Shape out;
  for (int d = 0; d < x.ndim(); ++d)
    if (!drop[static_cast<std::size_t>(d)]) out.push_back(x.shape()[d]);
  return reshape(x, out, site);
}

Tensor unsqueeze(const Tensor& x, const std::vector<int>& axes, CallSite site) {
  BITGRAD_CHECK(x.defined(), "unsqueeze", "the input is undefined");
  const int r = x.ndim() + static_cast<int>(axes.size());
  BITGRAD_CHECK(r <= kMaxDims, "unsqueeze", "the result would have ", r, " dimensions; at most ", kMaxDims);
  std::vector<char> ins(static_cast<std::size_t>(r), 0);
  for (int a : axes) {
    BITGRAD_CHECK(a >= -r && a < r, "unsqueeze", "axis ", a, " is out of range for a result of ", r,
                  " dimensions (input shape ", x.shape().str(), ", axes ", list_str(axes), ")");
    const int d = a < 0 ? a + r : a;
    BITGRAD_CHECK(!ins[static_cast<std::size_t>(d)], "unsqueeze", "axis ", d, " appears twice in axes ", list_str(axes));
    ins[static_cast<std::size_t>(d)] = 1;
  }
  Shape out;
  for (int d = 0, src = 0; d < r; ++d) out.push_back(ins[static_cast<std::size_t>(d)] ? 1 : x.shape()[src++]);
  return reshape(x, out, site);
}

Tensor stack(const std::vector<Tensor>& xs, int axis, CallSite site) {
  BITGRAD_CHECK(!xs.empty(), "stack", "needs at least one tensor");
  BITGRAD_CHECK(xs[0].defined(), "stack", "tensor 0 is undefined");
  const int r = xs[0].ndim() + 1;
  BITGRAD_CHECK(axis >= -r && axis < r, "stack", "axis ", axis, " is out of range for a result of ", r, " dimensions");
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    BITGRAD_CHECK(xs[i].defined() && xs[i].shape() == xs[0].shape(), "stack", "tensor ", i, " has shape ",
                  xs[i].defined() ? xs[i].shape().str() : "undefined", "; every tensor must have the shape of tensor 0, ",
                  xs[0].shape().str());
    parts.push_back(unsqueeze(xs[i], {axis}, site));
  }
  return concat(parts, axis, site);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis, CallSite site) {
  BITGRAD_CHECK(x.defined(), "split", "the input is undefined");
  axis = x.shape().normalize_axis(axis, "split");
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    BITGRAD_CHECK(s >= 0, "split", "sizes ", list_str(sizes), " has a negative size");
    total += s;
  }
  BITGRAD_CHECK(total == x.shape()[axis], "split", "sizes ", list_str(sizes), " sum to ", total, "; axis ", axis, " of shape ",
                x.shape().str(), " has size ", x.shape()[axis]);
  std::vector<Tensor> out;
  std::int64_t at = 0;
  for (std::int64_t s : sizes) {
    out.push_back(slice(x, axis, at, at + s, 1, site));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int axis, CallSite site) {
  BITGRAD_CHECK(x.defined(), "chunk", "the input is undefined");
  BITGRAD_CHECK(chunks >= 1, "chunk", "chunks is ", chunks, "; expected >= 1");
  axis = x.shape().normalize_axis(axis, "chunk");
  const std::int64_t n = x.shape()[axis];
  const std::int64_t each = (n + chunks - 1) / chunks;
  std::vector<std::int64_t> sizes;
  if (each == 0) sizes.assign(static_cast<std::size_t>(chunks), 0);  // torch: chunks empty parts of an empty axis
  for (std::int64_t at = 0; each > 0 && at < n; at += each) sizes.push_back(std::min(each, n - at));
  return split(x, sizes, axis, site);
}

Tensor tile(const Tensor& x, const std::vector<std::int64_t>& repeats, CallSite site) {
  BITGRAD_CHECK(x.defined(), "tile", "the input is undefined");
  const int r = static_cast<int>(repeats.size());
  BITGRAD_CHECK(r >= x.ndim(), "tile", "repeats ", list_str(repeats), " has fewer entries than the input's ", x.ndim(),
                " dimensions (shape ", x.shape().str(), ")");
  BITGRAD_CHECK(2 * r <= kMaxDims, "tile", "at most ", kMaxDims / 2, " dimensions, got ", r);
  for (std::int64_t k : repeats) BITGRAD_CHECK(k >= 0, "tile", "repeats ", list_str(repeats), " has a negative entry");
  // x [d] viewed [1, d0, 1, d1, ..], expanded to [r0, d0, r1, d1, ..], copied as [r0 d0, r1 d1, ..]:
  // the backward sums each element's copies by expand's rule (sum_to, numerics §6)
  Shape lead, inter, big, out;
  for (int d = 0; d < r; ++d) lead.push_back(d < r - x.ndim() ? 1 : x.shape()[d - (r - x.ndim())]);
  for (int d = 0; d < r; ++d) {
    inter.push_back(1);
    inter.push_back(lead[d]);
    big.push_back(repeats[static_cast<std::size_t>(d)]);
    big.push_back(lead[d]);
    out.push_back(repeats[static_cast<std::size_t>(d)] * lead[d]);
  }
  return reshape(expand(reshape(x, inter, site), big, site), out, site);
}

Tensor flip(const Tensor& x, const std::vector<int>& axes, CallSite site) {
  BITGRAD_CHECK(x.defined(), "flip", "the input is undefined");
  std::vector<char> seen(static_cast<std::size_t>(x.ndim()), 0);
  Tensor y = x;
  for (int a : axes) {
    const int d = x.shape().normalize_axis(a, "flip");
    BITGRAD_CHECK(!seen[static_cast<std::size_t>(d)], "flip", "axis ", d, " appears twice in axes ", list_str(axes));
    seen[static_cast<std::size_t>(d)] = 1;
    const std::int64_t n = x.shape()[d];
    std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = n - 1 - i;
    // a permutation: its backward scatter-add has one source per destination (exact)
    y = index_select(y, d, Tensor::from<std::int64_t>(idx, Shape{n}), site);
  }
  return axes.empty() ? contiguous(x, site) : y;
}

Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads, PadMode mode, double value, CallSite site) {
  BITGRAD_CHECK(x.defined(), "pad", "the input is undefined");
  const int r = x.ndim();
  BITGRAD_CHECK(static_cast<int>(pads.size()) == 2 * r, "pad", "pads ", list_str(pads), " has ", pads.size(),
                " entries; expected 2 x ", r, " (the begins of every axis, then the ends) for shape ", x.shape().str());
  // negative amounts crop first
  Tensor c = x;
  for (int d = 0; d < r; ++d) {
    const std::int64_t b = pads[static_cast<std::size_t>(d)], e = pads[static_cast<std::size_t>(d + r)];
    if (b >= 0 && e >= 0) continue;
    const std::int64_t n = c.shape()[d];
    const std::int64_t lo = b < 0 ? -b : 0, hi = n - (e < 0 ? -e : 0);
    BITGRAD_CHECK(lo <= hi, "pad", "pads ", list_str(pads), " crop more than the ", n, " elements of axis ", d, " of shape ",
                  x.shape().str());
    c = slice(c, d, lo, hi, 1, site);
  }
  if (mode == PadMode::constant) {
    Shape out = c.shape();
    PadSaved s{};
    for (int d = 0; d < r; ++d) {
      s.begin[d] = std::max<std::int64_t>(pads[static_cast<std::size_t>(d)], 0);
      out[d] += s.begin[d] + std::max<std::int64_t>(pads[static_cast<std::size_t>(d + r)], 0);
    }
    Tensor y = Tensor::full(out, value, c.dtype());
    pad_region(y, c.shape(), s.begin).copy_from(c);
    if (Node* n = ops::record("pad", pad_constant_bw, {&c}, y, site)) n->set_payload(s);
    return y;
  }
  // reflect, edge: axis by axis (0 first), each an index_select of the source positions, so the
  // backward sums each element's copies in increasing output position (numerics §11, §27)
  const char* name = mode == PadMode::reflect ? "reflect" : "edge";
  Tensor y = c;
  for (int d = 0; d < r; ++d) {
    const std::int64_t b = std::max<std::int64_t>(pads[static_cast<std::size_t>(d)], 0);
    const std::int64_t e = std::max<std::int64_t>(pads[static_cast<std::size_t>(d + r)], 0);
    if (b == 0 && e == 0) continue;
    const std::int64_t n = y.shape()[d];
    BITGRAD_CHECK(n > 0, "pad", name, " padding of an empty axis ", d, " of shape ", c.shape().str());
    std::vector<std::int64_t> idx;
    const std::int64_t period = 2 * (n - 1);  // reflect: numpy's, repeated past the far edge
    for (std::int64_t o = -b; o < n + e; ++o) {
      std::int64_t s = std::clamp<std::int64_t>(o, 0, n - 1);
      if (mode == PadMode::reflect && period > 0) {
        s = ((o % period) + period) % period;
        if (s >= n) s = period - s;
      }
      idx.push_back(s);
    }
    y = index_select(y, d, Tensor::from<std::int64_t>(idx, Shape{static_cast<std::int64_t>(idx.size())}), site);
  }
  return y;
}

Tensor tril(const Tensor& x, std::int64_t k, CallSite site) { return tri("tril", x, k, false, site); }
Tensor triu(const Tensor& x, std::int64_t k, CallSite site) { return tri("triu", x, k, true, site); }

}  // namespace bitgrad
