// Order perturbation reaches layer norm and the convolution ops through the kernel table
// (numerics.md §19): a perturbed forward and backward gives other bits than the canonical one,
// and the same bits on every code path and thread count.
#include "kernels/kernels.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;

// Forward and backward (f32) with perturbation seed 5 at step 2, or canonical.
Digest128 run_case(const OpCase& c, bool perturb) {
  struct Off {
    ~Off() { kern::set_perturbation(false); }
  } off;
  kern::set_perturbation(perturb, 5);
  kern::perturb_step(2);
  return run_f32(c, make_inputs(c, DType::f32));
}

void expect_perturbed_and_reproducible(const OpCase& c) {
  RuntimeGuard guard;
  set_isa(Isa::scalar);
  set_num_threads(1);
  const Digest128 want = run_case(c, true);
  EXPECT_NE(run_case(c, false).hex(), want.hex()) << c.name() << ": perturbation does not reach it";
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_EQ(want.hex(), run_case(c, true).hex()) << c.name() << " isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

TEST(PerturbOps, LayerNormIsPerturbedAndReproducible) {
  // no other reduction in the forward, so a changed output is layer norm's own
  expect_perturbed_and_reproducible(
      {"layer_norm", {{40, 300}, {300}, {300}}, [](V x) { return layer_norm(x[0], x[1], x[2]); }, -3, 5});
}

TEST(PerturbOps, ConvolutionAndPoolingArePerturbedAndReproducible) {
  // the per-sample GEMMs and col2im are drawn on the training thread, so at any thread count
  expect_perturbed_and_reproducible({"avg_pool2d(max_pool2d(conv2d(pad=1),k=3,s=1),k=3,s=1)",
                                     {{9, 3, 12, 12}, {4, 3, 3, 3}, {4}},
                                     [](V x) { return avg_pool2d(max_pool2d(conv2d(x[0], x[1], x[2], 1, 1), 3, 1), 3, 1); }});
}

}  // namespace
}  // namespace bitgrad::test
