// Recurrent cells and layers (RNN, LSTM, GRU) composed of recorded ops (numerics.md §34), with
// PyTorch's gate equations and parameter layout. Shapes: x [N, in], h, c [N, H],
// w_ih [G·H, in], w_hh [G·H, H], b_ih, b_hh [G·H]; G = 1 (rnn), 4 (lstm: i, f, g, o), 3 (gru: r, z, n).
//   input part   xz = linear(x, w_ih, b_ih) (+ b_hh for rnn and lstm: folded here, so over a
//                sequence its gradient is a broadcast's, per sample first, then the batch rule)
//   hh           linear(h, w_hh) (gru: + b_hh): recurrent_product below, linear's bits, with the
//                weight's (and gru's bias's) gradient reduced per sample over the steps (T5)
//   rnn          h' = act(xz + linear(h, w_hh))
//   lstm         z = xz + linear(h, w_hh); i, f, g, o = chunks of z;
//                c' = sigmoid(f) c + sigmoid(i) tanh(g); h' = sigmoid(o) tanh(c')
//   gru          hz = linear(h, w_hh, b_hh); r = sigmoid(xz_r + hz_r); z = sigmoid(xz_z + hz_z);
//                n = tanh(xz_n + r hz_n); h' = (h − n) z + n   (ATen's gru_cell)
// A sequence projects every step's input in one linear of x [N, T, in] (each element one chain
// over `in`, the bits of the cell's), then runs the steps in order. The backward is the ops'.
#include <memory>

#include "ops/op_util.hpp"

namespace bitgrad {
namespace {
using autograd::Node;

int gates_of(RnnMode m) { return m == RnnMode::lstm ? 4 : m == RnnMode::gru ? 3 : 1; }
const char* op_of(RnnMode m) {
  switch (m) {
    case RnnMode::rnn_tanh:
    case RnnMode::rnn_relu: return "rnn";
    case RnnMode::lstm: return "lstm";
    case RnnMode::gru: return "gru";
  }
  return "rnn";
}

// Checks one layer's parameters for inputs of `in` features; returns H.
std::int64_t check_params(RnnMode mode, const RnnParams& p, std::int64_t in, std::size_t layer) {
  const char* op = op_of(mode);
  const std::int64_t G = gates_of(mode);
  BITGRAD_CHECK(p.w_ih.defined() && p.w_hh.defined(), op, "layer ", layer, ": w_ih and w_hh are required");
  BITGRAD_CHECK(p.w_hh.ndim() == 2 && p.w_hh.shape()[1] > 0 && p.w_hh.shape()[0] == G * p.w_hh.shape()[1], op, "layer ", layer,
                ": w_hh must be [", G, "*H, H], got ", p.w_hh.shape().str());
  const std::int64_t H = p.w_hh.shape()[1];
  BITGRAD_CHECK(p.w_ih.ndim() == 2 && p.w_ih.shape()[0] == G * H && p.w_ih.shape()[1] == in, op, "layer ", layer, ": w_ih must be [",
                G * H, ", ", in, "] for inputs of ", in, " features and H = ", H, ", got ", p.w_ih.shape().str());
  BITGRAD_CHECK(p.b_ih.defined() == p.b_hh.defined(), op, "layer ", layer, ": b_ih and b_hh go together (both or neither)");
  for (const Tensor* b : {&p.b_ih, &p.b_hh})
    BITGRAD_CHECK(!b->defined() || (b->ndim() == 1 && b->shape()[0] == G * H), op, "layer ", layer, ": biases must be [", G * H, "], got ",
                  b->shape().str());
  return H;
}

void check_state(const char* op, const char* name, const Tensor& s, std::int64_t N, std::int64_t H) {
  BITGRAD_CHECK(s.defined() && s.ndim() == 2 && s.shape()[0] == N && s.shape()[1] == H, op, name, " must be [", N, ", ", H,
                "], got ", s.defined() ? s.shape().str() : "undefined");
}

// ---- the recurrent product: hh = linear(h, w_hh, b_hh) of one step, with the weight and bias
// gradients of the whole sequence reduced as a 3-d linear's (§5): each sample's rows over the
// steps first, then the samples by the batch rule, so micro-batches keep T5.
//   forward: linear's bits (a chain over H, then + b).  backward, input: dh = g w_hh (linear's).
//   weight and bias: step t's (g_t, h_t) are kept in the layer's shared record; the step that runs
//   last in the backward (t = 0, created first) reduces them all and hands the gradients on.
struct SequenceGrads {
  std::int64_t T;
  std::vector<Tensor> g, h;  // step t's output gradient [N, G·H] and input [N, H]; undefined if none reached it
  std::vector<Tensor> gx;    // step t's input-projection gradient [N, G·H] (step_input); undefined if none reached it
  Tensor w_t;                // w_hh transposed [H, G·H], contiguous: made at the first step, read by every step
  ops::PackedB w_packed;     // and packed for the steps' GEMMs (ops::pack_b), where the code path packs one
  ops::PackedB w_packed_bw;  // w_hh packed for the backward's dh = g w_hh, at the first backward step
  // an LSTM's gate gradients [N, T, 4H], written step by step by its nodes (lstm_cell_bw), in
  // the backward of walk `gates_epoch`; o_done / written: which steps' o quarter / rows it has
  Tensor gates, gates_done;  // gates_done: the last complete one
  std::uint64_t gates_epoch = 0;
  std::vector<char> o_done, written;
};
// steps [N, G·H] that are the views of acc.gates_done (step t's rows at t·G·H): that layout as
// [N, T, G·H], read in place; else undefined (the steps are laid out by a copy)
Tensor lstm_layout_of(const SequenceGrads& acc, const std::vector<Tensor>& steps, std::int64_t N, std::int64_t GH) {
  const Tensor& L = acc.gates_done;
  if (!L.defined()) return Tensor();
  const std::int64_t T = acc.T;
  for (std::int64_t t = 0; t < T; ++t) {
    const Tensor& g = steps[static_cast<std::size_t>(t)];
    if (!g.defined() || g.storage() != L.storage() || g.offset() != L.offset() + t * GH || g.shape() != Shape{N, GH} ||
        g.strides() != Shape{T * GH, 1})
      return Tensor();
  }
  return L;
}
// w [G·H, H] as the GEMM's row-major B [H, G·H] (the same bits as reading w transposed, numerics §5:
// the order is the shapes'; B's rows contiguous pack faster). Worth its copy over a sequence, not
// for a step or two (a decode step of a served model is one).
constexpr std::int64_t kTransposeFromSteps = 8;
Tensor transposed_copy(const Tensor& w) {
  const Shape s = w.shape(), st = w.strides();  // a view made here, not an op: nothing recorded or traced
  return kern::contiguous(Tensor::view_of(w.detach(), Shape{s[1], s[0]}, Shape{st[1], st[0]}, w.offset()));
}
// B of the recurrent GEMM: the transposed copy if made, else w read transposed
template <class T>
ops::Mat<T> recurrent_b(const Tensor& w_t, const Tensor& wc, std::int64_t H, std::int64_t GH) {
  return w_t.defined() ? ops::row_major(w_t.data<T>(), H, GH) : ops::row_major(wc.data<T>(), H, GH, true);
}
struct ProductSaved {
  std::int64_t t, N, H, GH;
};
// saved: 0 h (contiguous [N, H]), 1 w_hh (contiguous); owned: the layer's SequenceGrads
void recurrent_product_bw(Node& n, const Tensor& g, Tensor* gi) {
  const ProductSaved& s = n.payload<ProductSaved>();
  const std::int64_t N = s.N, H = s.H, GH = s.GH;
  const Tensor& h = n.saved_tensor(0);
  const Tensor& W = n.saved_tensor(1);
  // rows of G·H contiguous (a step's rows of an LSTM's gate layout) are read in place
  Tensor gc = g.strides()[1] == 1 && g.strides()[0] >= GH ? g : kern::contiguous(g);
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "rnn", T, [&] {
    auto& acc = *static_cast<SequenceGrads*>(n.owned.get());
    if (n.in[0].needs_grad()) {
      Tensor dh = Tensor::empty(n.in_shape[0], g.dtype());
      const ops::Mat<T> w = ops::row_major(W.data<T>(), GH, H);
      // w packed once for the sequence's steps (the last step's node runs first)
      if (acc.T >= kTransposeFromSteps && !acc.w_packed_bw.buf.defined()) acc.w_packed_bw = ops::pack_b<T>(N, H, GH, w);
      ops::gemm<T>(N, H, GH, ops::Mat<T>{gc.data<T>(), gc.strides()[0], 1}, w, kern::out_ptr<T>(dh), nullptr, &acc.w_packed_bw);
      gi[0] = dh;
    }
    if (s.t == 0) acc.w_packed_bw = ops::PackedB{};  // the walk's last node: a second backward (retain_graph) packs afresh
    const bool dw = n.in[1].needs_grad(), db = n.n_inputs > 2 && n.in[2].needs_grad();
    if (!dw && !db) return;
    acc.g[static_cast<std::size_t>(s.t)] = gc;
    acc.h[static_cast<std::size_t>(s.t)] = h;
    if (s.t != 0) return;
    // sample-major copies: G [N, T, GH], X [N, T, H] (a step no gradient reached contributes zeros)
    const std::int64_t Ts = acc.T;
    Tensor G = lstm_layout_of(acc, acc.g, N, GH);
    const bool laid_out = G.defined();
    if (!laid_out) G = Ts == 1 ? kern::contiguous(gc) : Tensor::zeros(Shape{N, Ts, GH}, g.dtype());
    Tensor X = Ts == 1 ? h : Tensor::empty(Shape{N, Ts, H}, g.dtype());
    const T *pG = G.data<T>(), *pX = X.data<T>();
    for (std::int64_t t = 0; t < Ts && Ts > 1; ++t) {
      const Tensor& ht = acc.h[static_cast<std::size_t>(t)];
      T* to_x = kern::out_ptr<T>(X);
      // a step no gradient reached kept no input: its rows' gradient is 0, its input rows +0
      if (!ht.defined()) {
        for (std::int64_t i = 0; i < N; ++i) std::fill(to_x + (i * Ts + t) * H, to_x + (i * Ts + t + 1) * H, T(0));
        continue;
      }
      const T* b = ht.data<T>();
      for (std::int64_t i = 0; i < N; ++i) std::copy(b + i * H, b + (i + 1) * H, to_x + (i * Ts + t) * H);
      if (laid_out || !acc.g[static_cast<std::size_t>(t)].defined()) continue;
      const Tensor gt = kern::contiguous(acc.g[static_cast<std::size_t>(t)]);
      const T* a = gt.data<T>();
      T* to_g = kern::out_ptr<T>(G);
      for (std::int64_t i = 0; i < N; ++i) std::copy(a + i * GH, a + (i + 1) * GH, to_g + (i * Ts + t) * GH);
    }
    acc.g.assign(acc.g.size(), Tensor());  // a second backward (retain_graph) starts afresh
    acc.h.assign(acc.h.size(), Tensor());
    // as linear's (§5): one row per sample (T = 1, a cell) is a 2-d input's batch tree over the
    // N rows; several rows per sample a 3-d input's, per sample first, then the batch rule
    if (dw || db) autograd::SampleCountCheck::note("a recurrent layer's weight gradient", N, Shape{N, Ts, H});
    if (dw) {
      Tensor dW = Tensor::empty(n.in_shape[1], g.dtype());
      auto part_dw = [&](std::int64_t r0, std::int64_t R, T* to) {
        ops::gemm<T>(GH, H, R, ops::row_major(pG + r0 * GH, GH, R, true), ops::row_major(pX + r0 * H, R, H), to);
      };
      if (Ts == 1) part_dw(0, N, kern::out_ptr<T>(dW));
      else if (ops::samples_in_one_gemm(Ts, 0))
        ops::gemm_samples<T>(N, GH, H, Ts, {pG, 1, GH}, Ts * GH, {pX, H, 1}, Ts * H, kern::out_ptr<T>(dW));
      else ops::batch_rule_over_samples<T>(N, GH * H, g.dtype(), [&](std::int64_t i, T* part) { part_dw(i * Ts, Ts, part); }, kern::out_ptr<T>(dW));
      gi[1] = dW;
      autograd::SampleCountCheck::summed(dW, N);
    }
    if (db) {
      Tensor dB = Tensor::empty(n.in_shape[2], g.dtype());
      if (Ts == 1) kern::active<T>().sum_cols(pG, N, GH, kern::out_ptr<T>(dB));
      else
        ops::batch_rule_over_samples<T>(N, GH, g.dtype(), [&](std::int64_t i, T* part) { kern::active<T>().sum_cols(pG + i * Ts * GH, Ts, GH, part); },
                                        kern::out_ptr<T>(dB));
      gi[2] = dB;
      autograd::SampleCountCheck::summed(dB, N);
    }
  });
}

Tensor recurrent_product(const Tensor& h, const Tensor& w, const Tensor& b, std::int64_t t, const std::shared_ptr<SequenceGrads>& acc,
                         CallSite site) {
  const std::int64_t N = h.shape()[0], H = h.shape()[1], GH = w.shape()[0];
  Tensor hc = kern::contiguous(h), wc = kern::contiguous(w), bc = b.defined() ? kern::contiguous(b) : Tensor();
  const bool first = !acc->w_t.defined() && acc->T >= kTransposeFromSteps;
  if (first) acc->w_t = transposed_copy(w);
  Tensor y = Tensor::empty(Shape{N, GH}, h.dtype());
  BITGRAD_DISPATCH_FLOAT(h.dtype(), "rnn", T, [&] {
    if (first) acc->w_packed = ops::pack_b<T>(N, GH, H, recurrent_b<T>(acc->w_t, wc, H, GH));
    ops::gemm<T>(N, GH, H, ops::row_major(hc.data<T>(), N, H), recurrent_b<T>(acc->w_t, wc, H, GH), kern::out_ptr<T>(y),
                 bc.defined() ? bc.data<T>() : nullptr, &acc->w_packed);
  });
  Node* n = b.defined() ? ops::record("rnn_hh", recurrent_product_bw, {&h, &w, &b}, y, site)
                        : ops::record("rnn_hh", recurrent_product_bw, {&h, &w}, y, site);
  if (n) {
    n->save(0, hc);
    n->save(1, wc);
    n->set_payload(ProductSaved{t, N, H, GH});
    n->owned = acc;
  }
  return y;
}

// ---- a step's input part: xz_t = xp[:, t, :], a view of the projection xp [N, T, G·H].
// backward: each step's gradient is kept in the layer's record; step 0's (created first, so run
// last) lays them out as xp's gradient, zeros where no gradient reached a step. These are the
// bits of the slices this replaces: each element of xp had T contributions summed by add (its
// step's, +0 from the others), which leaves a value unchanged except -0 (to +0) and NaN (to
// the canonical NaN), so for T >= 2 each value is stored as v + 0. One layout, not T sums of
// [N, T, G·H] zeros.
struct StepSaved {
  std::int64_t t;
};
void step_input_bw(Node& n, const Tensor& g, Tensor* gi) {
  const std::int64_t t = n.payload<StepSaved>().t;
  auto& acc = *static_cast<SequenceGrads*>(n.owned.get());
  acc.gx[static_cast<std::size_t>(t)] = g;
  if (t != 0) return;
  const Shape& xs = n.in_shape[0];
  const std::int64_t N = xs[0], Ts = xs[1], GH = xs[2];
  // an LSTM's gate layout holds every step's gradient in place, each value already v + 0
  if (Tensor L = lstm_layout_of(acc, acc.gx, N, GH); L.defined()) {
    acc.gx.assign(acc.gx.size(), Tensor());
    gi[0] = L;
    return;
  }
  Tensor G = Tensor::zeros(xs, g.dtype());
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "rnn", T, [&] {
    T* to = kern::out_ptr<T>(G);
    for (std::int64_t s = 0; s < Ts; ++s) {
      if (!acc.gx[static_cast<std::size_t>(s)].defined()) continue;
      const Tensor gs = kern::contiguous(acc.gx[static_cast<std::size_t>(s)]);
      const T* from = gs.data<T>();
      for (std::int64_t i = 0; i < N; ++i) {
        T* row = to + (i * Ts + s) * GH;
        const T* src = from + i * GH;
        if (Ts == 1) std::copy(src, src + GH, row);
        else for (std::int64_t j = 0; j < GH; ++j) row[j] = kern::canon(src[j] + T(0));
      }
    }
  });
  acc.gx.assign(acc.gx.size(), Tensor());  // a second backward (retain_graph) starts afresh
  gi[0] = G;
}

Tensor step_input(const Tensor& xp, std::int64_t t, const std::shared_ptr<SequenceGrads>& acc, CallSite site) {
  const std::int64_t N = xp.shape()[0], GH = xp.shape()[2];
  Tensor y = Tensor::view_of(xp, Shape{N, GH}, Shape{xp.strides()[0], xp.strides()[2]}, xp.offset() + t * xp.strides()[1]);
  if (Node* n = ops::record("rnn_x", step_input_bw, {&xp}, y, site)) {
    n->set_payload(StepSaved{t});
    n->owned = acc;
  }
  return y;
}

// One layer's steps share a record of their products' gradients.
std::shared_ptr<SequenceGrads> sequence_grads(std::int64_t T) {
  auto a = std::make_shared<SequenceGrads>();
  a->T = T;
  a->g.resize(static_cast<std::size_t>(T));
  a->h.resize(static_cast<std::size_t>(T));
  a->gx.resize(static_cast<std::size_t>(T));
  return a;
}

// add_b_hh false: without the + b_hh (a layer that records nothing adds it in lstm_gates)
Tensor input_part(RnnMode mode, const Tensor& x, const RnnParams& p, CallSite site, bool add_b_hh = true) {
  Tensor z = linear(x, p.w_ih, p.b_ih, site);
  if (mode != RnnMode::gru && p.b_hh.defined() && add_b_hh) z = add(z, p.b_hh, site);
  return z;
}

// ---- the LSTM step as two nodes over one kernel (lstm_gates), with the composition's bits:
//   cell    c' = f c + i g      inputs xz [N, 4H], hh [N, 4H], c [N, H]; output c' [N, H]
//   hidden  h' = o tanh(c')     inputs c', xz, hh; output h' [N, H]
// Both keep i, f, g, o, tanh(c') [N, 5H]. Each backward computes what the ops' backwards compute
// (lstm_cell_grad, lstm_hidden_grad) and the gates' gradient [N, 4H] goes to xz and hh with each
// value as v + 0: the composition's four slices' gradients were summed with zeros (-0 to +0).
// The hidden node (run first) writes its o quarter, the cell node the i, f, g quarters, into
// step t's rows of one [N, T, 4H] layout shared by the layer, and hands xz and hh that view: one
// gradient each, not two summed, and step 0's input and product nodes read the whole layout
// instead of copying the steps into it. c' keeps its consumers (the hidden node's tanh, the next
// step, c_n), so its gradient is summed as before.
struct LstmKept {
  std::int64_t N, H, t;
};
// step t's rows of this backward's layout; a new backward (another walk epoch) starts a new one
Tensor& lstm_layout(SequenceGrads& acc, const Node& n, std::int64_t N, std::int64_t H, DType dt) {
  if (!acc.gates.defined() || acc.gates_epoch != n.visit) {
    acc.gates = Tensor::empty(Shape{N, acc.T, 4 * H}, dt);
    acc.gates_epoch = n.visit;
    acc.o_done.assign(static_cast<std::size_t>(acc.T), 0);
    acc.written.assign(static_cast<std::size_t>(acc.T), 0);
  }
  return acc.gates;
}
void lstm_cell_bw(Node& n, const Tensor& gc_in, Tensor* gi) {
  const LstmKept kept = n.payload<LstmKept>();
  const std::int64_t N = kept.N, H = kept.H, t = kept.t;  // not a structured binding: lambdas capture them (clang 14)
  auto& acc = *static_cast<SequenceGrads*>(n.owned.get());
  const Tensor& keep = n.saved_tensor(0);
  const Tensor& c = n.saved_tensor(1);
  Tensor gc = kern::contiguous(gc_in);
  Tensor layout = lstm_layout(acc, n, N, H, gc.dtype());
  const std::int64_t ld = acc.T * 4 * H;
  Tensor gcp = n.in[2].needs_grad() ? Tensor::empty(Shape{N, H}, gc.dtype()) : Tensor();
  BITGRAD_DISPATCH_FLOAT(gc.dtype(), "lstm", T, [&] {
    T* z = kern::out_ptr<T>(layout) + t * 4 * H;
    kern::active<T>().lstm_cell_grad(keep.data<T>(), c.data<T>(), gc.data<T>(), N, H, z, ld, gcp.defined() ? kern::out_ptr<T>(gcp) : nullptr);
    if (!acc.o_done[static_cast<std::size_t>(t)])  // no gradient reached h': the o quarter's is +0
      for (std::int64_t r = 0; r < N; ++r) std::fill(z + r * ld + 3 * H, z + r * ld + 4 * H, T(0));
    if (t == 0)  // the last step of the walk: rows no gradient reached are +0
      for (std::int64_t s = 1; s < acc.T; ++s)
        if (!acc.written[static_cast<std::size_t>(s)])
          for (std::int64_t r = 0; r < N; ++r) std::fill(z + r * ld + s * 4 * H, z + r * ld + (s + 1) * 4 * H, T(0));
  });
  acc.written[static_cast<std::size_t>(t)] = 1;
  const Tensor view = Tensor::view_of(layout, Shape{N, 4 * H}, Shape{ld, 1}, t * 4 * H);
  if (t == 0) acc.gates_done = std::move(acc.gates);  // complete: the next backward writes a new one
  if (n.in[0].needs_grad()) gi[0] = view;
  if (n.in[1].needs_grad()) gi[1] = view;
  if (gcp.defined()) gi[2] = gcp;
}
void lstm_hidden_bw(Node& n, const Tensor& gh_in, Tensor* gi) {
  const LstmKept kept = n.payload<LstmKept>();
  const std::int64_t N = kept.N, H = kept.H, t = kept.t;  // not a structured binding: lambdas capture them (clang 14)
  auto& acc = *static_cast<SequenceGrads*>(n.owned.get());
  const Tensor& keep = n.saved_tensor(0);
  Tensor gh = kern::contiguous(gh_in);
  Tensor layout = lstm_layout(acc, n, N, H, gh.dtype());
  Tensor gc = Tensor::empty(Shape{N, H}, gh.dtype());
  BITGRAD_DISPATCH_FLOAT(gh.dtype(), "lstm", T, [&] {
    kern::active<T>().lstm_hidden_grad(keep.data<T>(), gh.data<T>(), N, H, kern::out_ptr<T>(layout) + t * 4 * H + 3 * H, acc.T * 4 * H,
                                       kern::out_ptr<T>(gc));
  });
  acc.o_done[static_cast<std::size_t>(t)] = 1;
  // xz's and hh's gradient goes out from the cell node, the whole [N, 4H] at once
  if (n.in[0].needs_grad()) gi[0] = gc;
}

RnnState lstm_step_recorded(const Tensor& xz, const Tensor& hh, const Tensor& c, std::int64_t t, const std::shared_ptr<SequenceGrads>& acc,
                            CallSite site) {
  const std::int64_t N = hh.shape()[0], H = hh.shape()[1] / 4;
  Tensor cc = kern::contiguous(c);
  Tensor cn = Tensor::empty(Shape{N, H}, hh.dtype()), hn = Tensor::empty(Shape{N, H}, hh.dtype());
  Tensor keep = Tensor::empty(Shape{N, 5 * H}, hh.dtype());
  BITGRAD_DISPATCH_FLOAT(hh.dtype(), "lstm", T, [&] {
    kern::active<T>().lstm_gates(xz.data<T>(), xz.strides()[0], nullptr, hh.data<T>(), cc.data<T>(), N, H, kern::out_ptr<T>(cn),
                                 kern::out_ptr<T>(hn), H, kern::out_ptr<T>(keep));
  });
  if (Node* n = ops::record("lstm_cell_state", lstm_cell_bw, {&xz, &hh, &c}, cn, site)) {
    n->save(0, keep);
    n->save(1, cc);
    n->set_payload(LstmKept{N, H, t});
    n->owned = acc;
  }
  if (Node* n = ops::record("lstm_hidden", lstm_hidden_bw, {&cn, &xz, &hh}, hn, site)) {
    n->save(0, keep);
    n->set_payload(LstmKept{N, H, t});
    n->owned = acc;
  }
  return {hn, cn};
}

// ---- the GRU step as one node over one kernel (gru_gates), with the composition's bits:
//   h' = (h - n) z + n, r, z = sigmoid(xz_q + hh_q), n = tanh(xz_2 + r hh_2)
//   inputs xz [N, 3H], hh [N, 3H] (b_hh added), h [N, H]; output h' [N, H]; keeps r, z, n.
// The backward (gru_grad) computes the ops' backwards: xz and hh get their three parts' gradients
// each as v + 0 (the chunks' gradients summed with zeros), h gets the sub's g*z. The node is
// recorded where the composition's last op was, after the step's recurrent product, so h's
// gradients arrive in the same order (the output's, this step's g*z, the product's).
struct GruKept {
  std::int64_t N, H;
};
void gru_cell_bw(Node& n, const Tensor& g_in, Tensor* gi) {
  const GruKept kept = n.payload<GruKept>();
  const std::int64_t N = kept.N, H = kept.H;  // not a structured binding: lambdas capture them (clang 14)
  Tensor g = kern::contiguous(g_in);
  Tensor gx = Tensor::empty(Shape{N, 3 * H}, g.dtype()), ghh = Tensor::empty(Shape{N, 3 * H}, g.dtype());
  Tensor dh = n.in[2].needs_grad() ? Tensor::empty(Shape{N, H}, g.dtype()) : Tensor();
  BITGRAD_DISPATCH_FLOAT(g.dtype(), "gru", T, [&] {
    kern::active<T>().gru_grad(n.saved_tensor(0).data<T>(), n.saved_tensor(1).data<T>(), n.saved_tensor(2).data<T>(), g.data<T>(), N, H,
                               kern::out_ptr<T>(gx), kern::out_ptr<T>(ghh), dh.defined() ? kern::out_ptr<T>(dh) : nullptr);
  });
  if (n.in[0].needs_grad()) gi[0] = gx;
  if (n.in[1].needs_grad()) gi[1] = ghh;
  if (dh.defined()) gi[2] = dh;
}
Tensor gru_step_recorded(const Tensor& xz, const Tensor& hh, const Tensor& h, CallSite site) {
  const std::int64_t N = hh.shape()[0], H = hh.shape()[1] / 3;
  Tensor hc = kern::contiguous(h);
  Tensor hn = Tensor::empty(Shape{N, H}, hh.dtype()), keep = Tensor::empty(Shape{N, 3 * H}, hh.dtype());
  BITGRAD_DISPATCH_FLOAT(hh.dtype(), "gru", T, [&] {
    kern::active<T>().gru_gates(xz.data<T>(), xz.strides()[0], hh.data<T>(), hc.data<T>(), H, N, H, kern::out_ptr<T>(hn), H,
                                kern::out_ptr<T>(keep));
  });
  if (Node* n = ops::record("gru_cell", gru_cell_bw, {&xz, &hh, &h}, hn, site)) {
    n->save(0, keep);
    n->save(1, hh);
    n->save(2, hc);
    n->set_payload(GruKept{N, H});
  }
  return hn;
}

// xz's rows one stride apart with contiguous gates (a step's view of the projection, or a
// cell's own), and no op hook (which sees the composition's ops one by one)
bool fused_step(const Tensor& xz) {
  return !autograd::op_hook_active() && xz.strides()[1] == 1 && xz.strides()[0] >= xz.shape()[1] && is_floating(xz.dtype());
}

RnnState step(RnnMode mode, const Tensor& xz, const RnnState& s, const RnnParams& p, std::int64_t t,
             const std::shared_ptr<SequenceGrads>& acc, CallSite site) {
  switch (mode) {
    case RnnMode::rnn_tanh: return {tanh(add(xz, recurrent_product(s.h, p.w_hh, Tensor(), t, acc, site), site), site), Tensor()};
    case RnnMode::rnn_relu: return {relu(add(xz, recurrent_product(s.h, p.w_hh, Tensor(), t, acc, site), site), site), Tensor()};
    case RnnMode::lstm: {
      if (fused_step(xz))
        return lstm_step_recorded(xz, recurrent_product(s.h, p.w_hh, Tensor(), t, acc, site), s.c, t, acc, site);
      const std::vector<Tensor> z = chunk(add(xz, recurrent_product(s.h, p.w_hh, Tensor(), t, acc, site), site), 4, 1, site);
      const Tensor i = sigmoid(z[0], site), f = sigmoid(z[1], site), g = tanh(z[2], site), o = sigmoid(z[3], site);
      const Tensor c = add(mul(f, s.c, site), mul(i, g, site), site);
      return {mul(o, tanh(c, site), site), c};
    }
    case RnnMode::gru: {
      if (fused_step(xz)) {
        const Tensor hh = recurrent_product(s.h, p.w_hh, p.b_hh, t, acc, site);
        return {gru_step_recorded(xz, hh, s.h, site), Tensor()};
      }
      const std::vector<Tensor> xg = chunk(xz, 3, 1, site);
      const std::vector<Tensor> hg = chunk(recurrent_product(s.h, p.w_hh, p.b_hh, t, acc, site), 3, 1, site);
      const Tensor r = sigmoid(add(xg[0], hg[0], site), site), z = sigmoid(add(xg[1], hg[1], site), site);
      const Tensor n = tanh(add(xg[2], mul(r, hg[2], site), site), site);
      return {add(mul(sub(s.h, n, site), z, site), n, site), Tensor()};
    }
  }
  return s;
}

RnnState cell(RnnMode mode, const Tensor& x, const Tensor& h, const Tensor& c, const RnnParams& p, CallSite site) {
  const std::string op = std::string(op_of(mode)) + "_cell";
  BITGRAD_CHECK(x.defined() && x.ndim() == 2, op.c_str(), "expects x [N, in], got ", x.defined() ? x.shape().str() : "undefined");
  const std::int64_t H = check_params(mode, p, x.shape()[1], 0);
  check_state(op.c_str(), "h", h, x.shape()[0], H);
  if (mode == RnnMode::lstm) check_state(op.c_str(), "c", c, x.shape()[0], H);
  return step(mode, input_part(mode, x, p, site), {h, c}, p, 0, sequence_grads(1), site);
}

// layer l's initial state from s0 [layers, N, H], or zeros
Tensor initial(RnnMode mode, const char* name, const Tensor& s0, std::size_t l, std::size_t L, std::int64_t N, std::int64_t H, DType dt,
               CallSite site) {
  if (!s0.defined()) return Tensor::zeros(Shape{N, H}, dt);
  const auto Li = static_cast<std::int64_t>(L);
  BITGRAD_CHECK(s0.ndim() == 3 && s0.shape()[0] == Li && s0.shape()[1] == N && s0.shape()[2] == H, op_of(mode), name, " must be [", Li,
                ", ", N, ", ", H, "] (layers, batch, hidden), got ", s0.shape().str());
  const auto li = static_cast<std::int64_t>(l);
  return reshape(slice(s0, 0, li, li + 1, 1, site), Shape{N, H}, site);
}

// An LSTM layer that records nothing (no gradient wanted, no op hook): the recurrent product
// and one lstm_gates kernel per step, the ops' bits (numerics §34) without their tensors.
// xp [N, T, 4H] contiguous, the input part without b_hh, which the kernel adds first (b_hh may
// be undefined); h, c [N, H]; returns the outputs [N, T, H], leaves h, c at step T.
Tensor lstm_unrecorded(const Tensor& xp, const Tensor& w_hh, const Tensor& b_hh, Tensor& h, Tensor& c) {
  const std::int64_t N = xp.shape()[0], T = xp.shape()[1], GH = xp.shape()[2], H = GH / 4;
  Tensor out = Tensor::empty(Shape{N, T, H}, xp.dtype());
  Tensor wc = kern::contiguous(w_hh), wt = T >= kTransposeFromSteps ? transposed_copy(w_hh) : Tensor();
  Tensor h0 = kern::contiguous(h), c0 = kern::contiguous(c), bc = b_hh.defined() ? kern::contiguous(b_hh) : Tensor();
  Tensor hh = Tensor::empty(Shape{N, GH}, xp.dtype());
  Tensor cs[2] = {Tensor::empty(Shape{N, H}, xp.dtype()), Tensor::empty(Shape{N, H}, xp.dtype())};
  BITGRAD_DISPATCH_FLOAT(xp.dtype(), "lstm", T_, [&] {
    T_* po = kern::out_ptr<T_>(out);
    const T_* px = xp.data<T_>();
    const T_* cprev = c0.data<T_>();
    const ops::PackedB wp = wt.defined() ? ops::pack_b<T_>(N, GH, H, recurrent_b<T_>(wt, wc, H, GH)) : ops::PackedB{};
    for (std::int64_t t = 0; t < T; ++t) {
      // h_{t-1}: h0, or the outputs' row of step t - 1
      const ops::Mat<T_> a = t == 0 ? ops::row_major(h0.data<T_>(), N, H) : ops::Mat<T_>{po + (t - 1) * H, T * H, 1};
      ops::gemm<T_>(N, GH, H, a, recurrent_b<T_>(wt, wc, H, GH), kern::out_ptr<T_>(hh), nullptr, &wp);
      T_* cnext = kern::out_ptr<T_>(cs[t % 2]);
      kern::active<T_>().lstm_gates(px + t * GH, T * GH, bc.defined() ? bc.data<T_>() : nullptr, hh.data<T_>(), cprev, N, H, cnext,
                                    po + t * H, T * H, nullptr);
      cprev = cnext;
    }
  });
  c = cs[(T - 1) % 2];
  h = reshape(slice(out, 1, T - 1, T, 1), Shape{N, H}).contiguous_copy();
  return out;
}

// A GRU layer that records nothing: per step the recurrent product with b_hh and one gru_gates
// kernel (numerics §34). xp [N, T, 3H] contiguous; h [N, H]; returns the outputs [N, T, H], leaves h at step T.
Tensor gru_unrecorded(const Tensor& xp, const Tensor& w_hh, const Tensor& b_hh, Tensor& h) {
  const std::int64_t N = xp.shape()[0], T = xp.shape()[1], GH = xp.shape()[2], H = GH / 3;
  Tensor out = Tensor::empty(Shape{N, T, H}, xp.dtype());
  Tensor wc = kern::contiguous(w_hh), wt = T >= kTransposeFromSteps ? transposed_copy(w_hh) : Tensor();
  Tensor bc = b_hh.defined() ? kern::contiguous(b_hh) : Tensor();
  Tensor h0 = kern::contiguous(h);
  Tensor hh = Tensor::empty(Shape{N, GH}, xp.dtype());
  BITGRAD_DISPATCH_FLOAT(xp.dtype(), "gru", T_, [&] {
    T_* po = kern::out_ptr<T_>(out);
    const T_* px = xp.data<T_>();
    const ops::PackedB wp = wt.defined() ? ops::pack_b<T_>(N, GH, H, recurrent_b<T_>(wt, wc, H, GH)) : ops::PackedB{};
    for (std::int64_t t = 0; t < T; ++t) {
      const T_* hp = t == 0 ? h0.data<T_>() : po + (t - 1) * H;
      const std::int64_t ldh = t == 0 ? H : T * H;
      ops::gemm<T_>(N, GH, H, ops::Mat<T_>{hp, ldh, 1}, recurrent_b<T_>(wt, wc, H, GH), kern::out_ptr<T_>(hh),
                    bc.defined() ? bc.data<T_>() : nullptr, &wp);
      kern::active<T_>().gru_gates(px + t * GH, T * GH, hh.data<T_>(), hp, ldh, N, H, po + t * H, T * H, nullptr);
    }
  });
  h = reshape(slice(out, 1, T - 1, T, 1), Shape{N, H}).contiguous_copy();
  return out;
}

bool records(const Tensor& x, const std::vector<RnnParams>& layers, const Tensor& h0, const Tensor& c0) {
  if (autograd::op_hook_active()) return true;
  if (!grad_enabled()) return false;
  bool any = x.requires_grad() || (h0.defined() && h0.requires_grad()) || (c0.defined() && c0.requires_grad());
  for (const RnnParams& p : layers)
    for (const Tensor* t : {&p.w_ih, &p.w_hh, &p.b_ih, &p.b_hh}) any = any || (t->defined() && t->requires_grad());
  return any;
}

}  // namespace

Tensor rnn_cell(const Tensor& x, const Tensor& h, const RnnParams& p, bool relu_act, CallSite site) {
  return cell(relu_act ? RnnMode::rnn_relu : RnnMode::rnn_tanh, x, h, Tensor(), p, site).h;
}
RnnState lstm_cell(const Tensor& x, const Tensor& h, const Tensor& c, const RnnParams& p, CallSite site) {
  return cell(RnnMode::lstm, x, h, c, p, site);
}
Tensor gru_cell(const Tensor& x, const Tensor& h, const RnnParams& p, CallSite site) { return cell(RnnMode::gru, x, h, Tensor(), p, site).h; }

RnnResult rnn(const Tensor& x, RnnMode mode, const std::vector<RnnParams>& layers, const Tensor& h0, const Tensor& c0, bool batch_first,
              CallSite site) {
  const char* op = op_of(mode);
  BITGRAD_CHECK(x.defined() && x.ndim() == 3, op, "expects x ", batch_first ? "[N, T, in]" : "[T, N, in]", ", got ",
                x.defined() ? x.shape().str() : "undefined");
  BITGRAD_CHECK(!layers.empty(), op, "needs at least one layer");
  BITGRAD_CHECK(mode == RnnMode::lstm || !c0.defined(), op, "takes no c0 (only lstm has a cell state)");
  // batch-major [N, T, in]: the input projection's weight gradient then reduces per sample
  // (its rows over time) before the samples (§5), as every batch reduction of bitgrad
  Tensor seq = batch_first ? x : permute(x, {1, 0, 2}, site);
  const std::int64_t N = seq.shape()[0], T = seq.shape()[1];
  BITGRAD_CHECK(T >= 1, op, "the sequence is empty (x ", x.shape().str(), ")");
  std::vector<Tensor> hn, cn;
  std::int64_t H0 = 0;
  const bool fused = (mode == RnnMode::lstm || mode == RnnMode::gru) && is_floating(x.dtype()) && !records(x, layers, h0, c0);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const RnnParams& p = layers[l];
    const std::int64_t H = check_params(mode, p, seq.shape()[2], l);
    if (l == 0) H0 = H;
    BITGRAD_CHECK(H == H0, op, "layer ", l, " has hidden size ", H, "; every layer must have layer 0's, ", H0);
    const Tensor xp = input_part(mode, seq, p, site, !(fused && mode == RnnMode::lstm));  // [N, T, G·H]
    RnnState s{initial(mode, "h0", h0, l, layers.size(), N, H, x.dtype(), site),
               mode == RnnMode::lstm ? initial(mode, "c0", c0, l, layers.size(), N, H, x.dtype(), site) : Tensor()};
    if (fused) {
      if (mode == RnnMode::lstm) {
        seq = lstm_unrecorded(kern::contiguous(xp), p.w_hh, p.b_hh, s.h, s.c);
        cn.push_back(s.c);
      } else {
        seq = gru_unrecorded(kern::contiguous(xp), p.w_hh, p.b_hh, s.h);
      }
      hn.push_back(s.h);
      continue;
    }
    std::vector<Tensor> hs;
    hs.reserve(static_cast<std::size_t>(T));
    const std::shared_ptr<SequenceGrads> acc = sequence_grads(T);
    for (std::int64_t t = 0; t < T; ++t) {
      s = step(mode, step_input(xp, t, acc, site), s, p, t, acc, site);
      hs.push_back(s.h);
    }
    seq = stack(hs, 1, site);  // [N, T, H]
    hn.push_back(s.h);
    if (mode == RnnMode::lstm) cn.push_back(s.c);
  }
  RnnResult r;
  r.output = batch_first ? seq : permute(seq, {1, 0, 2}, site);
  r.h_n = stack(hn, 0, site);
  if (mode == RnnMode::lstm) r.c_n = stack(cn, 0, site);
  return r;
}

}  // namespace bitgrad
