// Order perturbation: wrappers around the active table that permute the reduction index of
// every reducing kernel before calling it. The canonical rules then run on permuted data,
// which is another exact IEEE evaluation order; outputs are un-permuted. Elementwise kernels
// pass through. For studying sensitivity to reduction order (bitgrad sensitivity) and for
// testing the instruments (a perturbed run must diff as different).
#include <vector>

#include "bitgrad/rng.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::kern {
namespace {

struct State {
  bool on = false;
  std::uint64_t seed = 0, step = 0, call = 0;
};
thread_local State t_state;

std::vector<std::int64_t> next_perm(std::int64_t n) {
  return rng::Stream(t_state.seed, "perturb").sub(t_state.step).sub(t_state.call++).permutation(n);
}

template <class T>
const Table<T>& base() {
  return table<T>(active_isa());
}

// x'[r, l] = x[r, p[l]]
template <class T>
std::vector<T> permute_cols(const T* x, std::int64_t R, std::int64_t L, const std::vector<std::int64_t>& p) {
  std::vector<T> o(static_cast<std::size_t>(R * L));
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t l = 0; l < L; ++l) o[static_cast<std::size_t>(r * L + l)] = x[r * L + p[static_cast<std::size_t>(l)]];
  return o;
}
// y[r, p[l]] = y'[r, l]
template <class T>
void unpermute_cols(const std::vector<T>& yp, std::int64_t R, std::int64_t L, const std::vector<std::int64_t>& p, T* y) {
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t l = 0; l < L; ++l) y[r * L + p[static_cast<std::size_t>(l)]] = yp[static_cast<std::size_t>(r * L + l)];
}

template <class T>
void gemm(const GemmArgs<T>& g) {
  if (g.K <= 1 || g.M == 0 || g.N == 0) return base<T>().gemm(g);
  const auto p = next_perm(g.K);
  std::vector<T> a(static_cast<std::size_t>(g.M * g.K)), b(static_cast<std::size_t>(g.K * g.N));
  for (std::int64_t i = 0; i < g.M; ++i)
    for (std::int64_t k = 0; k < g.K; ++k) a[static_cast<std::size_t>(i * g.K + k)] = g.A[i * g.rsa + p[static_cast<std::size_t>(k)] * g.csa];
  for (std::int64_t k = 0; k < g.K; ++k)
    for (std::int64_t j = 0; j < g.N; ++j) b[static_cast<std::size_t>(k * g.N + j)] = g.B[p[static_cast<std::size_t>(k)] * g.rsb + j * g.csb];
  GemmArgs<T> q = g;
  q.A = a.data(), q.rsa = g.K, q.csa = 1, q.B = b.data(), q.rsb = g.N, q.csb = 1;
  base<T>().gemm(q);
}

template <class T>
void sum_rows(const T* x, std::int64_t R, std::int64_t L, T* out) {
  const auto p = next_perm(L);
  base<T>().sum_rows(permute_cols(x, R, L, p).data(), R, L, out);
}
template <class T>
void sumsq_rows(const T* a, const T* b, std::int64_t R, std::int64_t L, T* out) {
  const auto p = next_perm(L);
  auto ap = permute_cols(a, R, L, p);
  if (!b) return base<T>().sumsq_rows(ap.data(), nullptr, R, L, out);
  base<T>().sumsq_rows(ap.data(), permute_cols(b, R, L, p).data(), R, L, out);
}
template <class T>
void sum_cols(const T* x, std::int64_t R, std::int64_t C, T* out) {
  const auto p = next_perm(R);
  std::vector<T> xp(static_cast<std::size_t>(R * C));
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) xp[static_cast<std::size_t>(r * C + c)] = x[p[static_cast<std::size_t>(r)] * C + c];
  base<T>().sum_cols(xp.data(), R, C, out);
}


template <class T, void (*Table<T>::*F)(const T*, std::int64_t, std::int64_t, T*)>
void rows1(const T* x, std::int64_t R, std::int64_t L, T* y) {
  const auto p = next_perm(L);
  std::vector<T> yp(static_cast<std::size_t>(R * L));
  (base<T>().*F)(permute_cols(x, R, L, p).data(), R, L, yp.data());
  unpermute_cols(yp, R, L, p, y);
}
template <class T, void (*Table<T>::*F)(const T*, const T*, std::int64_t, std::int64_t, T*)>
void rows2(const T* a, const T* b, std::int64_t R, std::int64_t L, T* y) {
  const auto p = next_perm(L);
  std::vector<T> yp(static_cast<std::size_t>(R * L));
  (base<T>().*F)(permute_cols(a, R, L, p).data(), permute_cols(b, R, L, p).data(), R, L, yp.data());
  unpermute_cols(yp, R, L, p, y);
}
// targets follow their class to its new column
std::vector<std::int64_t> moved_targets(const std::int64_t* t, std::int64_t R, const std::vector<std::int64_t>& p) {
  std::vector<std::int64_t> inv(p.size()), out(static_cast<std::size_t>(R));
  for (std::size_t l = 0; l < p.size(); ++l) inv[static_cast<std::size_t>(p[l])] = static_cast<std::int64_t>(l);
  for (std::int64_t r = 0; r < R; ++r) out[static_cast<std::size_t>(r)] = inv[static_cast<std::size_t>(t[r])];
  return out;
}
template <class T>
void xent_rows(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T* loss) {
  const auto p = next_perm(L);
  base<T>().xent_rows(permute_cols(x, R, L, p).data(), moved_targets(t, R, p).data(), R, L, loss);
}
template <class T>
void xent_grad_rows(const T* x, const std::int64_t* t, std::int64_t R, std::int64_t L, T scale, T* gx) {
  const auto p = next_perm(L);
  std::vector<T> yp(static_cast<std::size_t>(R * L));
  base<T>().xent_grad_rows(permute_cols(x, R, L, p).data(), moved_targets(t, R, p).data(), R, L, scale, yp.data());
  unpermute_cols(yp, R, L, p, gx);
}

template <class T>
void unary(Unary op, const T* x, T* y, std::int64_t n) { base<T>().unary(op, x, y, n); }
template <class T>
void binary(Binary op, Bcast bc, const T* a, const T* b, T* y, std::int64_t o, std::int64_t i) { base<T>().binary(op, bc, a, b, y, o, i); }
template <class T>
void act_grad(ActGrad op, const T* v, const T* g, T* out, std::int64_t n) { base<T>().act_grad(op, v, g, out, n); }

template <class T>
Table<T> make() {
  Table<T> t{};
  t.gemm = &gemm<T>;
  t.unary = &unary<T>;
  t.binary = &binary<T>;
  t.act_grad = &act_grad<T>;
  t.sum_rows = &sum_rows<T>;
  t.sumsq_rows = &sumsq_rows<T>;
  t.sum_cols = &sum_cols<T>;
  t.softmax_rows = &rows1<T, &Table<T>::softmax_rows>;
  t.log_softmax_rows = &rows1<T, &Table<T>::log_softmax_rows>;
  t.softmax_grad_rows = &rows2<T, &Table<T>::softmax_grad_rows>;
  t.log_softmax_grad_rows = &rows2<T, &Table<T>::log_softmax_grad_rows>;
  t.xent_rows = &xent_rows<T>;
  t.xent_grad_rows = &xent_grad_rows<T>;
  return t;
}

}  // namespace

void set_perturbation(bool on, std::uint64_t seed) {
  t_state.on = on;
  t_state.seed = seed;
  t_state.call = 0;
}
bool perturbation_active() { return t_state.on; }
void perturb_step(std::uint64_t step) {
  t_state.step = step;
  t_state.call = 0;
}
const Table<float>& perturbed_table_f32() {
  static const Table<float> t = make<float>();
  return t;
}
const Table<double>& perturbed_table_f64() {
  static const Table<double> t = make<double>();
  return t;
}

}  // namespace bitgrad::kern
