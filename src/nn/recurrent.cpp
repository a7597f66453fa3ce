// The recurrent module (RNN, LSTM, GRU) over the ops of src/ops/recurrent.cpp, with PyTorch's
// parameter names, order and initialisation.
#include "bitgrad/math.hpp"
#include "bitgrad/nn.hpp"
#include "nn/layer_util.hpp"

namespace bitgrad::nn {
using detail::init_stream;
using detail::str;

namespace {
const char* name_of(RnnMode m) {
  switch (m) {
    case RnnMode::rnn_tanh: return "RNN";
    case RnnMode::rnn_relu: return "RNN";
    case RnnMode::lstm: return "LSTM";
    case RnnMode::gru: return "GRU";
  }
  return "RNN";
}
}  // namespace

Recurrent::Recurrent(RnnMode mode, std::int64_t input, std::int64_t hidden, std::int64_t layers, bool bias, bool bf, bool last)
    : input_size(input), hidden_size(hidden), num_layers(layers), batch_first(bf), last_only(last), mode_(mode) {
  BITGRAD_CHECK(input > 0 && hidden > 0 && layers > 0, name_of(mode), "sizes must be positive, got input ", input, ", hidden ", hidden,
                ", layers ", layers);
  const std::int64_t GH = (mode == RnnMode::lstm ? 4 : mode == RnnMode::gru ? 3 : 1) * hidden;
  for (std::int64_t k = 0; k < layers; ++k) {
    const std::string l = "_l" + std::to_string(k);
    RnnParams p;
    p.w_ih = register_parameter("weight_ih" + l, Tensor::zeros(Shape{GH, k == 0 ? input : hidden}));
    p.w_hh = register_parameter("weight_hh" + l, Tensor::zeros(Shape{GH, hidden}));
    if (bias) {
      p.b_ih = register_parameter("bias_ih" + l, Tensor::zeros(Shape{GH}));
      p.b_hh = register_parameter("bias_hh" + l, Tensor::zeros(Shape{GH}));
    }
    params_.push_back(p);
  }
}
// PyTorch's: every parameter uniform(-1/sqrt(H), 1/sqrt(H)), here each from its own stream
void Recurrent::init(Init, std::uint64_t seed, std::uint64_t& index) {
  const double bound = 1.0 / math::sqrt(static_cast<double>(hidden_size));
  NoGradGuard ng;
  for (RnnParams& p : params_)
    for (Tensor* t : {&p.w_ih, &p.w_hh, &p.b_ih, &p.b_hh}) {
      if (!t->defined()) continue;
      const rng::Stream s = init_stream(seed, index);
      BITGRAD_DISPATCH_FLOAT(t->dtype(), "init", T, [&] {
        s.fill_uniform(t->mutable_data<T>(), t->numel(), 0, static_cast<T>(-bound), static_cast<T>(bound));
      });
    }
}
RnnResult Recurrent::run(const Tensor& x, const Tensor& h0, const Tensor& c0) const { return rnn(x, mode_, params_, h0, c0, batch_first); }
Tensor Recurrent::forward(const Tensor& x, const Context&) {
  const RnnResult r = run(x);
  if (!last_only) return r.output;
  // the last layer's final h is the last step's output
  return reshape(slice(r.h_n, 0, num_layers - 1, num_layers), Shape{r.h_n.shape()[1], hidden_size});
}
Tensor Recurrent::forward_steps(const Tensor& x, std::vector<Tensor>& state, const Context&) {
  BITGRAD_CHECK(carries_state(), describe().c_str(), "forward_steps needs batch_first and every step's output");
  const RnnResult r = state.empty() ? run(x) : run(x, state[0], state.size() > 1 ? state[1] : Tensor());
  state = {r.h_n};
  if (r.c_n.defined()) state.push_back(r.c_n);
  return r.output;
}
Shape Recurrent::output_shape(const Shape& in) const {
  BITGRAD_CHECK(in.ndim() == 3 && in[2] == input_size && in[batch_first ? 1 : 0] >= 1, describe().c_str(), "expects sequences ",
                batch_first ? "[N, T, " : "[T, N, ", input_size, "] with T >= 1, got ", in.str());
  if (last_only) return Shape{in[batch_first ? 0 : 1], hidden_size};
  return Shape{in[0], in[1], hidden_size};
}
std::string Recurrent::describe() const {
  return str(name_of(mode_), "(", input_size, ", ", hidden_size, num_layers > 1 ? ", layers=" + std::to_string(num_layers) : std::string(),
             mode_ == RnnMode::rnn_relu ? ", relu" : "", params_[0].b_ih.defined() ? "" : ", no bias", batch_first ? "" : ", sequence first",
             last_only ? ", last" : "", ")");
}

void Recurrent::bind_parameters() {
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const std::string l = "_l" + std::to_string(k);
    RnnParams& p = params_[k];
    p.w_ih = own_parameter("weight_ih" + l);
    p.w_hh = own_parameter("weight_hh" + l);
    p.b_ih = own_parameter("bias_ih" + l);
    p.b_hh = own_parameter("bias_hh" + l);
  }
}

}  // namespace bitgrad::nn
