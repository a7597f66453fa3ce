// bitgrad.nn: the modules of bitgrad/nn.hpp. A module's forward takes an nn.Context (training
// or evaluation, the seed and step that key dropout). Layers made alone are initialised from
// their own `seed` (default 0); Sequential(..., seed=s) initialises the whole model as the CLI
// does, numbering the parameters across it.
#include <algorithm>

#include "python/bind.hpp"
#include "python/pymodule.hpp"

namespace bitgrad::python {
namespace {

using nn::Module;
using ModulePtr = std::shared_ptr<Module>;

// seed: None draws the layer's initialisation seed from the program's generator
template <class M>
std::shared_ptr<M> initialised(std::shared_ptr<M> m, const std::optional<std::uint64_t>& seed, const std::string& weights) {
  nn::initialize(*m, nn::parse_init(weights), module_seed(seed));
  return m;
}

// Without ctx: the context of the Python forward calling it, or at top level the module's own
// mode (training unless eval() was called, as PyTorch) with the generator's seed and step (pymodule.hpp).
Tensor call(Module& m, const Tensor& x, const std::optional<nn::Context>& ctx) {
  const nn::Context c = ctx ? *ctx : context_for(m);
  return nogil([&] { return m.forward(x, c); });
}

// PyTorch's keys (Module::state_dict): parameters, then persistent buffers
py::dict state_dict(const Module& m) {
  py::dict d;
  for (const auto& [name, t] : m.state_dict()) d[py::str(name)] = t;
  return d;
}

py::object load_state_dict(Module& m, const py::dict& d, bool strict) {
  std::vector<std::pair<std::string, Tensor>> state;
  for (auto item : d) {
    if (!py::isinstance<Tensor>(item.second))
      throw py::type_error("load_state_dict: the value of '" + py::str(item.first).cast<std::string>() + "' is a " +
                           std::string(py::str(py::type::of(item.second).attr("__name__"))) + "; expected a bitgrad.Tensor");
    state.emplace_back(py::str(item.first).cast<std::string>(), item.second.cast<Tensor>());
  }
  const Module::LoadResult r = nogil([&] { return m.load_state_dict(state, strict); });
  // PyTorch's answer: a named tuple (missing_keys, unexpected_keys)
  py::object keys = py::module_::import("bitgrad.nn").attr("IncompatibleKeys");
  return keys(py::cast(r.missing), py::cast(r.unexpected));
}

}  // namespace

void init_nn(py::module_& top) {
  py::module_ m = top.def_submodule("nn", "Modules: layers with named parameters, composable with Sequential.");

  py::class_<nn::Context>(m, "Context", "What a forward pass needs besides its input: training or evaluation, and the seed, step "
                                        "and first row that key dropout (numerics.md).")
      .def(py::init([](bool training, std::uint64_t seed, std::uint64_t step, std::int64_t row_offset, const std::string& precision,
                       bool stochastic) {
             nn::Context c;
             c.training = training;
             c.seed = seed;
             c.step = step;
             c.row_offset = row_offset;
             c.precision = parse_precision(precision);
             c.stochastic = stochastic;
             return c;
           }),
           py::kw_only(), py::arg("training") = false, py::arg("seed") = 0, py::arg("step") = 0, py::arg("row_offset") = 0,
           py::arg("precision") = "fp32", py::arg("stochastic") = false)
      .def_readwrite("training", &nn::Context::training)
      .def_readwrite("seed", &nn::Context::seed)
      .def_readwrite("step", &nn::Context::step)
      .def_readwrite("row_offset", &nn::Context::row_offset)
      .def_readwrite("stochastic", &nn::Context::stochastic)
      .def_property("precision", [](const nn::Context& c) { return std::string(precision_name(c.precision)); },
                    [](nn::Context& c, const std::string& p) { c.precision = parse_precision(p); })
      .def("__repr__", [](const nn::Context& c) {
        return "nn.Context(training=" + std::string(c.training ? "True" : "False") + ", seed=" + std::to_string(c.seed) +
               ", step=" + std::to_string(c.step) + ", row_offset=" + std::to_string(c.row_offset) + ", precision='" +
               precision_name(c.precision) + "')";
      });

  py::class_<Module, PyModule, ModulePtr> module_cls(m, "Module", "Base of every layer: parameters in registration order, children prefixed by name. "
                                                                "Subclass it in Python as torch.nn.Module (docs/python.md).");
  module_cls.def(py::init<>())
      .def("forward", &call, py::arg("x"), py::arg("ctx") = py::none())
      .def("__call__", &call, py::arg("x"), py::arg("ctx") = py::none(), "forward(x, ctx); without ctx: the module's mode (train()/eval()).")
      .def("_call", &call, py::arg("x"), py::arg("ctx") = py::none())
      .def("output_shape", [](const Module& mod, const std::vector<std::int64_t>& in) {
        return py::tuple(py::cast(mod.output_shape(to_shape(in, "output_shape")).vec()));
      }, py::arg("input_shape"), "The output shape for an input shape (batch dimension included); an error when they do not chain.")
      .def("parameters", &Module::parameters)
      .def("named_parameters", &Module::named_parameters)
      .def("named_buffers", &Module::named_buffers, "State that is not trained (BatchNorm's running statistics), by name.")
      .def("state_dict", &state_dict, "Parameters, then persistent buffers, under PyTorch's keys (LayerNorm's weight and bias), the "
                                      "tensors themselves (not copies), in order.")
      .def("load_state_dict", &load_state_dict, py::arg("state_dict"), py::arg("strict") = true,
           "Copies values into the parameters and buffers in place (same shapes and dtypes); returns (missing_keys, "
           "unexpected_keys); strict: an error unless both are empty.")
      .def("children", [](const Module& mod) {
        py::list l;
        for (const auto& [name, c] : mod.children()) l.append(c);
        return l;
      })
      .def("named_children", &Module::children)
      .def("init", [](Module& mod, std::uint64_t seed, const std::string& weights) { nn::initialize(mod, nn::parse_init(weights), seed); },
           py::arg("seed"), py::arg("weights") = "kaiming_uniform",
           "Draws every parameter from (seed, 'init').sub(index), index counting parameters across the module (as the CLI's "
           "[model] init). weights: kaiming_uniform, kaiming_normal, xavier_uniform, xavier_normal, zeros, gpt2.")
      .def("zero_grad", [](Module& mod, bool set_to_none) {
        for (Tensor& t : mod.parameters()) {
          if (set_to_none || !t.grad().defined()) t.zero_grad();
          else nogil([&] { Tensor g = t.grad(); g.fill_(0.0); });
        }
      }, py::arg("set_to_none") = true, "Drops every parameter's gradient (set_to_none=False: fills it with zeros).")
      .def("__repr__", &Module::describe);
  // what a module written in Python (bitgrad/nn.py) builds on
  module_cls.def_property_readonly("training", &Module::training, "Training mode (train()) or evaluation (eval()).")
      .def("_train", [](Module& mod, bool on) { mod.train(on); }, py::arg("mode"))
      .def_property_readonly("_python", [](const Module& mod) { return dynamic_cast<const PyModule*>(&mod) != nullptr; })
      .def("_set_parameter", [](Module& mod, const std::string& name, const Tensor& t) { mod.set_parameter(name, t); })
      .def("_set_buffer", [](Module& mod, const std::string& name, const Tensor& t, bool persistent) { mod.set_buffer(name, t, persistent); })
      .def("_set_module", [](Module& mod, const std::string& name, const py::handle& child) { mod.set_module(name, hold_module(child)); })
      .def("_unregister", &Module::unregister)
      .def("_tie_parameter", [](Module& mod, const std::string& key, const Tensor& t) { return mod.tie_parameter(key, t); })
      .def("_own_names", [](const Module& mod) {
        // (parameters, buffers) registered on this module itself (not its children)
        py::list ps, bs;
        for (const auto& [n, t] : mod.named_parameters())
          if (n.find('.') == std::string::npos) ps.append(py::make_tuple(n, t));
        for (const auto& [n, t] : mod.named_buffers())
          if (n.find('.') == std::string::npos) bs.append(py::make_tuple(n, t));
        return py::make_tuple(ps, bs);
      })
      .def("_buffer_persistent", &Module::buffer_persistent)
      .def("_number_sites", [](Module& mod) {
        std::uint64_t site = 0;
        mod.number_sites(site);
      })
      .def("_cast", [](Module& mod, DType dtype) { nogil([&] { mod.cast_parameters(dtype); }); });
  init_pymodule(m);

  const char* seed_doc = "seed and weights: the initialisation (Module.init); without seed, the program's generator gives the layer "
                         "its own (bitgrad.manual_seed; docs/python.md, Randomness).";
  py::class_<nn::Linear, Module, std::shared_ptr<nn::Linear>>(m, "Linear", "x [..., in] -> x weightᵀ + bias [..., out].")
      .def(py::init([](std::int64_t in, std::int64_t out, bool bias, std::optional<std::uint64_t> seed, const std::string& w) {
             return initialised(std::make_shared<nn::Linear>(in, out, bias), seed, w);
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::kw_only(), py::arg("seed") = py::none(),
           py::arg("weights") = "kaiming_uniform", seed_doc)
      .def_readonly("weight", &nn::Linear::weight)
      .def_property_readonly("bias", [](const nn::Linear& l) { return tensor_or_none(l.bias); })
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features);
  py::class_<nn::ActivationLayer, Module, std::shared_ptr<nn::ActivationLayer>> act(m, "_Activation");
  m.def("ReLU", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::relu); });
  m.def("GELU", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::gelu); });
  m.def("Tanh", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::tanh); });
  m.def("Sigmoid", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::sigmoid); });
  py::class_<nn::Dropout, Module, std::shared_ptr<nn::Dropout>>(m, "Dropout",
                                                                 "Inverted dropout in training; masks from (ctx.seed, 'dropout')"
                                                                 ".sub(layer_id).sub(ctx.step), element ctx.row_offset * row size + k.")
      .def(py::init([](double p, std::optional<std::uint64_t> id) { return std::make_shared<nn::Dropout>(p, dropout_id(id)); }),
           py::arg("p") = 0.5, py::arg("layer_id") = py::none(),
           "layer_id: the masks' key; without it the program's generator gives the layer its own (from 2^63 up), so two "
           "layers never share masks")
      .def_property_readonly("layer_id", &nn::Dropout::layer_id);
  py::class_<nn::Flatten, Module, std::shared_ptr<nn::Flatten>>(m, "Flatten", "[N, ...] -> [N, prod(...)].").def(py::init<>());
  py::class_<nn::LayerNorm, Module, std::shared_ptr<nn::LayerNorm>>(m, "LayerNorm", "Normalises the last dimension.")
      .def(py::init([](std::int64_t features, double eps, bool bias) { return initialised(std::make_shared<nn::LayerNorm>(features, eps, bias), 0, "kaiming_uniform"); }),
           py::arg("features"), py::arg("eps") = 1e-5, py::arg("bias") = true)
      .def_readonly("weight", &nn::LayerNorm::gamma)
      .def_property_readonly("bias", [](const nn::LayerNorm& l) { return tensor_or_none(l.beta); });
  // batch norm: BatchNorm1d(...) and BatchNorm2d(...) are factories of one class
  py::class_<nn::BatchNorm, Module, std::shared_ptr<nn::BatchNorm>>(m, "_BatchNorm",
                                                                     "Batch normalisation over channels (numerics.md §31): the batch's "
                                                                     "statistics in training, the running ones in evaluation.")
      .def_property_readonly("weight", [](const nn::BatchNorm& l) { return tensor_or_none(l.weight); })
      .def_property_readonly("bias", [](const nn::BatchNorm& l) { return tensor_or_none(l.bias); })
      .def_readonly("running_mean", &nn::BatchNorm::running_mean)
      .def_readonly("running_var", &nn::BatchNorm::running_var)
      .def_readonly("num_batches_tracked", &nn::BatchNorm::num_batches_tracked);
  m.def("BatchNorm1d", [](std::int64_t f, double eps, double momentum, bool affine) { return std::make_shared<nn::BatchNorm>(1, f, eps, momentum, affine); },
        py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true, "Over [N, C] or [N, C, L].");
  m.def("BatchNorm2d", [](std::int64_t f, double eps, double momentum, bool affine) { return std::make_shared<nn::BatchNorm>(2, f, eps, momentum, affine); },
        py::arg("num_features"), py::arg("eps") = 1e-5, py::arg("momentum") = 0.1, py::arg("affine") = true, "Over [N, C, H, W].");
  py::class_<nn::Embedding, Module, std::shared_ptr<nn::Embedding>>(m, "Embedding", "int64 indices [..] -> [.., dim].")
      .def(py::init([](std::int64_t num, std::int64_t dim, std::optional<std::uint64_t> seed) { return initialised(std::make_shared<nn::Embedding>(num, dim), seed, "kaiming_uniform"); }),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::kw_only(), py::arg("seed") = py::none())
      .def_readonly("weight", &nn::Embedding::weight);
  py::class_<nn::TokenEmbedding, Module, std::shared_ptr<nn::TokenEmbedding>>(m, "TokenEmbedding",
                                                                               "Token ids [N, T] -> wte[x] + wpe[0..T) [N, T, D], then dropout.")
      .def(py::init([](std::int64_t vocab, std::int64_t block, std::int64_t dim, double p, std::optional<std::uint64_t> id,
                       std::optional<std::uint64_t> seed) {
             return initialised(std::make_shared<nn::TokenEmbedding>(vocab, block, dim, p, dropout_id(id)), seed, "gpt2");
           }),
           py::arg("vocab_size"), py::arg("block_size"), py::arg("dim"), py::arg("dropout") = 0.0, py::arg("dropout_id") = py::none(), py::kw_only(),
           py::arg("seed") = py::none())
      .def_readonly("wte", &nn::TokenEmbedding::wte)
      .def_readonly("wpe", &nn::TokenEmbedding::wpe);
  py::class_<nn::TransformerBlock, Module, std::shared_ptr<nn::TransformerBlock>>(m, "TransformerBlock",
                                                                                   "Pre-norm block: x + attn(ln1(x)), then h + mlp(ln2(h)).")
      .def(py::init([](std::int64_t dim, std::int64_t n_head, double p, bool bias, std::int64_t n_layer, std::optional<std::uint64_t> id,
                       std::optional<std::uint64_t> seed) {
             const std::uint64_t first = dropout_id(id, nn::TransformerBlock::kDropouts);
             return initialised(std::make_shared<nn::TransformerBlock>(dim, n_head, p, bias, n_layer, first), seed, "gpt2");
           }),
           py::arg("dim"), py::arg("n_head"), py::arg("dropout") = 0.0, py::arg("bias") = true, py::arg("n_layer") = 1,
           py::arg("dropout_id") = py::none(), py::kw_only(), py::arg("seed") = py::none());
  py::class_<nn::TiedHead, Module, std::shared_ptr<nn::TiedHead>>(m, "TiedHead", "x [.., D] -> x weightᵀ, weight shared with an embedding.")
      .def(py::init<Tensor>(), py::arg("weight"));
  py::class_<nn::Sequential, Module, std::shared_ptr<nn::Sequential>>(m, "Sequential", "Layers applied in order.")
      .def(py::init([](const py::args& layers, std::optional<std::uint64_t> seed, const std::string& weights, const std::string& recompute) {
             auto s = std::make_shared<nn::Sequential>();
             std::vector<std::uint64_t> dropout_ids;
             for (const py::handle h : layers) {
               if (!py::isinstance<Module>(h))
                 throw py::type_error("Sequential: expected bitgrad.nn modules, got " + std::string(py::str(py::type::of(h).attr("__name__"))));
               ModulePtr mod = hold_module(h);
               if (const auto* d = dynamic_cast<const nn::Dropout*>(mod.get())) {
                 // the same id draws the same masks: two such layers would drop alike
                 BITGRAD_CHECK(std::find(dropout_ids.begin(), dropout_ids.end(), d->layer_id()) == dropout_ids.end(), "Sequential",
                               "two Dropout layers have layer_id ", d->layer_id(), " and would draw the same masks; number them "
                               "(Dropout(p, 0), Dropout(p, 1), ... as the CLI does)");
                 dropout_ids.push_back(d->layer_id());
               }
               s->add(std::move(mod));
             }
             s->set_recompute(nn::parse_recompute(recompute));
             if (seed) nn::initialize(*s, nn::parse_init(weights), *seed);
             std::uint64_t site = 0;
             s->number_sites(site);
             return s;
           }),
           py::kw_only(), py::arg("seed") = py::none(), py::arg("weights") = "kaiming_uniform", py::arg("recompute") = "none",
           "Sequential(*layers, seed=None): with a seed, every parameter is drawn again as the CLI's [model] init does; "
           "recompute: 'none', 'blocks' or 'all' (activation checkpointing, contract T9).")
      .def("append", [](nn::Sequential& s, const py::handle& l) { s.add(hold_module(l)); }, py::arg("layer"))
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential& s, long i) {
        const long n = static_cast<long>(s.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) throw py::index_error("Sequential: index out of range");
        return s.children()[static_cast<std::size_t>(i)].second;
      });
  m.def("initialize", [](Module& mod, const std::string& weights, std::uint64_t seed) { nn::initialize(mod, nn::parse_init(weights), seed); },
        py::arg("module"), py::arg("weights"), py::arg("seed"));
}

}  // namespace bitgrad::python
