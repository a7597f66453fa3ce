// RMSNorm, GroupNorm, InstanceNorm and the recurrent cells and layers:
// gradients (f64 finite differences), determinism (the scalar reference at 1 thread == every
// code path at threads 1, 2, 3, 4, 7, 8), batch invariance (a sample's rows do not depend on the
// batch), micro-batch sums (T5) where numerics.md §33/§34 promise them, semantics and errors.
#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

RnnParams P(V x, std::size_t first) { return RnnParams{x[first], x[first + 1], x[first + 2], x[first + 3]}; }

std::vector<float> raw(const Tensor& t) { return t.to_vector<float>(); }

// f throws a bitgrad::Error whose message starts with "op: " and contains text
template <class F>
void expect_error(F&& f, const std::string& op, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected " << op << ": ... " << text;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind(op + ": ", 0), 0u) << m;
    EXPECT_NE(m.find(text), std::string::npos) << m;
  }
}

TEST(NormOps, Gradients) {
  std::vector<OpCase> cases = {
      {"rms_norm", {{4, 7}}, [](V x) { return rms_norm(x[0]); }},
      {"rms_norm(gamma)", {{3, 2, 5}, {5}}, [](V x) { return rms_norm(x[0], x[1], 1e-3); }},
      {"rms_norm(gamma,axis=-2)", {{3, 2, 5}, {2, 5}}, [](V x) { return rms_norm(x[0], x[1], 1e-5, -2); }},
      {"group_norm(groups=2)", {{3, 4, 5}}, [](V x) { return group_norm(x[0], 2); }},
      {"group_norm(groups=2,affine)", {{2, 4, 3, 2}, {4}, {4}}, [](V x) { return group_norm(x[0], 2, x[1], x[2]); }},
      {"group_norm(groups=1,2d)", {{3, 6}, {6}, {6}}, [](V x) { return group_norm(x[0], 1, x[1], x[2]); }},
      {"instance_norm", {{2, 3, 4}}, [](V x) { return instance_norm(x[0]); }},
      {"instance_norm(affine)", {{2, 3, 2, 3}, {3}, {3}}, [](V x) { return instance_norm(x[0], x[1], x[2], 1e-3); }},
  };
  run_all_modes(cases);
}

TEST(RecurrentOps, Gradients) {
  // N = 3, in = 4, H = 5
  std::vector<OpCase> cases = {
      {"rnn_cell(tanh)", {{3, 4}, {3, 5}, {5, 4}, {5, 5}, {5}, {5}}, [](V x) { return rnn_cell(x[0], x[1], P(x, 2)); }},
      {"rnn_cell(relu)", {{3, 4}, {3, 5}, {5, 4}, {5, 5}, {5}, {5}}, [](V x) { return rnn_cell(x[0], x[1], P(x, 2), true); }},
      {"lstm_cell(h)", {{3, 4}, {3, 5}, {3, 5}, {20, 4}, {20, 5}, {20}, {20}}, [](V x) { return lstm_cell(x[0], x[1], x[2], P(x, 3)).h; }},
      {"lstm_cell(c)", {{3, 4}, {3, 5}, {3, 5}, {20, 4}, {20, 5}, {20}, {20}}, [](V x) { return lstm_cell(x[0], x[1], x[2], P(x, 3)).c; }},
      {"gru_cell", {{3, 4}, {3, 5}, {15, 4}, {15, 5}, {15}, {15}}, [](V x) { return gru_cell(x[0], x[1], P(x, 2)); }},
      {"gru_cell(no bias)", {{3, 4}, {3, 5}, {15, 4}, {15, 5}}, [](V x) { return gru_cell(x[0], x[1], RnnParams{x[2], x[3], {}, {}}); }},
      {"rnn(lstm,2 layers,output)", {{3, 2, 4}, {20, 4}, {20, 5}, {20}, {20}, {20, 5}, {20, 5}, {20}, {20}},
       [](V x) { return rnn(x[0], RnnMode::lstm, {P(x, 1), P(x, 5)}).output; }},
      {"rnn(lstm,h0,c0,batch_first,c_n)", {{2, 3, 4}, {20, 4}, {20, 5}, {20}, {20}, {1, 2, 5}, {1, 2, 5}},
       [](V x) { return rnn(x[0], RnnMode::lstm, {P(x, 1)}, x[5], x[6], true).c_n; }},
      {"rnn(gru,h_n)", {{3, 2, 4}, {15, 4}, {15, 5}, {15}, {15}, {1, 2, 5}},
       [](V x) { return rnn(x[0], RnnMode::gru, {P(x, 1)}, x[5]).h_n; }},
      {"rnn(tanh,2 layers)", {{3, 2, 4}, {5, 4}, {5, 5}, {5}, {5}, {5, 5}, {5, 5}, {5}, {5}},
       [](V x) { return rnn(x[0], RnnMode::rnn_tanh, {P(x, 1), P(x, 5)}).output; }},
  };
  run_all_modes(cases);
}

// Large enough that the kernels under the compositions split over every thread count.
TEST(NormRnnOps, DeterminismSplitOverThreads) {
  std::vector<OpCase> cases = {
      {"rms_norm(gamma)", {{256, 1024}, {1024}}, [](V x) { return rms_norm(x[0], x[1]); }},
      {"group_norm(groups=4,affine)", {{64, 16, 16, 16}, {16}, {16}}, [](V x) { return group_norm(x[0], 4, x[1], x[2]); }},
      {"instance_norm", {{64, 16, 8, 8}}, [](V x) { return instance_norm(x[0]); }},
      {"rnn(lstm,batch_first)", {{64, 3, 64}, {512, 64}, {512, 128}, {512}, {512}},
       [](V x) { return rnn(x[0], RnnMode::lstm, {P(x, 1)}, {}, {}, true).output; }},
      {"rnn(gru,batch_first)", {{64, 3, 64}, {384, 64}, {384, 128}, {384}, {384}},
       [](V x) { return rnn(x[0], RnnMode::gru, {P(x, 1)}, {}, {}, true).output; }},
  };
  check_split_determinism(cases);
}

Tensor rand_f32(const Shape& s, std::uint64_t seed) {
  return Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(s.numel()), seed, -1, 1), s);
}

TEST(NormRnnOps, SamplesDoNotDependOnTheBatch) {
  Tensor x = rand_f32(Shape{64, 8, 5, 3}, 1), g = rand_f32(Shape{8}, 2), b = rand_f32(Shape{8}, 3);
  EXPECT_TRUE(bitwise_equal(raw(slice(group_norm(x, 4, g, b), 0, 32, 64)), raw(group_norm(slice(x, 0, 32, 64), 4, g, b))));
  EXPECT_TRUE(bitwise_equal(raw(slice(instance_norm(x), 0, 5, 6)), raw(instance_norm(slice(x, 0, 5, 6)))));
  Tensor r = rand_f32(Shape{64, 3, 16}, 4), rg = rand_f32(Shape{16}, 5);
  EXPECT_TRUE(bitwise_equal(raw(slice(rms_norm(r, rg), 0, 7, 9)), raw(rms_norm(slice(r, 0, 7, 9), rg))));
  // a sequence batch: x [N, T, in], H = 6
  Tensor s = rand_f32(Shape{40, 5, 4}, 6);
  RnnParams p{rand_f32(Shape{24, 4}, 7), rand_f32(Shape{24, 6}, 8), rand_f32(Shape{24}, 9), rand_f32(Shape{24}, 10)};
  EXPECT_TRUE(bitwise_equal(raw(slice(rnn(s, RnnMode::lstm, {p}, {}, {}, true).output, 0, 3, 4)), raw(rnn(slice(s, 0, 3, 4), RnnMode::lstm, {p}, {}, {}, true).output)));
}

TEST(NormRnnOps, DocumentedCompositions) {
  Tensor x = rand_f32(Shape{4, 6, 5}, 11), g = rand_f32(Shape{6}, 12), b = rand_f32(Shape{6}, 13);
  EXPECT_TRUE(bitwise_equal(raw(instance_norm(x, g, b)), raw(group_norm(x, 6, g, b))));
  // group_norm = layer_norm's rows of [N, G, C/G·S], then * gamma + beta over axis 1
  Tensor ln = reshape(layer_norm(reshape(x, Shape{4, 2, 15}), {}, {}, 1e-5), x.shape());
  EXPECT_TRUE(bitwise_equal(raw(group_norm(x, 2, g, b)), raw(add(mul(ln, reshape(g, Shape{1, 6, 1})), reshape(b, Shape{1, 6, 1})))));
  // rms_norm = (x / sqrt(sum_square / n + eps)) * gamma
  Tensor gl = rand_f32(Shape{5}, 14);
  EXPECT_TRUE(bitwise_equal(raw(rms_norm(x, gl, 1e-4)), raw(mul(div(x, sqrt(add(div(sum_square(x, {2}, true), 5.0), 1e-4))), gl))));
  // one step of a sequence is the cell (same bits), sequence-first and batch-first alike
  Tensor xs = rand_f32(Shape{1, 3, 4}, 15), h0 = rand_f32(Shape{1, 3, 5}, 16), c0 = rand_f32(Shape{1, 3, 5}, 17);
  for (RnnMode m : {RnnMode::rnn_tanh, RnnMode::rnn_relu, RnnMode::lstm, RnnMode::gru}) {
    const std::int64_t G = m == RnnMode::lstm ? 4 : m == RnnMode::gru ? 3 : 1;
    RnnParams p{rand_f32(Shape{G * 5, 4}, 18), rand_f32(Shape{G * 5, 5}, 19), rand_f32(Shape{G * 5}, 20), rand_f32(Shape{G * 5}, 21)};
    const Tensor x2 = reshape(xs, Shape{3, 4}), h2 = reshape(h0, Shape{3, 5}), c2 = reshape(c0, Shape{3, 5});
    const RnnResult r = rnn(xs, m, {p}, h0, m == RnnMode::lstm ? c0 : Tensor());
    Tensor want = m == RnnMode::lstm ? lstm_cell(x2, h2, c2, p).h : m == RnnMode::gru ? gru_cell(x2, h2, p) : rnn_cell(x2, h2, p, m == RnnMode::rnn_relu);
    EXPECT_TRUE(bitwise_equal(raw(reshape(r.output, Shape{3, 5})), raw(want)));
    EXPECT_TRUE(bitwise_equal(raw(reshape(r.h_n, Shape{3, 5})), raw(want)));
    const RnnResult bf = rnn(permute(xs, {1, 0, 2}), m, {p}, h0, m == RnnMode::lstm ? c0 : Tensor(), true);
    EXPECT_TRUE(bitwise_equal(raw(bf.output), raw(permute(r.output, {1, 0, 2}))));
  }
}

// The layer (its step inputs gathered by one node, its no-grad LSTM fused into one kernel a
// step) has the bits of the same equations written with the public ops: outputs, and every
// gradient that does not go through the recurrent product's own reduction (numerics §34) —
// with -0 and +0 in the seed, where a sum of slices' gradients turns -0 into +0.
TEST(NormRnnOps, TheLayerHasItsComposedOpsBits) {
  // 8 x 32: wide enough that the fast paths take the recurrent weight packed once for the
  // sequence (ops::pack_b), which the composition's GEMMs do not
  const std::int64_t shapes[][3] = {{3, 4, 5}, {8, 8, 32}};
  EXPECT_TRUE(best_isa() == Isa::scalar || kern::active<float>().gemm_packing(8, 4 * 32, 32).usable());
  for (const auto& shape : shapes)
  for (RnnMode m : {RnnMode::rnn_tanh, RnnMode::lstm, RnnMode::gru}) {
    const std::int64_t N = shape[0], I = shape[1], H = shape[2];
    for (std::int64_t T : {1, 2, 5, 9})  // 9: the recurrent weight transposed once (from 8 steps)
    for (bool all_negative_zero : {false, true}) {
      if (H > 5 && T != 9) continue;
      const std::int64_t G = m == RnnMode::lstm ? 4 : m == RnnMode::gru ? 3 : 1;
      const bool lstm = m == RnnMode::lstm;
      auto leaves = [&] {
        std::vector<Tensor> v{rand_f32(Shape{N, T, I}, 61), rand_f32(Shape{1, N, H}, 62), rand_f32(Shape{1, N, H}, 63),
                              rand_f32(Shape{G * H, I}, 64),  rand_f32(Shape{G * H, H}, 65), rand_f32(Shape{G * H}, 66),
                              rand_f32(Shape{G * H}, 67)};
        for (Tensor& t : v) t.set_requires_grad(true);
        return v;
      };
      std::vector<float> mv = rand_f32(Shape{N, T, H}, 68).to_vector<float>();
      for (std::size_t i = 0; i < mv.size(); i += 3) mv[i] = i % 2 ? -0.0f : 0.0f;
      if (all_negative_zero) mv.assign(mv.size(), -0.0f);  // every gradient a zero: only their signs can differ
      const Tensor mask = Tensor::from(mv, Shape{N, T, H});
      const Tensor mh = all_negative_zero ? Tensor::full(Shape{1, N, H}, -0.0) : rand_f32(Shape{1, N, H}, 69);
      const Tensor mc = all_negative_zero ? Tensor::full(Shape{1, N, H}, -0.0) : rand_f32(Shape{1, N, H}, 70);
      auto loss = [&](const Tensor& out, const Tensor& hn, const Tensor& cn) {
        Tensor l = add(sum(mul(out, mask)), sum(mul(hn, mh)));
        return lstm ? add(l, sum(mul(cn, mc))) : l;
      };
      // the layer
      std::vector<Tensor> a = leaves();
      const RnnParams pa{a[3], a[4], a[5], a[6]};
      const RnnResult r = rnn(a[0], m, {pa}, a[1], lstm ? a[2] : Tensor(), true);
      loss(r.output, r.h_n, r.c_n).backward();
      // the composition
      std::vector<Tensor> b = leaves();
      Tensor xp = linear(b[0], b[3], b[5]);
      if (m != RnnMode::gru) xp = add(xp, b[6]);
      Tensor h = reshape(slice(b[1], 0, 0, 1), Shape{N, H}), c = reshape(slice(b[2], 0, 0, 1), Shape{N, H});
      std::vector<Tensor> hs;
      for (std::int64_t t = 0; t < T; ++t) {
        const Tensor xz = reshape(slice(xp, 1, t, t + 1), Shape{N, G * H});
        if (m == RnnMode::rnn_tanh) {
          h = tanh(add(xz, linear(h, b[4], Tensor())));
        } else if (lstm) {
          const std::vector<Tensor> z = chunk(add(xz, linear(h, b[4], Tensor())), 4, 1);
          c = add(mul(sigmoid(z[1]), c), mul(sigmoid(z[0]), tanh(z[2])));
          h = mul(sigmoid(z[3]), tanh(c));
        } else {
          const std::vector<Tensor> xg = chunk(xz, 3, 1), hg = chunk(linear(h, b[4], b[6]), 3, 1);
          const Tensor rr = sigmoid(add(xg[0], hg[0])), zz = sigmoid(add(xg[1], hg[1]));
          const Tensor nn = tanh(add(xg[2], mul(rr, hg[2])));
          h = add(mul(sub(h, nn), zz), nn);
        }
        hs.push_back(h);
      }
      const Tensor out = stack(hs, 1), hn = stack({h}, 0), cn = lstm ? stack({c}, 0) : Tensor();
      loss(out, hn, cn).backward();
      const std::string what = std::string(m == RnnMode::lstm ? "lstm" : m == RnnMode::gru ? "gru" : "rnn") + " T=" + std::to_string(T) +
                               (all_negative_zero ? " seed -0" : "");
      EXPECT_TRUE(bitwise_equal(raw(r.output), raw(out))) << what;
      if (lstm) {
        EXPECT_TRUE(bitwise_equal(raw(r.c_n), raw(cn))) << what;
      }
      const char* names[] = {"x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"};
      for (std::size_t i : {0, 1, 2, 3, 5, 6}) {
        if (i == 2 && !lstm) continue;
        if (i == 6 && m == RnnMode::gru) continue;  // the recurrent product's bias: its own reduction
        EXPECT_TRUE(bitwise_equal(raw(a[i].grad()), raw(b[i].grad()))) << what << " grad " << names[i];
      }
      // without gradients (the LSTM's fused steps)
      NoGradGuard ng;
      const RnnResult q = rnn(a[0], m, {pa}, a[1], lstm ? a[2] : Tensor(), true);
      EXPECT_TRUE(bitwise_equal(raw(q.output), raw(out))) << what << " no grad";
      EXPECT_TRUE(bitwise_equal(raw(q.h_n), raw(hn))) << what << " no grad";
      if (lstm) {
        EXPECT_TRUE(bitwise_equal(raw(q.c_n), raw(cn))) << what << " no grad";
      }
    }
  }
}

// The LSTM and GRU layers' fused steps (the LSTM's writing its gate gradients into one
// [N, T, 4H] layout that the input projection and the recurrent weight read in place). With an
// op hook the layer runs the ops one by one (each step's gradients laid out by copies): every
// gradient, the recurrent weight's and bias's included, has the same bits, for a loss on every
// output, on c_n alone (no gradient reaches the LSTM's last h'), on h_n alone, and over two
// backwards of one graph.
TEST(NormRnnOps, FusedStepsHaveTheOpByOpBits) {
  const std::int64_t N = 3, I = 4, H = 5;
  struct Hook {
    static void ignore(void*, const autograd::OpEvent&) {}
  };
  for (RnnMode m : {RnnMode::lstm, RnnMode::gru})
  for (std::int64_t T : {1, 3, 9})
    for (int which : {0, 1, 2, 3}) {  // all outputs; c_n; h_n; all, backward twice
      const bool lstm = m == RnnMode::lstm;
      const std::int64_t G = lstm ? 4 : 3;
      if (which == 1 && !lstm) continue;
      auto run = [&](bool hooked) {
        std::vector<Tensor> v{rand_f32(Shape{N, T, I}, 71), rand_f32(Shape{1, N, H}, 72), rand_f32(Shape{1, N, H}, 73),
                              rand_f32(Shape{G * H, I}, 74),  rand_f32(Shape{G * H, H}, 75), rand_f32(Shape{G * H}, 76),
                              rand_f32(Shape{G * H}, 77)};
        for (Tensor& t : v) t.set_requires_grad(true);
        if (!lstm) v[2].set_requires_grad(false);
        if (hooked) autograd::set_op_hook(&Hook::ignore, nullptr);
        const RnnResult r = rnn(v[0], m, {RnnParams{v[3], v[4], v[5], v[6]}}, v[1], lstm ? v[2] : Tensor(), true);
        const Tensor mo = rand_f32(Shape{N, T, H}, 78), ms = rand_f32(Shape{1, N, H}, 79);
        const Tensor last = lstm ? r.c_n : r.h_n;
        Tensor l = which == 1 ? sum(mul(r.c_n, ms)) : which == 2 ? sum(mul(r.h_n, ms)) : add(sum(mul(r.output, mo)), sum(mul(last, ms)));
        l.backward(Tensor(), which == 3);
        if (which == 3) l.backward();
        autograd::set_op_hook(nullptr, nullptr);
        return v;
      };
      const std::vector<Tensor> fused = run(false), by_op = run(true);
      const char* names[] = {"x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"};
      for (std::size_t i = 0; i < fused.size(); ++i) {
        if (i == 2 && !lstm) continue;
        EXPECT_TRUE(bitwise_equal(raw(fused[i].grad()), raw(by_op[i].grad())))
            << (lstm ? "lstm" : "gru") << " T=" << T << " loss " << which << " grad " << names[i];
      }
    }
}

// T5: the affine and the recurrent layers' gradients reduce per sample, then by the batch rule,
// so two micro-batches of 32 samples add up to the whole batch's bits.
TEST(NormRnnOps, MicroBatchesCombineToTheWholeBatch) {
  auto halves = [](const Tensor& x, Tensor param, const std::function<Tensor(const Tensor&)>& f) {
    auto grad_of = [&](std::int64_t a, std::int64_t b) {
      param.zero_grad();
      sum(f(slice(x, 0, a, b))).backward();
      return param.grad().contiguous_copy();
    };
    const Tensor whole = grad_of(0, 64), first = grad_of(0, 32), second = grad_of(32, 64);
    EXPECT_TRUE(bitwise_equal(raw(whole), raw(add(first, second))));
  };
  Tensor x = rand_f32(Shape{64, 8, 3, 3}, 31), g = rand_f32(Shape{8}, 32), b = rand_f32(Shape{8}, 33);
  g.set_requires_grad(true);
  b.set_requires_grad(true);
  halves(x, g, [&](const Tensor& v) { return group_norm(v, 2, g, b); });
  halves(x, b, [&](const Tensor& v) { return group_norm(v, 2, g, b); });
  Tensor r = rand_f32(Shape{64, 5, 16}, 34), rg = rand_f32(Shape{16}, 35);
  rg.set_requires_grad(true);
  halves(r, rg, [&](const Tensor& v) { return rms_norm(v, rg); });
  Tensor s = rand_f32(Shape{64, 4, 6}, 36);
  RnnParams p{rand_f32(Shape{28, 6}, 37), rand_f32(Shape{28, 7}, 38), rand_f32(Shape{28}, 39), rand_f32(Shape{28}, 40)};
  for (Tensor* t : {&p.w_ih, &p.w_hh, &p.b_ih, &p.b_hh}) t->set_requires_grad(true);
  auto lstm_out = [&](const Tensor& v) { return rnn(v, RnnMode::lstm, {p}, {}, {}, true).output; };
  halves(s, p.w_ih, lstm_out);
  halves(s, p.b_ih, lstm_out);
  halves(s, p.b_hh, lstm_out);  // folded into the input projection (numerics §34)
  halves(s, p.w_hh, lstm_out);  // the recurrent product's gradient: per sample over the steps
  RnnParams q{rand_f32(Shape{21, 6}, 41), rand_f32(Shape{21, 7}, 42), rand_f32(Shape{21}, 43), rand_f32(Shape{21}, 44)};
  for (Tensor* t : {&q.w_ih, &q.w_hh, &q.b_ih, &q.b_hh}) t->set_requires_grad(true);
  auto gru_out = [&](const Tensor& v) { return rnn(v, RnnMode::gru, {q}, {}, {}, true).output; };
  halves(s, q.w_hh, gru_out);
  halves(s, q.b_hh, gru_out);
  // one step (a cell's rule: one row per sample, the batch tree over the rows)
  Tensor xh = rand_f32(Shape{64, 13}, 45);  // a sample's x [6] and h [7] side by side
  auto cell_out = [&](const Tensor& v) { return gru_cell(slice(v, 1, 0, 6), slice(v, 1, 6, 13), q); };
  halves(xh, q.w_hh, cell_out);
  halves(xh, q.b_hh, cell_out);}

TEST(NormRnnOps, Errors) {
  Tensor x = rand_f32(Shape{2, 6, 3}, 41);
  expect_error([&] { group_norm(x, 4); }, "group_norm", "num_groups 4 must divide the 6 channels");
  expect_error([&] { group_norm(x, 3, rand_f32(Shape{3}, 1)); }, "group_norm", "gamma and beta must be [6]");
  expect_error([&] { instance_norm(rand_f32(Shape{2, 6}, 1)); }, "instance_norm", "expects x [N, C, D1, ...]");
  expect_error([&] { rms_norm(x, rand_f32(Shape{6}, 1)); }, "rms_norm", "gamma must be [3]");
  expect_error([&] { rms_norm(x, Tensor(), 1e-5, 3); }, "rms_norm", "axis 3 is out of range");
  RnnParams p{rand_f32(Shape{20, 3}, 1), rand_f32(Shape{20, 5}, 2), Tensor(), Tensor()};
  expect_error([&] { rnn(x, RnnMode::gru, {p}); }, "gru", "w_hh must be [3*H, H]");
  expect_error([&] { rnn(x, RnnMode::lstm, {RnnParams{rand_f32(Shape{20, 4}, 1), p.w_hh, {}, {}}}); }, "lstm", "w_ih must be [20, 3]");
  expect_error([&] { rnn(x, RnnMode::lstm, {p}, rand_f32(Shape{2, 6, 5}, 3)); }, "lstm", "h0 must be [1, 6, 5]");
  expect_error([&] { lstm_cell(rand_f32(Shape{6, 3}, 1), rand_f32(Shape{6, 5}, 2), Tensor(), p); }, "lstm_cell", "c must be [6, 5]");
  expect_error([&] { rnn(x, RnnMode::lstm, {RnnParams{p.w_ih, p.w_hh, rand_f32(Shape{20}, 3), Tensor()}}); }, "lstm", "b_ih and b_hh go together");
}

}  // namespace
}  // namespace bitgrad::test
