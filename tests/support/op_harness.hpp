// The op-test harness (ggml style): one case per line, several modes, failures print the case.
//   gradient:    analytic gradients vs central differences in f64 (bitgrad::gradcheck), on
//                small shapes (finite differences are slow)
//   determinism: f32 forward output and input gradients bit-identical on every code path
//                at threads 1, 2, 3, 4, 7, 8 (fingerprints compared). On the small cases it
//                checks the code paths on odd shapes; small shapes fit one chunk, so each op
//                family also has larger cases (check_split_determinism) where the thread
//                pool's statistics must show a region split over all t threads.
// A case's name is built from its op label and its inputs, so it cannot drift from them:
// label "conv2d(stride=2)" with inputs [2,3,7,6], [2,3,3,2] is "conv2d([2,3,7,6],[2,3,3,2],stride=2)";
// text after a space outside the parentheses is a note: "matmul (k crosses a block)".
#pragma once

#include <algorithm>
#include <bit>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "bitgrad/bitgrad.hpp"
#include "kernels/thread_pool.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {

inline std::string shape_text(const Shape& s) {  // "[3,4]"
  std::string r = "[";
  for (int d = 0; d < s.ndim(); ++d) {
    if (d) r += ',';
    r += std::to_string(s[d]);
  }
  return r + "]";
}

struct OpCase {
  std::string op;                    // label: op name, optional (params), optional note
  std::vector<Shape> shapes;         // differentiable inputs, filled from Philox
  std::function<Tensor(const std::vector<Tensor>&)> f;
  double lo = -1.0, hi = 1.0;        // range of the inputs
  std::vector<Tensor> extra = {};    // non-differentiable inputs appended after them (indices, targets)
  GradcheckOptions grad = {};

  // "op(shapes..,dtype+shape of extras..,params) note"
  std::string name() const {
    std::size_t cut = op.size();
    for (std::size_t i = 0, depth = 0; i < op.size() && cut == op.size(); ++i) {
      if (op[i] == '(') ++depth;
      if (op[i] == ')') --depth;
      if (op[i] == ' ' && depth == 0) cut = i;
    }
    std::string head = op.substr(0, cut), params;
    if (const std::size_t p = head.find('('); p != std::string::npos && head.back() == ')') {
      params = head.substr(p + 1, head.size() - p - 2);
      head.resize(p);
    }
    std::vector<std::string> args;
    for (const Shape& s : shapes) args.push_back(shape_text(s));
    for (const Tensor& e : extra) args.push_back(std::string(dtype_name(e.dtype())) + shape_text(e.shape()));
    if (!params.empty()) args.push_back(params);
    std::string r = head + "(";
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (i) r += ',';
      r += args[i];
    }
    return r + ")" + op.substr(cut);
  }
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
  EXPECT_TRUE(r.ok) << c.name() << ": " << r.message;
  EXPECT_GT(r.checked, 0) << c.name() << ": no input element was checked";
}

// The most chunks of one parallel region in the forward and in the backward.
struct Widest {
  int forward = 1, backward = 1;
};

// f32 forward and backward from fresh leaves holding the values of `inputs` (make_inputs);
// fingerprint of the output and every input gradient
inline Digest128 run_f32(const OpCase& c, const std::vector<Tensor>& inputs, Widest* widest = nullptr) {
  std::vector<Tensor> in = inputs;
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    in[i] = inputs[i].detach().contiguous_copy();
    in[i].set_requires_grad(true);
  }
  kern::reset_region_stats();
  Tensor y = c.f(in);
  const int forward = kern::region_stats().widest;
  Tensor seed = Tensor::empty(y.shape(), DType::f32);
  rng::Stream(9, "seed").fill_normal(seed.mutable_data<float>(), seed.numel(), 0, 0.0f, 1.0f);
  kern::reset_region_stats();
  y.backward(seed);
  if (widest) *widest = {forward, kern::region_stats().widest};
  Fingerprint fp;
  fp.add(y);
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    Tensor g = in[i].grad();
    fp.add(g.defined() ? g : Tensor::zeros(in[i].shape(), DType::f32));
  }
  return fp.digest();
}

// split: the case must be big enough that, on the fast code paths, some region of its forward
// or backward runs on all t threads (the scalar reference's row and elementwise kernels are
// serial; ops that split their own loops, such as conv2d, split on it too).
inline void check_determinism(const OpCase& c, bool split = false) {
  std::vector<Tensor> inputs;
  Digest128 want;
  {
    ExecContext ref(1, Isa::scalar);
    ExecScope s(ref);
    inputs = make_inputs(c, DType::f32);
    want = run_f32(c, inputs);
  }
  const std::vector<Isa> absent = for_each_context(true, [&](Device d, Isa isa, int t) {
    Widest w;
    EXPECT_EQ(want.hex(), run_f32(c, inputs, &w).hex())
        << c.name() << " device=" << device_name(d) << " isa=" << isa_name(isa) << " threads=" << t;
    if (split && isa != Isa::scalar) {
      EXPECT_EQ(std::max(w.forward, w.backward), t)
          << c.name() << " isa=" << isa_name(isa) << ": no region ran on all " << t << " threads (widest: forward "
          << w.forward << ", backward " << w.backward << "); make the case larger";
    }
  });
  BITGRAD_SAY_COMPARED(absent, c.name());
}

inline void expect_unique_names(const std::vector<OpCase>& cases) {
  std::set<std::string> seen;
  for (const OpCase& c : cases) EXPECT_TRUE(seen.insert(c.name()).second) << "two cases are named " << c.name();
}

inline void run_all_modes(const std::vector<OpCase>& cases) {
  expect_unique_names(cases);
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name());
    check_gradient(c);
    check_determinism(c);
  }
}

// The determinism mode on cases big enough to be split over the threads.
inline void check_split_determinism(const std::vector<OpCase>& cases) {
  expect_unique_names(cases);
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name());
    check_determinism(c, true);
  }
}

inline Tensor i64_tensor(const std::vector<std::int64_t>& v, const Shape& s) { return Tensor::from<std::int64_t>(v, s); }
// values given in f64, as a tensor of ref's dtype
inline Tensor tensor_like(const Tensor& ref, const std::vector<double>& v, const Shape& s) { return Tensor::from<double>(v, s).cast(ref.dtype()); }
// an f32 or f64's bits
template <class T>
std::uint64_t bits(T v) {
  if constexpr (sizeof(T) == 4) return std::bit_cast<std::uint32_t>(v);
  else return std::bit_cast<std::uint64_t>(v);
}

}  // namespace bitgrad::test
