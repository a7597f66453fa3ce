// bitgrad.nn: the modules of bitgrad/nn.hpp. A module's forward takes an nn.Context (training
// or evaluation, the seed and step that key dropout). Layers made alone are initialised from
// their own `seed` (default 0); Sequential(..., seed=s) initialises the whole model as the CLI
// does, numbering the parameters across it.
#include <algorithm>

#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

using nn::Module;
using ModulePtr = std::shared_ptr<Module>;

template <class M>
std::shared_ptr<M> initialised(std::shared_ptr<M> m, std::uint64_t seed, const std::string& weights) {
  nn::initialize(*m, nn::parse_init(weights), seed);
  return m;
}

Tensor call(Module& m, const Tensor& x, const std::optional<nn::Context>& ctx) {
  const nn::Context c = ctx ? *ctx : nn::Context{};
  return nogil([&] { return m.forward(x, c); });
}

std::vector<std::pair<std::string, Tensor>> parameters_and_buffers(const Module& m) {
  auto all = m.named_parameters();
  for (auto& b : m.named_buffers()) all.push_back(b);
  return all;
}

py::dict state_dict(const Module& m) {
  py::dict d;
  for (const auto& [name, t] : parameters_and_buffers(m)) d[py::str(name)] = t;
  return d;
}

void load_state_dict(Module& m, const py::dict& d, bool strict) {
  const auto params = parameters_and_buffers(m);
  std::vector<std::string> names;
  for (const auto& [name, t] : params) {
    names.push_back(name);
    if (!d.contains(py::str(name))) {
      BITGRAD_CHECK(!strict, "load_state_dict", "the state has no entry '", name, "' (", t.shape().str(), ")");
      continue;
    }
    const Tensor src = d[py::str(name)].cast<Tensor>();
    BITGRAD_CHECK(src.shape() == t.shape() && src.dtype() == t.dtype(), "load_state_dict", "'", name, "' is ", dtype_name(src.dtype()), " ",
                  src.shape().str(), "; the module's parameter is ", dtype_name(t.dtype()), " ", t.shape().str());
    Tensor dst = t;
    nogil([&] { dst.copy_from(src); });
  }
  if (strict)
    for (auto item : d) {
      const std::string k = item.first.cast<std::string>();
      BITGRAD_CHECK(std::find(names.begin(), names.end(), k) != names.end(), "load_state_dict", "the state has an entry '", k,
                    "' that the module does not");
    }
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

  py::class_<Module, ModulePtr>(m, "Module", "Base of every layer: parameters in registration order, children prefixed by name.")
      .def("forward", &call, py::arg("x"), py::arg("ctx") = py::none())
      .def("__call__", &call, py::arg("x"), py::arg("ctx") = py::none(), "forward(x, ctx); without ctx: evaluation mode.")
      .def("output_shape", [](const Module& mod, const std::vector<std::int64_t>& in) {
        return py::tuple(py::cast(mod.output_shape(to_shape(in, "output_shape")).vec()));
      }, py::arg("input_shape"), "The output shape for an input shape (batch dimension included); an error when they do not chain.")
      .def("parameters", &Module::parameters)
      .def("named_parameters", &Module::named_parameters)
      .def("named_buffers", &Module::named_buffers, "State that is not trained (BatchNorm's running statistics), by name.")
      .def("state_dict", &state_dict, "Parameters, then buffers, by name (the tensors themselves, not copies), in order.")
      .def("load_state_dict", &load_state_dict, py::arg("state"), py::arg("strict") = true,
           "Copies values into the parameters in place (same shapes and dtypes).")
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
      .def("zero_grad", [](Module& mod) {
        for (Tensor& t : mod.parameters()) t.zero_grad();
      })
      .def("__repr__", &Module::describe);

  const char* seed_doc = "seed and weights: the initialisation (Module.init).";
  py::class_<nn::Linear, Module, std::shared_ptr<nn::Linear>>(m, "Linear", "x [..., in] -> x weightᵀ + bias [..., out].")
      .def(py::init([](std::int64_t in, std::int64_t out, bool bias, std::uint64_t seed, const std::string& w) {
             return initialised(std::make_shared<nn::Linear>(in, out, bias), seed, w);
           }),
           py::arg("in_features"), py::arg("out_features"), py::arg("bias") = true, py::kw_only(), py::arg("seed") = 0,
           py::arg("weights") = "kaiming_uniform", seed_doc)
      .def_readonly("weight", &nn::Linear::weight)
      .def_property_readonly("bias", [](const nn::Linear& l) { return tensor_or_none(l.bias); })
      .def_readonly("in_features", &nn::Linear::in_features)
      .def_readonly("out_features", &nn::Linear::out_features);
  py::class_<nn::Conv2d, Module, std::shared_ptr<nn::Conv2d>>(m, "Conv2d", "[N, C, H, W] -> [N, OC, OH, OW].")
      .def(py::init([](std::int64_t in, std::int64_t out, int kernel, int stride, int padding, bool bias, std::uint64_t seed,
                       const std::string& w) {
             return initialised(std::make_shared<nn::Conv2d>(in, out, kernel, stride, padding, bias), seed, w);
           }),
           py::arg("in_channels"), py::arg("out_channels"), py::arg("kernel_size"), py::arg("stride") = 1, py::arg("padding") = 0,
           py::arg("bias") = true, py::kw_only(), py::arg("seed") = 0, py::arg("weights") = "kaiming_uniform", seed_doc)
      .def_readonly("weight", &nn::Conv2d::weight)
      .def_property_readonly("bias", [](const nn::Conv2d& l) { return tensor_or_none(l.bias); });
  py::class_<nn::ActivationLayer, Module, std::shared_ptr<nn::ActivationLayer>> act(m, "_Activation");
  m.def("ReLU", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::relu); });
  m.def("GELU", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::gelu); });
  m.def("Tanh", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::tanh); });
  m.def("Sigmoid", [] { return std::make_shared<nn::ActivationLayer>(nn::Activation::sigmoid); });
  py::class_<nn::Dropout, Module, std::shared_ptr<nn::Dropout>>(m, "Dropout",
                                                                 "Inverted dropout in training; masks from (ctx.seed, 'dropout')"
                                                                 ".sub(layer_id).sub(ctx.step), element ctx.row_offset * row size + k.")
      .def(py::init<double, std::uint64_t>(), py::arg("p") = 0.5, py::arg("layer_id") = 0)
      .def_property_readonly("layer_id", &nn::Dropout::layer_id);
  py::class_<nn::Flatten, Module, std::shared_ptr<nn::Flatten>>(m, "Flatten", "[N, ...] -> [N, prod(...)].").def(py::init<>());
  py::class_<nn::Pool2d, Module, std::shared_ptr<nn::Pool2d>> pool(m, "_Pool2d");
  m.def("MaxPool2d", [](int k, int s) { return std::make_shared<nn::Pool2d>(true, k, s); }, py::arg("kernel_size"), py::arg("stride") = 0);
  m.def("AvgPool2d", [](int k, int s) { return std::make_shared<nn::Pool2d>(false, k, s); }, py::arg("kernel_size"), py::arg("stride") = 0);
  py::class_<nn::LayerNorm, Module, std::shared_ptr<nn::LayerNorm>>(m, "LayerNorm", "Normalises the last dimension.")
      .def(py::init([](std::int64_t features, double eps, bool bias) { return initialised(std::make_shared<nn::LayerNorm>(features, eps, bias), 0, "kaiming_uniform"); }),
           py::arg("features"), py::arg("eps") = 1e-5, py::arg("bias") = true)
      .def_readonly("weight", &nn::LayerNorm::gamma)
      .def_property_readonly("bias", [](const nn::LayerNorm& l) { return tensor_or_none(l.beta); });
  // batch norm (issue 29): BatchNorm1d(...) and BatchNorm2d(...) are factories of one class
  py::class_<nn::BatchNorm, Module, std::shared_ptr<nn::BatchNorm>>(m, "_BatchNorm",
                                                                     "Batch normalisation over channels (numerics.md §27): the batch's "
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
      .def(py::init([](std::int64_t num, std::int64_t dim, std::uint64_t seed) { return initialised(std::make_shared<nn::Embedding>(num, dim), seed, "kaiming_uniform"); }),
           py::arg("num_embeddings"), py::arg("embedding_dim"), py::kw_only(), py::arg("seed") = 0)
      .def_readonly("weight", &nn::Embedding::weight);
  py::class_<nn::TokenEmbedding, Module, std::shared_ptr<nn::TokenEmbedding>>(m, "TokenEmbedding",
                                                                               "Token ids [N, T] -> wte[x] + wpe[0..T) [N, T, D], then dropout.")
      .def(py::init([](std::int64_t vocab, std::int64_t block, std::int64_t dim, double p, std::uint64_t id, std::uint64_t seed) {
             return initialised(std::make_shared<nn::TokenEmbedding>(vocab, block, dim, p, id), seed, "gpt2");
           }),
           py::arg("vocab_size"), py::arg("block_size"), py::arg("dim"), py::arg("dropout") = 0.0, py::arg("dropout_id") = 0, py::kw_only(),
           py::arg("seed") = 0)
      .def_readonly("wte", &nn::TokenEmbedding::wte)
      .def_readonly("wpe", &nn::TokenEmbedding::wpe);
  py::class_<nn::TransformerBlock, Module, std::shared_ptr<nn::TransformerBlock>>(m, "TransformerBlock",
                                                                                   "Pre-norm block: x + attn(ln1(x)), then h + mlp(ln2(h)).")
      .def(py::init([](std::int64_t dim, std::int64_t n_head, double p, bool bias, std::int64_t n_layer, std::uint64_t id, std::uint64_t seed) {
             return initialised(std::make_shared<nn::TransformerBlock>(dim, n_head, p, bias, n_layer, id), seed, "gpt2");
           }),
           py::arg("dim"), py::arg("n_head"), py::arg("dropout") = 0.0, py::arg("bias") = true, py::arg("n_layer") = 1,
           py::arg("dropout_id") = 0, py::kw_only(), py::arg("seed") = 0);
  py::class_<nn::TiedHead, Module, std::shared_ptr<nn::TiedHead>>(m, "TiedHead", "x [.., D] -> x weightᵀ, weight shared with an embedding.")
      .def(py::init<Tensor>(), py::arg("weight"));
  py::class_<nn::Sequential, Module, std::shared_ptr<nn::Sequential>>(m, "Sequential", "Layers applied in order.")
      .def(py::init([](const py::args& layers, std::optional<std::uint64_t> seed, const std::string& weights, const std::string& recompute) {
             auto s = std::make_shared<nn::Sequential>();
             std::vector<std::uint64_t> dropout_ids;
             for (const py::handle h : layers) {
               if (!py::isinstance<Module>(h))
                 throw py::type_error("Sequential: expected bitgrad.nn modules, got " + std::string(py::str(py::type::of(h).attr("__name__"))));
               ModulePtr mod = h.cast<ModulePtr>();
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
      .def("append", [](nn::Sequential& s, ModulePtr l) { s.add(std::move(l)); }, py::arg("layer"))
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
