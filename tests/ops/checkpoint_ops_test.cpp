// Activation checkpointing (contract T9): the op's gradients by finite differences (f64, the
// shared harness), and checkpointed segments giving the bits of the same segments run directly
// (output and every gradient) on every code path and thread count: attention with dropout, a
// transformer block, nested checkpoints, a parameter used twice inside a segment.
#include "bitgrad/nn.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

Tensor attention_block(const Tensor& x, V w, double p) {
  nn::Context ctx{true, 9, 4, 3};  // training: dropout keyed by (seed 9, step 4), rows from sample 3
  return nn::causal_self_attention(x, w[1], w[2], w[3], w[4], 3, p, 0, ctx);
}
std::vector<Tensor> rest(V x) { return std::vector<Tensor>(x.begin() + 1, x.end()); }

// a segment that uses its weight twice and its input three times
Tensor twice(const Tensor& h, const Tensor& w) { return add(tanh(matmul(h, w)), mul(gelu(matmul(h, w)), h)); }

struct Pair {
  OpCase direct, checkpointed;
};

std::vector<Pair> pairs() {
  const std::vector<Shape> att = {{2, 4, 6}, {18, 6}, {18}, {6, 6}, {6}};
  const std::vector<Shape> sq = {{3, 5, 5}, {5, 5}};
  return {
      {{"attention(dropout=0.3)", att, [](V x) { return attention_block(x[0], x, 0.3); }},
       {"checkpoint(attention,dropout=0.3)", att,
        [](V x) { return checkpoint([x](const Tensor& h) { return attention_block(h, x, 0.3); }, x[0], rest(x)); }}},
      {{"twice", sq, [](V x) { return twice(x[0], x[1]); }},
       {"checkpoint(twice)", sq, [](V x) { return checkpoint([w = x[1]](const Tensor& h) { return twice(h, w); }, x[0], {x[1]}); }}},
      {{"twice(twice)", sq, [](V x) { return twice(twice(x[0], x[1]), x[1]); }},
       {"checkpoint(checkpoint(twice),twice)", sq, [](V x) {
          const Tensor w = x[1];
          return checkpoint(
              [w](const Tensor& h) { return twice(checkpoint([w](const Tensor& u) { return twice(u, w); }, h, {w}), w); }, x[0], {w});
        }}},
  };
}

TEST(Checkpoint, GradientsByFiniteDifferences) {
  std::vector<OpCase> cases;
  for (const Pair& p : pairs()) cases.push_back(p.checkpointed);
  run_all_modes(cases);
}

TEST(Checkpoint, HasTheBitsOfTheSegmentRunDirectly) {
  RuntimeGuard guard;
  for (const Pair& p : pairs()) {
    const std::vector<Tensor> inputs = make_inputs(p.direct, DType::f32);
    for (Isa isa : isas()) {
      set_isa(isa);
      for (int t : {1, 3}) {
        set_num_threads(t);
        EXPECT_EQ(run_f32(p.direct, inputs).hex(), run_f32(p.checkpointed, inputs).hex())
            << p.checkpointed.name() << " isa=" << isa_name(isa) << " threads=" << t;
      }
    }
  }
}

TEST(Checkpoint, ATransformerBlockKeepsOnlyItsInput) {
  // dropout inside: the recomputed forward draws the same masks from the same keys
  nn::TransformerBlock block(16, 2, 0.2, true, 2, 0);
  nn::initialize(block, nn::Init::gpt2, 3);
  const nn::Context ctx{true, 5, 7, 0};
  auto run = [&](bool ckpt, std::size_t* kept) {
    for (Tensor& p : block.parameters()) p.set_grad(Tensor());
    Tensor x = Tensor::from<double>(random_vec<double>(4 * 8 * 16, 41, -1, 1), Shape{4, 8, 16}).cast(DType::f32);
    x.set_requires_grad(true);
    const std::size_t before = memory::bytes_in_use();
    Tensor y = ckpt ? checkpoint([&](const Tensor& h) { return block.forward(h, ctx); }, x, block.parameters()) : block.forward(x, ctx);
    *kept = memory::bytes_in_use() - before;
    sum(mul(y, y)).backward();
    Fingerprint fp;
    fp.add(y);
    fp.add(x.grad());
    for (const Tensor& p : block.parameters()) fp.add(p.grad());
    return fp.digest().hex();
  };
  std::size_t kept_direct = 0, kept_ckpt = 0;
  const std::string direct = run(false, &kept_direct);
  EXPECT_EQ(run(true, &kept_ckpt), direct);
  // what the forward leaves alive: the output (and the saved input) against every activation
  EXPECT_LT(kept_ckpt * 4, kept_direct) << "checkpointed " << kept_ckpt << " bytes, direct " << kept_direct;
}

TEST(Checkpoint, AParameterMissingFromTheListIsAnError) {
  Tensor x = Tensor::from<double>({1, 2, 3, 4}, Shape{2, 2});
  Tensor w = Tensor::from<double>({1, 0, 0, 1}, Shape{2, 2});
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  Tensor y = checkpoint([w](const Tensor& h) { return matmul(h, w); }, x, {});
  EXPECT_THROW_MSG(sum(y).backward(), "checkpoint: the segment uses a tensor of shape [2, 2] that requires grad but is neither its input");
  EXPECT_THROW_MSG(checkpoint({}, x, {}), "checkpoint: the segment function is empty");
}

}  // namespace
}  // namespace bitgrad::test
