// Scatter and N-d gather: scatter (ONNX ScatterElements, torch.scatter / scatter_add),
// gather_nd (ONNX GatherND), scatter_nd (ONNX ScatterND). Each is written as rows of `inner`
// contiguous elements moved between a source position p (in row-major order of the index) and a
// target row of the data: the order of every sum is the order of p (numerics.md §27).
#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

// A target: the element offset of a row in the (contiguous) data. For scatter without a
// reduction, a source whose write a later source overwrites is stored as -1 - offset (it reaches
// neither the result nor a gradient).
struct RowsSaved {
  std::int64_t count, inner;
  bool add;
};

std::int64_t wrap(std::int64_t i, std::int64_t n, const char* op, std::int64_t pos, int axis) {
  BITGRAD_CHECK(i >= -n && i < n, op, "index ", i, " at position ", pos, " is out of range for axis ", axis, " of size ", n,
                " (negative indices count from the end)");
  return i < 0 ? i + n : i;
}

// Marks the overwritten sources (none): a target's last source in p order is its writer.
void mark_losers(std::vector<std::int64_t>& t, std::int64_t numel) {
  std::vector<char> taken(static_cast<std::size_t>(numel) + 1, 0);
  for (std::size_t p = t.size(); p-- > 0;) {
    if (taken[static_cast<std::size_t>(t[p])]) t[p] = -1 - t[p];
    else taken[static_cast<std::size_t>(t[p])] = 1;
  }
}

// y = x, then each source row p in order written (or added) at target t[p]
template <class T>
void scatter_rows(T* y, const T* src, const std::vector<std::int64_t>& t, std::int64_t inner, bool add) {
  for (std::size_t p = 0; p < t.size(); ++p) {
    if (t[p] < 0) continue;
    T* d = y + t[p];
    const T* s = src + static_cast<std::int64_t>(p) * inner;
    for (std::int64_t i = 0; i < inner; ++i) d[i] = add ? static_cast<T>(d[i] + s[i]) : s[i];
  }
}

// Backward of a scatter: gx = g, the written rows zeroed (none); gsrc[p] = g at t[p] (0 for an
// overwritten source). Exact: no sums.
void scatter_rows_bw(Node& n, const Tensor& g, Tensor* gi) {
  const RowsSaved& s = n.payload<RowsSaved>();
  const Tensor& tt = n.saved_tensor(0);
  const std::int64_t* t = tt.data<std::int64_t>();
  Tensor gc = kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "scatter", T, [&] {
    const T* gp = gc.data<T>();
    if (n.input(0).needs_grad()) {
      Tensor gx = gc.contiguous_copy();
      T* px = kern::out_ptr<T>(gx);
      if (!s.add)
        for (std::int64_t p = 0; p < s.count; ++p)
          if (t[p] >= 0) std::fill(px + t[p], px + t[p] + s.inner, T(0));
      gi[0] = gx;
    }
    if (n.input(1).needs_grad()) {
      Tensor gs = Tensor::zeros(n.in_shape[1], g.dtype());
      T* ps = kern::out_ptr<T>(gs);
      for (std::int64_t p = 0; p < s.count; ++p)
        if (t[p] >= 0) std::copy(gp + t[p], gp + t[p] + s.inner, ps + p * s.inner);
      gi[1] = gs;
    }
  });
}

Tensor scatter_impl(const char* op, const Tensor& x, const Tensor& src, std::vector<std::int64_t> t, std::int64_t inner,
                    ScatterReduction reduction, CallSite site) {
  const bool add = reduction == ScatterReduction::add;
  if (!add) mark_losers(t, x.numel());
  Tensor y = x.contiguous_copy();
  Tensor sc = kern::contiguous(src);
  switch (x.dtype()) {
    case DType::f32: scatter_rows(kern::out_ptr<float>(y), sc.data<float>(), t, inner, add); break;
    case DType::f64: scatter_rows(kern::out_ptr<double>(y), sc.data<double>(), t, inner, add); break;
    case DType::i64: scatter_rows(kern::out_ptr<std::int64_t>(y), sc.data<std::int64_t>(), t, inner, add); break;
    default: detail::fail(op, "unsupported dtype ", dtype_name(x.dtype()), "; expected f32, f64 or i64");
  }
  if (Node* n = ops::record(op, scatter_rows_bw, {&x, &src}, y, site)) {
    const auto count = static_cast<std::int64_t>(t.size());
    n->save(0, Tensor::from<std::int64_t>(t, Shape{count}));
    n->set_payload(RowsSaved{count, inner, add});
  }
  return y;
}

// ---- gather_nd: out row p = x row at t[p]; backward adds g's rows at t[p] in p order from +0 ------
void gather_rows_bw(Node& n, const Tensor& g, Tensor* gi) {
  const RowsSaved& s = n.payload<RowsSaved>();
  const std::int64_t* t = n.saved_tensor(0).data<std::int64_t>();
  Tensor gc = kern::contiguous(g);
  Tensor gx = Tensor::zeros(n.in_shape[0], g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "gather_nd", T, [&] {
    const T* gp = gc.data<T>();
    T* px = kern::out_ptr<T>(gx);
    for (std::int64_t p = 0; p < s.count; ++p)
      for (std::int64_t i = 0; i < s.inner; ++i) px[t[p] + i] += gp[p * s.inner + i];
  });
  gi[0] = gx;
}

void check_i64(const char* op, const Tensor& t, const char* what) {
  BITGRAD_CHECK(t.defined() && t.dtype() == DType::i64, op, what, " must be an i64 tensor, got ",
                t.defined() ? dtype_name(t.dtype()) : "undefined");
}

// The element offsets of the rows that index tuples [.., m] of `indices` name in x, the tuples
// indexing x's axes b .. b+m-1 within batch entry j (the first b axes shared). Row-major order.
std::vector<std::int64_t> nd_targets(const char* op, const Tensor& x, const Tensor& indices, int b, std::int64_t& inner) {
  const int q = indices.ndim();
  const std::int64_t m = indices.shape()[q - 1];
  const Shape xs = x.shape();
  const Shape st = contiguous_strides(xs);
  inner = 1;
  for (int d = b + static_cast<int>(m); d < xs.ndim(); ++d) inner *= xs[d];
  std::int64_t B = 1;
  for (int d = 0; d < b; ++d) B *= xs[d];
  std::int64_t per_batch = 1;
  for (int d = b; d < q - 1; ++d) per_batch *= indices.shape()[d];
  const std::int64_t batch_stride = b > 0 ? st[b - 1] : 0;
  Tensor ic = kern::contiguous(indices);
  const std::int64_t* ip = ic.data<std::int64_t>();
  std::vector<std::int64_t> t(static_cast<std::size_t>(B * per_batch));
  for (std::int64_t j = 0; j < B; ++j)
    for (std::int64_t r = 0; r < per_batch; ++r) {
      const std::int64_t p = j * per_batch + r;
      std::int64_t off = j * batch_stride;
      for (std::int64_t a = 0; a < m; ++a) {
        const int axis = b + static_cast<int>(a);
        off += wrap(ip[p * m + a], xs[axis], op, p * m + a, axis) * st[axis];
      }
      t[static_cast<std::size_t>(p)] = off;
    }
  return t;
}

}  // namespace

Tensor scatter(const Tensor& x, int axis, const Tensor& index, const Tensor& src, ScatterReduction reduction, CallSite site) {
  const char* op = reduction == ScatterReduction::add ? "scatter_add" : "scatter";
  BITGRAD_CHECK(x.defined() && src.defined(), op, "the input and src must be defined");
  check_i64(op, index, "the index");
  axis = x.shape().normalize_axis(axis, op);
  BITGRAD_CHECK(index.ndim() == x.ndim() && src.shape() == index.shape(), op, "index ", index.shape().str(), " and src ",
                src.shape().str(), " must have one shape, of the input's rank ", x.ndim(), " (input ", x.shape().str(), ")");
  BITGRAD_CHECK(src.dtype() == x.dtype(), op, "src has dtype ", dtype_name(src.dtype()), "; expected the input's ",
                dtype_name(x.dtype()));
  for (int d = 0; d < x.ndim(); ++d)
    BITGRAD_CHECK(d == axis || index.shape()[d] <= x.shape()[d], op, "index shape ", index.shape().str(),
                  " exceeds the input's ", x.shape().str(), " on axis ", d);
  const Shape st = contiguous_strides(x.shape());
  Tensor ic = kern::contiguous(index);
  const std::int64_t* ip = ic.data<std::int64_t>();
  std::vector<std::int64_t> t(static_cast<std::size_t>(ic.numel()));
  std::vector<std::int64_t> coord(static_cast<std::size_t>(x.ndim()), 0);
  for (std::int64_t p = 0; p < ic.numel(); ++p) {
    std::int64_t off = 0;
    for (int d = 0; d < x.ndim(); ++d)
      off += (d == axis ? wrap(ip[p], x.shape()[axis], op, p, axis) : coord[static_cast<std::size_t>(d)]) * st[d];
    t[static_cast<std::size_t>(p)] = off;
    for (int d = x.ndim() - 1; d >= 0; --d) {  // next coordinate, row-major
      if (++coord[static_cast<std::size_t>(d)] < index.shape()[d]) break;
      coord[static_cast<std::size_t>(d)] = 0;
    }
  }
  return scatter_impl(op, x, src, std::move(t), 1, reduction, site);
}

Tensor gather_nd(const Tensor& x, const Tensor& indices, int batch_dims, CallSite site) {
  BITGRAD_CHECK(x.defined(), "gather_nd", "the input is undefined");
  check_i64("gather_nd", indices, "the indices");
  const int q = indices.ndim(), r = x.ndim(), b = batch_dims;
  BITGRAD_CHECK(q >= 1 && b >= 0 && b < q && b < r, "gather_nd", "batch_dims ", b, " must be below the ranks of the indices ",
                indices.shape().str(), " and the input ", x.shape().str());
  const std::int64_t m = indices.shape()[q - 1];
  BITGRAD_CHECK(m >= 1 && m <= r - b, "gather_nd", "the indices' last dimension is ", m, "; expected 1 .. ", r - b,
                " (input ", x.shape().str(), ", batch_dims ", b, ")");
  for (int d = 0; d < b; ++d)
    BITGRAD_CHECK(indices.shape()[d] == x.shape()[d], "gather_nd", "batch dimension ", d, " differs: indices ",
                  indices.shape().str(), ", input ", x.shape().str());
  std::int64_t inner;
  const std::vector<std::int64_t> t = nd_targets("gather_nd", x, indices, b, inner);
  Shape out;
  for (int d = 0; d < q - 1; ++d) out.push_back(indices.shape()[d]);
  for (int d = b + static_cast<int>(m); d < r; ++d) out.push_back(x.shape()[d]);
  Tensor xc = kern::contiguous(x);
  Tensor y = Tensor::empty(out, x.dtype());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* px = xc.data<T>();
    T* py = kern::out_ptr<T>(y);
    for (std::size_t p = 0; p < t.size(); ++p) std::copy(px + t[p], px + t[p] + inner, py + static_cast<std::int64_t>(p) * inner);
  };
  switch (x.dtype()) {
    case DType::f32: run(float{}); break;
    case DType::f64: run(double{}); break;
    case DType::i64: run(std::int64_t{}); break;
    default: detail::fail("gather_nd", "unsupported dtype ", dtype_name(x.dtype()), "; expected f32, f64 or i64");
  }
  if (Node* n = ops::record("gather_nd", gather_rows_bw, {&x}, y, site)) {
    const auto count = static_cast<std::int64_t>(t.size());
    n->save(0, Tensor::from<std::int64_t>(t, Shape{count}));
    n->set_payload(RowsSaved{count, inner, true});
  }
  return y;
}

Tensor scatter_nd(const Tensor& x, const Tensor& indices, const Tensor& updates, ScatterReduction reduction, CallSite site) {
  const char* op = "scatter_nd";
  BITGRAD_CHECK(x.defined() && updates.defined(), op, "the input and the updates must be defined");
  check_i64(op, indices, "the indices");
  const int q = indices.ndim(), r = x.ndim();
  BITGRAD_CHECK(q >= 1, op, "the indices must have at least one dimension");
  const std::int64_t m = indices.shape()[q - 1];
  BITGRAD_CHECK(m >= 1 && m <= r, op, "the indices' last dimension is ", m, "; expected 1 .. ", r, " (input ", x.shape().str(), ")");
  Shape want;
  for (int d = 0; d < q - 1; ++d) want.push_back(indices.shape()[d]);
  for (int d = static_cast<int>(m); d < r; ++d) want.push_back(x.shape()[d]);
  BITGRAD_CHECK(updates.shape() == want, op, "updates have shape ", updates.shape().str(), "; expected ", want.str(),
                " (indices ", indices.shape().str(), ", input ", x.shape().str(), ")");
  BITGRAD_CHECK(updates.dtype() == x.dtype(), op, "updates have dtype ", dtype_name(updates.dtype()), "; expected the input's ",
                dtype_name(x.dtype()));
  std::int64_t inner;
  std::vector<std::int64_t> t = nd_targets(op, x, indices, 0, inner);
  return scatter_impl(op, x, updates, std::move(t), inner, reduction, site);
}

}  // namespace bitgrad
