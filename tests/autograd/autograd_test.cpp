// Autograd semantics: accumulation order, graph lifetime, misuse errors, no_grad, detach.
#include <atomic>
#include <bit>
#include <thread>
#include <vector>

#include "autograd/node.hpp"
#include "ops/op_util.hpp"
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

Tensor vec(std::vector<double> v) { return Tensor::from<double>(v, Shape{static_cast<std::int64_t>(v.size())}); }

TEST(Autograd, ContributionsAddInReverseCreationOrder) {
  // x feeds three consumers created in order a, b, c: grad = (c' + b') + a'
  Tensor x = Tensor::from<float>(std::vector<float>{1.0f}, Shape{1});
  x.set_requires_grad(true);
  const float ka = 1.0f, kb = 1e8f, kc = -1e8f;
  Tensor a = mul(x, static_cast<double>(ka));
  Tensor b = mul(x, static_cast<double>(kb));
  Tensor c = mul(x, static_cast<double>(kc));
  Tensor y = add(add(a, b), c);
  y.backward(Tensor::ones({1}));
  const float want = (kc + kb) + ka;  // (-1e8 + 1e8) + 1 = 1, while (1 + 1e8) - 1e8 = 0 in f32
  EXPECT_EQ(std::bit_cast<std::uint32_t>(want), std::bit_cast<std::uint32_t>(x.grad().to_vector<float>()[0]));
  EXPECT_NE(want, (ka + kb) + kc) << "the test must be able to tell the orders apart";
}

TEST(Autograd, GradReturnsWhatBackwardWouldAccumulateAndTouchesNoGrad) {
  // x used three times, w once; grad() sums in backward's order and leaves .grad alone
  auto make = [](Tensor& x, Tensor& w) {
    x = Tensor::from<float>(std::vector<float>{0.3f, -1.7f, 2.1f}, Shape{3});
    w = Tensor::from<float>(std::vector<float>{1.1f, 0.9f, -0.4f}, Shape{3});
    x.set_requires_grad(true);
    w.set_requires_grad(true);
    return sum(add(mul(mul(x, x), w), exp(x)));
  };
  Tensor x, w;
  make(x, w).backward();
  const std::vector<float> gx = x.grad().to_vector<float>(), gw = w.grad().to_vector<float>();
  Tensor x2, w2;
  Tensor y = make(x2, w2);
  Tensor unused = Tensor::from<float>(std::vector<float>{1.0f}, Shape{1});
  std::string unlisted;
  const std::vector<Tensor> g = autograd::grad(y, Tensor(), {x2, unused}, false, &unlisted);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(bitwise_equal(g[0].to_vector<float>(), gx));
  EXPECT_FALSE(g[1].defined());
  EXPECT_EQ(unlisted, "[3]");  // w got a gradient but was not asked for
  EXPECT_FALSE(x2.grad().defined());
  EXPECT_FALSE(w2.grad().defined());
  // every part, unsummed, in arrival order: three for x (the product twice, then exp), one for w
  Tensor x3, w3;
  Tensor y3 = make(x3, w3);
  const auto parts = autograd::grad_parts(y3, Tensor(), {x3, w3}, nullptr);
  EXPECT_EQ(parts[0].size(), 3u);
  EXPECT_EQ(parts[1].size(), 1u);
  EXPECT_TRUE(bitwise_equal(parts[1][0].to_vector<float>(), gw));
}

TEST(Autograd, LeafGradientsAccumulateAcrossCalls) {
  Tensor x = vec({1, 2, 3});
  x.set_requires_grad(true);
  sum(mul(x, x)).backward();
  sum(mul(x, 3.0)).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 7, 9}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, BackwardTwiceNeedsRetainGraph) {
  Tensor x = vec({1, 2});
  x.set_requires_grad(true);
  Tensor y = sum(exp(x));
  y.backward(Tensor(), true);
  y.backward();  // allowed: the first call retained the graph
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already freed by an earlier backward"), std::string::npos) << e.what();
  }
}

TEST(Autograd, MisuseErrors) {
  Tensor x = vec({1, 2});
  EXPECT_THROW(sum(x).backward(), Error) << "no input requires grad";
  x.set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  try {
    y.backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a scalar: pass a seed gradient"), std::string::npos) << e.what();
  }
  EXPECT_THROW(y.backward(Tensor::ones({3}, DType::f64)), Error) << "seed of the wrong shape";
  EXPECT_THROW(y.set_requires_grad(false), Error) << "only leaves change requires_grad";
  EXPECT_THROW(Tensor::zeros({2}, DType::i64).set_requires_grad(true), Error);
  EXPECT_THROW(Tensor().backward(), Error);
}

TEST(Autograd, NoGradAndDetach) {
  Tensor x = vec({1, 2});
  x.set_requires_grad(true);
  {
    NoGradGuard ng;
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
  }
  Tensor z = mul(x, 2.0);
  EXPECT_TRUE(z.requires_grad());
  EXPECT_STREQ(autograd::producer(z), "mul");
  Tensor d = z.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.storage().get(), z.storage().get());
  Tensor w = add(mul(d, 3.0), x);
  sum(w).backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 1})) << "nothing flows through the detached path";
}

TEST(Autograd, InPlaceModificationOfASavedTensorIsAnError) {
  Tensor x = vec({1, 2});
  x.set_requires_grad(true);
  Tensor w = vec({3, 4});
  w.set_requires_grad(true);
  Tensor y = sum(mul(x, w));
  w.mutable_data<double>()[0] = 5;  // an optimizer step before backward, say
  try {
    y.backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place after it was saved"), std::string::npos) << e.what();
  }
}

TEST(Autograd, NonScalarSeedAndRequiresGradPropagation) {
  Tensor x = vec({1, 2, 3});
  x.set_requires_grad(true);
  Tensor c = vec({1, 1, 1});
  Tensor y = add(mul(x, x), c);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(mul(c, c).requires_grad());
  y.backward(vec({1, 0, 2}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 0, 12}));
}

TEST(Autograd, PayloadIsTypedAndCleared) {
  struct A {
    std::int64_t k;
  };
  struct B {
    double v;
  };
  autograd::NodePtr n(autograd::allocate_node());
  n->op = "test_op";
  n->set_payload(A{7});
  EXPECT_EQ(n->payload<A>().k, 7);
  try {
    (void)n->payload<B>();
    FAIL() << "reading another type must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test_op"), std::string::npos) << e.what();
  }
  autograd::reset_node(n.get());
  EXPECT_THROW((void)n->payload<A>(), Error) << "reset drops the payload";
}

TEST(Autograd, GraphsAreFreed) {
  const std::size_t before = autograd::live_nodes();
  {
    Tensor x = vec({1, 2, 3});
    x.set_requires_grad(true);
    Tensor h = x;
    for (int i = 0; i < 20000; ++i) h = add(h, 1.0);  // a long chain: freed without deep recursion
    sum(h).backward();
  }
  {
    Tensor x = vec({1});
    x.set_requires_grad(true);
    Tensor unused = exp(mul(x, 2.0));  // never backpropagated
  }
  EXPECT_EQ(autograd::live_nodes(), before);
}

// A pass-through node whose backward throws while `g_throw` is set.
bool g_throw = false;
void throwing_bw(autograd::Node&, const Tensor& g, Tensor* gi) {
  if (g_throw) throw std::runtime_error("planted");
  gi[0] = g;
}
Tensor pass_through(const Tensor& a) {
  Tensor y = Tensor::view_of(a, a.shape(), a.strides(), a.offset());
  ops::record("pass_through", throwing_bw, {&a}, y, CallSite::current());
  return y;
}

TEST(Autograd, ABackwardThatThrowsLeavesNothingForTheNextWalk) {
  // y = pass(a) + a with a = x * 3: y's backward hands a its gradient, then pass's throws with
  // a's gradient still waiting in a's node (and slices' parts waiting in s's). Walking the
  // retained graph again must give what a fresh graph gives, not add onto what waited.
  auto build = [](Tensor& x) {
    x = Tensor::from<float>(std::vector<float>{0.5f, -2.0f, 4.0f, 1.5f}, Shape{4});
    x.set_requires_grad(true);
    Tensor a = mul(x, 3.0);
    Tensor s = mul(x, 5.0);
    return add(add(pass_through(a), a), concat({slice(s, 0, 2, 4), slice(s, 0, 0, 2)}, 0));
  };
  Tensor x0;
  build(x0).backward(Tensor::ones({4}));
  const std::vector<float> want = x0.grad().to_vector<float>();
  Tensor x;
  Tensor y = build(x);
  g_throw = true;
  EXPECT_THROW(y.backward(Tensor::ones({4}), true), std::runtime_error);
  g_throw = false;
  EXPECT_FALSE(x.grad().defined());
  y.backward(Tensor::ones({4}));
  EXPECT_TRUE(bitwise_equal(x.grad().to_vector<float>(), want));
}

TEST(Autograd, LeafGradientOwnsItsStorage) {
  Tensor a = vec({1, 2}), b = vec({3, 4});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  sum(add(a, b)).backward();
  EXPECT_NE(a.grad().storage().get(), b.grad().storage().get());
}

TEST(Autograd, SampleCountCheckNamesTheSumThatTookOtherSamples) {
  // a piece of 4 samples; linear over [4, 3, 5] sums the 4 samples (the batch rule), over
  // its sequence-first [3, 4, 5] it sums 3 leading entries as samples: the check names that sum
  Tensor w = Tensor::full(Shape{2, 5}, 0.25);
  w.set_requires_grad(true);
  auto run = [&](const Shape& s) {
    Tensor loss = sum(linear(Tensor::full(s, 0.5), w));  // the forward's own sum is not the backward's
    autograd::SampleCountCheck check(4);
    loss.backward();
    w.set_grad(Tensor());
    return check.mismatch();
  };
  EXPECT_EQ(run(Shape{4, 3, 5}), "");
  EXPECT_EQ(run(Shape{3, 4, 5}), "linear's weight gradient summed 3 leading entries of [3, 4, 5] as samples, but the piece has 4 (its samples "
                                 "are not on axis 0 there)");
  EXPECT_EQ(run(Shape{12, 5}).substr(0, 40), "linear's weight gradient summed 12 leadi");  // [T·N, D]: every row a sample
  // nested: the inner check sees its own piece, the outer one nothing while the inner is installed
  Tensor loss = sum(linear(Tensor::full(Shape{3, 4, 5}, 0.5), w));
  autograd::SampleCountCheck outer(4);
  {
    autograd::SampleCountCheck inner(3);
    loss.backward();
    EXPECT_EQ(inner.mismatch(), "");
  }
  EXPECT_EQ(outer.mismatch(), "");
  w.set_grad(Tensor());
}

TEST(AutogradThreads, BackwardFromSeveralThreadsAddsEveryContributionOnce) {
  // four threads' backward(retain_graph) on one graph added 4-7 times, and graphs sharing
  // a leaf lost a contribution. One graph is walked by one thread at a time (another is refused
  // with a StateError, adding nothing); graphs of their own run side by side, and their additions
  // into the shared leaf are each made once (TSan runs this suite)
  Tensor x = Tensor::full(Shape{64}, 1.5);
  x.set_requires_grad(true);
  Tensor shared = sum(mul(x, 2.0));  // d/dx = 2, exact in every sum below
  constexpr int kThreads = 4, kRounds = 50;
  std::atomic<int> done{0}, refused{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) {
        try {
          shared.backward(Tensor(), true);
          ++done;
        } catch (const StateError& e) {
          if (std::string(e.what()).find("is in a backward on another thread") != std::string::npos) ++refused;
        }
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(done + refused, kThreads * kRounds) << "each call either added its gradient or was refused by name";
  for (float v : x.grad().to_vector<float>()) ASSERT_EQ(v, 2.0f * static_cast<float>(done.load()));
  x.set_grad(Tensor());
  ts.clear();
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&] {
      for (int r = 0; r < kRounds; ++r) sum(mul(x, 3.0)).backward();  // a graph of its own, the leaf shared
    });
  for (auto& t : ts) t.join();
  for (float v : x.grad().to_vector<float>()) ASSERT_EQ(v, 3.0f * kThreads * kRounds);
}

}  // namespace
}  // namespace bitgrad::test
