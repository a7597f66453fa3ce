// Contract T4: a sample's forward result does not depend on the batch it is in. The logits
// and log-probabilities of sample s are identical inside batches of 1, 127, 128 and 129, at
// any position, on every code path and thread count.
#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

struct Mlp {
  Tensor w1, b1, w2, b2, w3, b3;
  Mlp() {
    auto mk = [](Shape s, std::uint64_t seed, double scale) {
      auto v = random_vec<float>(static_cast<std::size_t>(s.numel()), seed, -scale, scale);
      return Tensor::from<float>(v, s);
    };
    w1 = mk({200, 784}, 1, 0.05), b1 = mk({200}, 2, 0.1), w2 = mk({100, 200}, 3, 0.1), b2 = mk({100}, 4, 0.1);
    w3 = mk({10, 100}, 5, 0.1), b3 = mk({10}, 6, 0.1);
  }
  Tensor forward(const Tensor& x) const {
    Tensor h = gelu(linear(x, w1, b1));
    h = relu(linear(h, w2, b2));
    return log_softmax(linear(h, w3, b3));
  }
};

TEST(BatchInvariance, SampleResultsIgnoreTheBatch) {
  RuntimeGuard guard;
  NoGradGuard ng;
  Mlp m;
  const std::int64_t pool = 300;
  auto xv = random_vec<float>(static_cast<std::size_t>(pool * 784), 9, 0, 1);
  Tensor data = Tensor::from<float>(xv, Shape{pool, 784});
  const std::int64_t sample = 5;
  set_isa(Isa::scalar);
  set_num_threads(1);
  const std::vector<float> want = m.forward(slice(data, 0, sample, sample + 1)).to_vector<float>();
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : {1, 2, 3, 8}) {
      set_num_threads(t);
      for (std::int64_t batch : {1, 127, 128, 129}) {
        for (std::int64_t pos : {std::int64_t(0), batch / 2, batch - 1}) {
          // the batch holds `sample` at row pos, other rows from elsewhere in the pool
          std::vector<std::int64_t> rows(static_cast<std::size_t>(batch));
          for (std::int64_t j = 0; j < batch; ++j) rows[static_cast<std::size_t>(j)] = j == pos ? sample : 10 + (j * 7) % (pool - 10);
          Tensor xb = index_select(data, 0, i64_tensor(rows, Shape{batch}));
          Tensor out = m.forward(xb);
          std::vector<float> got = slice(out, 0, pos, pos + 1).to_vector<float>();
          ASSERT_TRUE(bitwise_equal(want, got)) << "batch=" << batch << " pos=" << pos << " isa=" << isa_name(isa) << " threads=" << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace bitgrad::test
