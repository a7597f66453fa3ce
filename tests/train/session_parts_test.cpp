// The step's scopes over the thread's execution state: a PerturbScope gives back the
// perturbation it found (on or off, seed, step, call count), so a scope inside a perturbed
// step (an evaluation) leaves the step as it was.
#include <gtest/gtest.h>

#include <optional>

#include "bitgrad/runtime.hpp"
#include "kernels/kernels.hpp"
#include "train/session_parts.hpp"

namespace {

using namespace bitgrad;

TEST(PerturbScope, GivesBackWhatItFound) {
  ExecContext ctx(1, best_isa());  // a context of its own, so no other test's state is touched
  ExecScope cs(ctx);
  {
    train::PerturbScope step(std::optional<std::uint64_t>(7), 3);
    EXPECT_TRUE(kern::perturbation_active());
    kern::current_backend().perturb.call = 5;  // calls made in the step so far
    {
      train::PerturbScope eval(std::nullopt, -1);
      EXPECT_FALSE(kern::perturbation_active());
      EXPECT_EQ(&kern::active<float>(), &kern::table<float>(best_isa())) << "no perturbation inside";
    }
    const auto& p = kern::current_backend().perturb;
    EXPECT_TRUE(kern::perturbation_active()) << "the step is perturbed again";
    EXPECT_EQ(p.seed, 7u);
    EXPECT_EQ(p.step, 3u);
    EXPECT_EQ(p.call, 5u) << "the step's count of calls where it was";
    EXPECT_EQ(&kern::active<float>(), &kern::perturbed_table_f32());
    {
      train::PerturbScope other(std::optional<std::uint64_t>(11), 4);
      EXPECT_EQ(kern::current_backend().perturb.seed, 11u);
    }
    EXPECT_EQ(kern::current_backend().perturb.seed, 7u);
  }
  EXPECT_FALSE(kern::perturbation_active()) << "off, as it was before the step";
  EXPECT_EQ(&kern::active<float>(), &kern::table<float>(best_isa()));
}

}  // namespace
