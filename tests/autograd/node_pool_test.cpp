// The node pool and creation numbers per thread (src/autograd/node.cpp, src/ops/op_util.cpp):
// threads that record and free their own graphs never take a shared lock, and a graph built on
// two threads is still walked in a topological order, with the bits of the same graph built on one.
#include <barrier>
#include <thread>
#include <vector>

#include "autograd/node.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

Tensor pool_vec(std::vector<double> v) { return Tensor::from<double>(v, Shape{static_cast<std::int64_t>(v.size())}); }

// A chain of ops on w, its backward, 40 times
void record_and_free(const Tensor& w) {
  for (int r = 0; r < 40; ++r) {
    Tensor h = w;
    for (int i = 0; i < 300; ++i) h = tanh(add(mul(h, 0.5), 0.25));
    (void)autograd::grad(sum(h), Tensor(), {w});
  }
}

TEST(NodePool, ThreadsRecordingTheirOwnGraphsTakeNoSharedLock) {
  const std::size_t live = autograd::live_nodes();
  std::barrier sync(2);
  std::uint64_t before = 0, after = 0;
  auto work = [&](int id) {
    Tensor w = pool_vec({0.1 * id, 0.2, 0.3});
    w.set_requires_grad(true);
    record_and_free(w);  // the thread's list fills (and may draw from the reserve once)
    sync.arrive_and_wait();
    if (id == 0) before = autograd::node_pool_locked_calls();
    sync.arrive_and_wait();
    record_and_free(w);
    sync.arrive_and_wait();
    if (id == 0) after = autograd::node_pool_locked_calls();
  };
  std::thread a(work, 0), b(work, 1);
  a.join();
  b.join();
  EXPECT_EQ(after, before) << "a thread took the node pool's lock while recording and freeing its own graphs";
  EXPECT_EQ(autograd::live_nodes(), live);
}

// y made on one thread, z = g(y) and its backward on a fresh one (whose own count of nodes is far
// below y's): the walk must still run z's nodes before y's, and give the one-thread gradient.
TEST(NodePool, AGraphBuiltOnTwoThreadsIsWalkedInOrder) {
  auto front = [](const Tensor& w) {
    Tensor h = w;
    for (int i = 0; i < 200; ++i) h = tanh(add(mul(h, 0.75), 0.125));
    return h;
  };
  auto back = [](const Tensor& y) { return sum(mul(exp(y), y)); };
  Tensor w1 = pool_vec({0.3, -0.2, 0.9}), w2 = pool_vec({0.3, -0.2, 0.9});
  w1.set_requires_grad(true);
  w2.set_requires_grad(true);
  const std::vector<Tensor> one = autograd::grad(back(front(w1)), Tensor(), {w1});
  Tensor y;
  std::thread ta([&] { y = front(w2); });
  ta.join();
  std::vector<Tensor> two;
  std::thread tb([&] { two = autograd::grad(back(y), Tensor(), {w2}); });
  tb.join();
  ASSERT_EQ(two.size(), 1u);
  EXPECT_TRUE(bitwise_equal(two[0].to_vector<double>(), one[0].to_vector<double>()));
  const std::size_t live = autograd::live_nodes();
  y = Tensor();
  EXPECT_LT(autograd::live_nodes(), live) << "y's graph, made on a thread that has ended, is freed";
}

}  // namespace
}  // namespace bitgrad::test
