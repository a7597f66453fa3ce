#include "bitgrad/gradcheck.hpp"

#include <cmath>
#include <sstream>

#include "bitgrad/autograd.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckResult res;
  std::vector<Tensor> leaves;
  for (const Tensor& t : inputs) {
    Tensor c = t.contiguous_copy();
    if (t.requires_grad()) {
      BITGRAD_CHECK(t.dtype() == DType::f64, "gradcheck", "inputs that require grad must be f64, got ", dtype_name(t.dtype()));
      c.set_requires_grad(true);
    }
    leaves.push_back(c);
  }
  Tensor y = f(leaves);
  BITGRAD_CHECK(y.defined() && y.dtype() == DType::f64, "gradcheck", "the function must return an f64 tensor");
  Tensor r = Tensor::empty(y.shape(), DType::f64);
  rng::Stream(opt.seed, "gradcheck").fill_normal(r.mutable_data<double>(), r.numel(), 0, 0.0, 1.0);
  y.backward(r);
  const double* pr = r.data<double>();

  auto projected = [&](const std::vector<Tensor>& xs) {
    NoGradGuard ng;
    Tensor out = f(xs).contiguous_copy();
    const double* p = out.data<double>();
    double s = 0;
    for (std::int64_t k = 0; k < out.numel(); ++k) s += pr[k] * p[k];
    return s;
  };

  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (!inputs[i].requires_grad()) continue;
    Tensor analytic = leaves[i].grad();
    std::vector<Tensor> xs;
    for (const Tensor& l : leaves) xs.push_back(l.detach().contiguous_copy());
    double* px = xs[i].mutable_data<double>();
    Tensor an = analytic.defined() ? analytic.contiguous_copy() : Tensor::zeros(leaves[i].shape(), DType::f64);
    const double* pa = an.data<double>();
    for (std::int64_t j = 0; j < xs[i].numel(); ++j) {
      const double x0 = px[j];
      const double h = opt.eps * (std::fabs(x0) > 1.0 ? std::fabs(x0) : 1.0);
      px[j] = x0 + h;
      const double fp = projected(xs);
      px[j] = x0 - h;
      const double fm = projected(xs);
      px[j] = x0;
      const double num = (fp - fm) / (2 * h);
      const double err = std::fabs(pa[j] - num);
      res.max_abs_error = std::max(res.max_abs_error, err);
      ++res.checked;
      if (res.ok && !(err <= opt.atol + opt.rtol * std::fabs(num))) {
        std::ostringstream os;
        os << "input " << i << " (shape " << leaves[i].shape().str() << "), element " << j << ": analytic " << pa[j]
           << ", numeric " << num << ", |difference| " << err;
        if (!analytic.defined()) os << " (no gradient reached this input)";
        res.ok = false;
        res.message = os.str();
      }
    }
  }
  return res;
}

}  // namespace bitgrad
