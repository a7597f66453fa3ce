// Order perturbation: wrappers around the active table that permute the reduction index of
// every reducing kernel before calling it. The canonical rules then run on permuted data,
// which is another exact IEEE evaluation order; outputs are un-permuted. Sums that cannot be
// expressed so (pooling windows, scatter-adds) are written out here in the permuted order.
// Kernels that do not add (elementwise, max pooling, im2col, optimizer updates) pass through.
// For studying sensitivity to reduction order (bitgrad sensitivity) and for testing the
// instruments (a perturbed run must diff as different).
#include <vector>

#include "bitgrad/rng.hpp"
#include "kernels/backend.hpp"
#include "kernels/kernels.hpp"

namespace bitgrad::kern {
namespace {

// the state lives in the calling thread's context (backend.hpp): its seed, step and call count
std::vector<std::int64_t> next_perm(std::int64_t n) {
  Backend::Perturb& s = current_backend().perturb;
  return rng::Stream(s.seed, "perturb").sub(s.step).sub(s.call++).permutation(n);
}

// the context's own code path under the perturbation
template <class T>
const Table<T>& base() {
  return table<T>(current_backend().isa.load(std::memory_order_relaxed));
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
// the middle axis moved last, then the perturbed row rule
template <class T>
void sum_mid(const T* x, std::int64_t A, std::int64_t L, std::int64_t K, T* out) {
  std::vector<T> rows(static_cast<std::size_t>(A * K * L));
  for (std::int64_t a = 0; a < A; ++a)
    for (std::int64_t l = 0; l < L; ++l)
      for (std::int64_t k = 0; k < K; ++k) rows[static_cast<std::size_t>((a * K + k) * L + l)] = x[(a * L + l) * K + k];
  sum_rows<T>(rows.data(), A * K, L, out);
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

// layer norm: the feature index (gamma and beta move with their feature)
template <class T>
std::vector<T> permute_row(const T* x, std::int64_t L, const std::vector<std::int64_t>& p) {
  return x ? permute_cols(x, 1, L, p) : std::vector<T>{};
}
template <class T>
void layer_norm_rows(const T* x, const T* gamma, const T* beta, std::int64_t R, std::int64_t D, T eps, T* y, T* mean,
                     T* rstd) {
  const auto p = next_perm(D);
  const auto gp = permute_row(gamma, D, p), bp = permute_row(beta, D, p);
  std::vector<T> yp(static_cast<std::size_t>(R * D));
  base<T>().layer_norm_rows(permute_cols(x, R, D, p).data(), gamma ? gp.data() : nullptr, beta ? bp.data() : nullptr, R, D, eps,
                            yp.data(), mean, rstd);
  unpermute_cols(yp, R, D, p, y);
}
template <class T>
void layer_norm_grad_rows(const T* g, const T* xhat, const T* gamma, const T* rstd, std::int64_t R, std::int64_t D, T* dx) {
  const auto p = next_perm(D);
  const auto gp = permute_row(gamma, D, p);
  std::vector<T> dp(static_cast<std::size_t>(R * D));
  base<T>().layer_norm_grad_rows(permute_cols(g, R, D, p).data(), permute_cols(xhat, R, D, p).data(),
                                 gamma ? gp.data() : nullptr, rstd, R, D, dp.data());
  unpermute_cols(dp, R, D, p, dx);
}

// avg pool: the pixels of each window, in the order p of their row-major offsets
template <class T>
void avg_pool(const T* x, const PoolShape& s, T* y) {
  const auto p = next_perm(s.k * s.k);
  const T area = static_cast<T>(s.k * s.k);
  for (std::int64_t q = 0; q < s.planes; ++q)
    for (std::int64_t oh = 0; oh < s.OH; ++oh)
      for (std::int64_t ow = 0; ow < s.OW; ++ow) {
        T acc = T(0);
        for (std::int64_t o : p) acc = acc + x[(q * s.H + oh * s.s + o / s.k) * s.W + ow * s.s + o % s.k];
        y[(q * s.OH + oh) * s.OW + ow] = canon(acc / area);
      }
}

// Scatter-adds (pooling gradients, col2im): each pixel's terms come from distinct output
// positions (windows), added in the order p of those positions instead of row-major.
template <class T>
void zero(T* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = T(0);
}
template <class T>
void max_pool_grad(const T* g, const std::int64_t* idx, const PoolShape& s, T* dx) {
  const std::int64_t P = s.OH * s.OW;
  const auto p = next_perm(P);
  zero(dx, s.planes * s.H * s.W);
  for (std::int64_t q = 0; q < s.planes; ++q)
    for (std::int64_t o : p) {
      T& d = dx[q * s.H * s.W + idx[q * P + o]];
      d = canon(d + g[q * P + o]);
    }
}
template <class T>
void avg_pool_grad(const T* g, const PoolShape& s, T* dx) {
  const std::int64_t P = s.OH * s.OW;
  const auto p = next_perm(P);
  const T area = static_cast<T>(s.k * s.k);
  zero(dx, s.planes * s.H * s.W);
  for (std::int64_t q = 0; q < s.planes; ++q)
    for (std::int64_t o : p) {
      const T t = g[q * P + o] / area;
      for (std::int64_t kh = 0; kh < s.k; ++kh)
        for (std::int64_t kw = 0; kw < s.k; ++kw) {
          T& d = dx[(q * s.H + (o / s.OW) * s.s + kh) * s.W + (o % s.OW) * s.s + kw];
          d = canon(d + t);
        }
    }
}
template <class T>
void col2im(const T* dcols, const ConvShape& s, T* dx) {
  const std::int64_t P = s.OH * s.OW;
  const auto p = next_perm(P);
  zero(dx, s.C * s.H * s.W);
  for (std::int64_t o : p)
    for (std::int64_t c = 0; c < s.C; ++c)
      for (std::int64_t kh = 0; kh < s.KH; ++kh)
        for (std::int64_t kw = 0; kw < s.KW; ++kw) {
          const std::int64_t ih = (o / s.OW) * s.s + kh - s.p, iw = (o % s.OW) * s.s + kw - s.p;
          if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
          T& d = dx[(c * s.H + ih) * s.W + iw];
          d = canon(d + dcols[((c * s.KH + kh) * s.KW + kw) * s.cols_ld() + o]);
        }
}

// no reduction: the kernels of the code path
template <class T>
void max_pool(const T* x, const PoolShape& s, T* y, std::int64_t* idx) { base<T>().max_pool(x, s, y, idx); }
template <class T>
void im2col(const T* x, const ConvShape& s, T* cols) { base<T>().im2col(x, s, cols); }
template <class T>
void im2row(const T* x, const ConvShape& s, T* rows) { base<T>().im2row(x, s, rows); }
template <class T>
void sgd_update(T* p, const T* g, T* v, std::int64_t n, const SgdCoef<T>& c) { base<T>().sgd_update(p, g, v, n, c); }
template <class T>
void adam_update(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamCoef<T>& c) { base<T>().adam_update(p, g, m, v, n, c); }
template <class T>
void unary(Unary op, const T* x, T* y, std::int64_t n) { base<T>().unary(op, x, y, n); }
template <class T>
void binary(Binary op, Bcast bc, const T* a, const T* b, T* y, std::int64_t o, std::int64_t i) { base<T>().binary(op, bc, a, b, y, o, i); }
template <class T>
void act_grad(ActGrad op, const T* v, const T* g, T* out, std::int64_t n) { base<T>().act_grad(op, v, g, out, n); }

template <class T>
void unary_p(UnaryP op, const T* x, T* y, std::int64_t n, double a, double b) { base<T>().unary_p(op, x, y, n, a, b); }
template <class T>
void act_grad_p(UnaryP op, const T* x, const T* g, T* out, std::int64_t n, double a, double b) {
  base<T>().act_grad_p(op, x, g, out, n, a, b);
}
template <class T>
void gelu_keep(const T* x, T* y, double* e, std::int64_t n) { base<T>().gelu_keep(x, y, e, n); }
template <class T>
void gelu_grad_kept(const T* x, const double* e, const T* g, T* out, std::int64_t n) { base<T>().gelu_grad_kept(x, e, g, out, n); }

template <class T>
void lstm_gates(const T* xz, std::int64_t ldx, const T* b, const T* hh, const T* c, std::int64_t N, std::int64_t H, T* c_out, T* h_out,
                std::int64_t ldh, T* keep) {
  base<T>().lstm_gates(xz, ldx, b, hh, c, N, H, c_out, h_out, ldh, keep);
}
template <class T>
void gru_gates(const T* xz, std::int64_t ldx, const T* hh, const T* h, std::int64_t ldh, std::int64_t N, std::int64_t H, T* h_out,
               std::int64_t ldo, T* keep) {
  base<T>().gru_gates(xz, ldx, hh, h, ldh, N, H, h_out, ldo, keep);
}
template <class T>
void gru_grad(const T* keep, const T* hh, const T* h, const T* g, std::int64_t N, std::int64_t H, T* gx, T* ghh, T* dh) {
  base<T>().gru_grad(keep, hh, h, g, N, H, gx, ghh, dh);
}
template <class T>
void lstm_cell_grad(const T* keep, const T* c, const T* gc, std::int64_t N, std::int64_t H, T* gz, std::int64_t ldz, T* gc_prev) {
  base<T>().lstm_cell_grad(keep, c, gc, N, H, gz, ldz, gc_prev);
}
template <class T>
void lstm_hidden_grad(const T* keep, const T* gh, std::int64_t N, std::int64_t H, T* gz_o, std::int64_t ldz, T* gc) {
  base<T>().lstm_hidden_grad(keep, gh, N, H, gz_o, ldz, gc);
}
// element by element: no order to perturb
template <class T>
void round_nearest(Precision p, const T* x, T* y, std::int64_t n) { base<T>().round_nearest(p, x, y, n); }
template <class T>
void dropout_mask(const rng::Stream& s, std::uint64_t first, std::int64_t n, double p, bool f32_words, T keep, T* m) {
  base<T>().dropout_mask(s, first, n, p, f32_words, keep, m);
}

template <class T>
Table<T> make() {
  Table<T> t{};
  t.gemm = &gemm<T>;
  t.unary = &unary<T>;
  t.binary = &binary<T>;
  t.act_grad = &act_grad<T>;
  t.unary_p = &unary_p<T>;
  t.act_grad_p = &act_grad_p<T>;
  t.gelu_keep = &gelu_keep<T>;
  t.gelu_grad_kept = &gelu_grad_kept<T>;
  t.lstm_gates = &lstm_gates<T>;
  t.lstm_cell_grad = &lstm_cell_grad<T>;
  t.gru_gates = &gru_gates<T>;
  t.gru_grad = &gru_grad<T>;
  t.lstm_hidden_grad = &lstm_hidden_grad<T>;
  t.sum_rows = &sum_rows<T>;
  t.sumsq_rows = &sumsq_rows<T>;
  t.sum_cols = &sum_cols<T>;
  t.sum_mid = &sum_mid<T>;
  // not reached while perturbation is on (the ops take the GEMM path, perturbed, then)
  t.dw_conv = [](const T* x, const T* w, const DwShape& sh, T* y) { base<T>().dw_conv(x, w, sh, y); };
  t.dw_conv_dx = [](const T* w, const T* dy, const DwShape& sh, T* dx) { base<T>().dw_conv_dx(w, dy, sh, dx); };
  t.dw_conv_dw = [](const T* x, const T* dy, const DwShape& sh, T* dw) { base<T>().dw_conv_dw(x, dy, sh, dw); };
  // the perturbed GEMM and batch rule, each sample's product stored
  t.gemm_samples = [](const GemmSamplesArgs<T>& a) { gemm_samples_stored(a, &gemm<T>, &sum_cols<T>); };
  t.softmax_rows = &rows1<T, &Table<T>::softmax_rows>;
  t.log_softmax_rows = &rows1<T, &Table<T>::log_softmax_rows>;
  t.softmax_grad_rows = &rows2<T, &Table<T>::softmax_grad_rows>;
  t.log_softmax_grad_rows = &rows2<T, &Table<T>::log_softmax_grad_rows>;
  t.xent_rows = &xent_rows<T>;
  t.xent_grad_rows = &xent_grad_rows<T>;
  t.layer_norm_rows = &layer_norm_rows<T>;
  t.layer_norm_grad_rows = &layer_norm_grad_rows<T>;
  t.max_pool = &max_pool<T>;
  t.max_pool_grad = &max_pool_grad<T>;
  t.avg_pool = &avg_pool<T>;
  t.avg_pool_grad = &avg_pool_grad<T>;
  t.im2col = &im2col<T>;
  t.im2row = &im2row<T>;
  t.col2im = &col2im<T>;
  t.sgd_update = &sgd_update<T>;
  t.adam_update = &adam_update<T>;
  t.round_nearest = &round_nearest<T>;
  t.dropout_mask = &dropout_mask<T>;
  return t;
}

}  // namespace

void set_perturbation(bool on, std::uint64_t seed) {
  Backend& b = current_backend();
  b.perturb.on = on;
  b.perturb.seed = seed;
  b.perturb.call = 0;
  b.resolve();
}
bool perturbation_active() { return current_backend().perturb.on; }
void perturb_step(std::uint64_t step) {
  Backend::Perturb& s = current_backend().perturb;
  s.step = step;
  s.call = 0;
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
