// The step tracer's group hashes: however the work is cut (slices of any size, then the rest
// side by side on any number of threads), every group's digest is fingerprint(group).
#include "instruments/group_hasher.hpp"

#include "bitgrad/runtime.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::vector<std::vector<Tensor>> some_groups() {
  auto f32 = [](std::int64_t n, std::uint64_t seed) { return Tensor::from<float>(random_vec<float>(static_cast<std::size_t>(n), seed), Shape{n}); };
  std::vector<std::int64_t> ids(37);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 7919 % 10);
  return {
      {Tensor::from<float>(random_vec<float>(6 * 29, 1), Shape{6, 29}), Tensor::from<std::int64_t>(ids, Shape{37})},
      {},                                          // a parameter without a gradient
      {f32(40001, 2)},                             // large, odd length
      {f32(0, 3)},                                 // no elements: the header alone
      {f32(1, 4), f32(3, 5), f32(70000, 6)},       // several tensors in one stream
      {Tensor::from<double>(random_vec<double>(513, 7), Shape{3, 171})},
  };
}

std::vector<Digest128> expected(const std::vector<std::vector<Tensor>>& groups) {
  std::vector<Digest128> d;
  for (const auto& g : groups) d.push_back(fingerprint(g));
  return d;
}

TEST(GroupHasher, SlicesAloneGiveEveryGroupItsFingerprint) {
  const auto groups = some_groups();
  for (std::size_t budget : {std::size_t{1} << 30, std::size_t{65536}, std::size_t{4096}, std::size_t{7}}) {
    instruments::GroupHasher h(groups);
    while (h.advance(budget)) {
    }
    EXPECT_TRUE(h.done());
    EXPECT_EQ(h.digests(), expected(groups)) << "budget " << budget;
  }
}

TEST(GroupHasher, AnyNumberOfSlicesThenTheThreadsGiveTheSameDigests) {
  RuntimeGuard guard;
  const auto groups = some_groups();
  const auto want = expected(groups);
  for (int threads : thread_counts()) {
    set_num_threads(threads);
    // stop the slices at every kind of place: before anything, inside a header-only group,
    // inside a tensor, between the tensors of a group, at the last byte
    for (std::size_t budget : {std::size_t{1}, std::size_t{13}, std::size_t{4096}, std::size_t{65536}, std::size_t{160004}})
      for (int slices : {0, 1, 2, 5}) {
        instruments::GroupHasher h(groups);
        for (int i = 0; i < slices; ++i) h.advance(budget);
        h.finish_parallel();
        EXPECT_TRUE(h.done());
        EXPECT_EQ(h.digests(), want) << threads << " threads, " << slices << " slices of " << budget << " bytes";
      }
  }
}

TEST(GroupHasher, NoGroupsIsDoneAtOnce) {
  instruments::GroupHasher h({});
  EXPECT_FALSE(h.advance(100));
  h.finish_parallel();
  EXPECT_TRUE(h.done());
  EXPECT_TRUE(h.digests().empty());
}

}  // namespace
}  // namespace bitgrad::test
