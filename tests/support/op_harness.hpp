// The op-test harness (ggml style): one case per line, several modes, failures print the case.
//   gradient:    analytic gradients vs central differences in f64 (bitgrad::gradcheck)
//   determinism: f32 forward output and input gradients bit-identical on every code path
//                at threads 1, 2, 3, 4, 7, 8 (fingerprints compared)
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bitgrad/bitgrad.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {

struct OpCase {
  std::string name;                  // printed on failure, e.g. "matmul(a=[3,4],b=[4,5])"
  std::vector<Shape> shapes;         // differentiable inputs, filled from Philox
  std::function<Tensor(const std::vector<Tensor>&)> f;
  double lo = -1.0, hi = 1.0;        // range of the inputs
  std::vector<Tensor> extra = {};    // non-differentiable inputs appended after them (indices, targets)
  GradcheckOptions grad = {};
};

inline std::vector<Tensor> make_inputs(const OpCase& c, DType dt, std::uint64_t seed = 77) {
  std::vector<Tensor> in;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    auto v = random_vec<double>(static_cast<std::size_t>(c.shapes[i].numel()), seed + i, c.lo, c.hi);
    Tensor t = Tensor::from<double>(v, c.shapes[i]);
    if (dt != DType::f64) t = t.cast(dt);
    t.set_requires_grad(true);
    in.push_back(t);
  }
  for (const Tensor& e : c.extra) in.push_back(e);
  return in;
}

inline void check_gradient(const OpCase& c) {
  GradcheckResult r = gradcheck(c.f, make_inputs(c, DType::f64), c.grad);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.message;
  EXPECT_GT(r.checked, 0) << c.name << ": no input element was checked";
}

// f32 forward and backward; fingerprint of the output and every input gradient
inline Digest128 run_f32(const OpCase& c) {
  std::vector<Tensor> in = make_inputs(c, DType::f32);
  Tensor y = c.f(in);
  Tensor seed = Tensor::empty(y.shape(), DType::f32);
  rng::Stream(9, "seed").fill_normal(seed.mutable_data<float>(), seed.numel(), 0, 0.0f, 1.0f);
  y.backward(seed);
  Fingerprint fp;
  fp.add(y);
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    Tensor g = in[i].grad();
    fp.add(g.defined() ? g : Tensor::zeros(in[i].shape(), DType::f32));
  }
  return fp.digest();
}

inline void check_determinism(const OpCase& c) {
  RuntimeGuard guard;
  set_isa(Isa::scalar);
  set_num_threads(1);
  const Digest128 want = run_f32(c);
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_EQ(want.hex(), run_f32(c).hex()) << c.name << " isa=" << isa_name(isa) << " threads=" << t;
    }
  }
}

inline void run_all_modes(const std::vector<OpCase>& cases) {
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name);
    check_gradient(c);
    check_determinism(c);
  }
}

inline Tensor i64_tensor(const std::vector<std::int64_t>& v, const Shape& s) { return Tensor::from<std::int64_t>(v, s); }

}  // namespace bitgrad::test
