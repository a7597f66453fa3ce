// Values and gradients against PyTorch (f64), from the committed golden file made by
// tests/golden/gen_torch_golden.py. Orders differ between the two libraries, so this checks
// values with a derived bound (below); bitwise claims are checked elsewhere.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "support/op_harness.hpp"

namespace bitgrad::test {
namespace {

using V = const std::vector<Tensor>&;
using Fn = std::function<Tensor(V)>;

const std::map<std::string, Fn>& ops() {
  static const std::map<std::string, Fn> m = {
      {"matmul", [](V x) { return matmul(x[0], x[1]); }},
      {"matmul_batched", [](V x) { return matmul(x[0], x[1]); }},
      {"linear", [](V x) { return linear(x[0], x[1], x[2]); }},
      {"softmax", [](V x) { return softmax(x[0]); }},
      {"log_softmax", [](V x) { return log_softmax(x[0]); }},
      {"cross_entropy", [](V x) { return cross_entropy(x[0], x[1]); }},
      {"mse_loss", [](V x) { return mse_loss(x[0], x[1]); }},
      {"gelu", [](V x) { return gelu(x[0]); }},
      {"tanh", [](V x) { return tanh(x[0]); }},
      {"sigmoid", [](V x) { return sigmoid(x[0]); }},
      {"exp", [](V x) { return exp(x[0]); }},
      {"log", [](V x) { return log(x[0]); }},
      {"sqrt", [](V x) { return sqrt(x[0]); }},
      {"pow", [](V x) { return pow(x[0], x[1]); }},
      {"div_broadcast", [](V x) { return div(x[0], x[1]); }},
      {"sum_axis0", [](V x) { return sum(x[0], {0}); }},
      {"mean", [](V x) { return mean(x[0]); }},
      {"max_axis1", [](V x) { return max(x[0], 1); }},
      {"index_select", [](V x) { return index_select(x[0], 0, x[1]); }},
      {"gather", [](V x) { return gather(x[0], 1, x[1]); }},
      {"relu", [](V x) { return relu(x[0]); }},
      {"conv2d", [](V x) { return conv2d(x[0], x[1], x[2], 1, 1); }},
      {"conv2d_stride2", [](V x) { return conv2d(x[0], x[1], Tensor(), 2, 0); }},
      {"max_pool2d", [](V x) { return max_pool2d(x[0], 2); }},
      {"avg_pool2d", [](V x) { return avg_pool2d(x[0], 3, 1); }},
      {"layer_norm", [](V x) { return layer_norm(x[0], x[1], x[2], 1e-5); }},
      {"embedding", [](V x) { return embedding(x[0], x[1]); }},
  };
  return m;
}

Shape shape_of(const nlohmann::json& j) { return Shape(j.get<std::vector<std::int64_t>>()); }

// Both libraries compute in f64, each within its rounding errors of the exact value. A case is made
// of n values (its inputs and gout) plus at most 16 roundings of elementwise functions on the way
// (bitgrad's within 0.8 ulp, numerics §8; torch's SLEEF/glibc ones within a few ulp); no result
// combines more terms, so each side is within gamma(n) S of the exact value, S the result's largest
// magnitude, gamma(n) = n u / (1 - n u), u = 2^-53 (Higham, Accuracy and Stability, §3): the two
// differ by at most 2 gamma(n) S (tests/python/test_parity_ops.py makes the same argument against
// torch on every op). Copies and selections are equal: kExact below.
double golden_bound(std::size_t n, const std::vector<double>& want) {
  double s = 0;
  for (double w : want) s = std::max(s, std::fabs(w));
  if (s == 0) s = 1;
  const double nu = static_cast<double>(n) * std::ldexp(1.0, -53);
  return 2 * nu / (1 - nu) * s;
}

// max, relu, max pooling (2 x 2 windows, stride 2: no overlap), index_select and gather (an index at
// most twice: a gradient element is 0 + a + b, the same in any order): forward and gradients;
// embedding: the forward (a row repeats 3 times, so its gradient is a sum in some order)
const std::set<std::string> kExact = {"max_axis1", "relu", "max_pool2d", "index_select", "gather"};

void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, std::size_t n,
                  bool exact) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double bound = exact ? 0.0 : golden_bound(n, want);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_LE(std::fabs(got[i] - want[i]), bound) << what << " element " << i;
}

TEST(TorchGolden, ValuesAndGradientsMatchPyTorch) {
  std::ifstream f(std::string(BITGRAD_SOURCE_DIR) + "/tests/golden/torch_ops.json");
  ASSERT_TRUE(f) << "missing tests/golden/torch_ops.json";
  nlohmann::json doc = nlohmann::json::parse(f);
  int n = 0;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    auto it = ops().find(name);
    ASSERT_NE(it, ops().end()) << "no bitgrad op for golden case " << name;
    std::vector<Tensor> in;
    for (const auto& x : c["inputs"]) {
      Tensor t = Tensor::from<double>(x["data"].get<std::vector<double>>(), shape_of(x["shape"]));
      t.set_requires_grad(true);
      in.push_back(t);
    }
    const std::size_t nd = in.size();
    for (const auto& x : c["ints"]) in.push_back(Tensor::from<std::int64_t>(x["data"].get<std::vector<std::int64_t>>(), shape_of(x["shape"])));
    Tensor y = it->second(in);
    ASSERT_EQ(y.shape(), shape_of(c["output"]["shape"]));
    std::size_t values = c["gout"].size() + 16;
    for (const auto& x : c["inputs"]) values += x["data"].size();
    const bool exact = kExact.count(name) > 0;
    expect_close(name + " output", y.to_vector<double>(), c["output"]["data"].get<std::vector<double>>(), values,
                 exact || name == "embedding");
    y.backward(Tensor::from<double>(c["gout"].get<std::vector<double>>(), y.shape()));
    for (std::size_t i = 0; i < nd; ++i) {
      if (c["grads"][i].is_null()) continue;
      ASSERT_TRUE(in[i].grad().defined()) << name << " input " << i;
      expect_close(name + " grad " + std::to_string(i), in[i].grad().to_vector<double>(), c["grads"][i].get<std::vector<double>>(),
                   values, exact);
    }
    ++n;
  }
  EXPECT_EQ(n, static_cast<int>(ops().size()));
}

}  // namespace
}  // namespace bitgrad::test
