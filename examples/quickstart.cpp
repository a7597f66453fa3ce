// The README's example, built with the project so the documentation cannot drift from the API.
#include <bitgrad/bitgrad.hpp>

#include <iostream>

int main() {
  using namespace bitgrad;
  Tensor x = Tensor::empty({128, 784});  // f32
  rng::Stream(42, "data").fill_normal(x.mutable_data<float>(), x.numel(), 0, 0.0f, 1.0f);
  Tensor w = Tensor::zeros({10, 784}).set_requires_grad(true);
  Tensor b = Tensor::zeros({10}).set_requires_grad(true);
  Tensor y = Tensor::zeros({128}, DType::i64);
  Tensor loss = cross_entropy(linear(x, w, b), y);
  loss.backward();
  std::cout << fingerprint({w.grad(), b.grad()}).hex() << "\n";  // same bits everywhere
  return 0;
}
