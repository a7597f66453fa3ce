// bitgrad.optim: SGD, Adam, AdamW with a learning rate or a schedule, and gradient clipping.
// The update orders are numerics.md's "Optimizers"; step() runs with the GIL released.
#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

// An optimizer with its learning rate (or schedule): step() needs no argument, as in PyTorch.
struct PyOptimizer {
  std::unique_ptr<optim::Optimizer> opt;
  double lr = 0.01;
  std::optional<optim::Schedule> schedule;
  double current_lr() const { return schedule ? schedule->at(opt->steps()) : lr; }
};

// Parameters: (name, tensor) pairs (Module.named_parameters()), or tensors (named "0", "1", ...).
optim::NamedTensors named(const py::iterable& params, const char* op) {
  optim::NamedTensors out;
  std::size_t i = 0;
  for (const py::handle h : params) {
    if (py::isinstance<Tensor>(h)) out.emplace_back(std::to_string(i), h.cast<Tensor>());
    else if (py::isinstance<py::tuple>(h) && py::len(h) == 2) out.emplace_back(h.cast<py::tuple>()[0].cast<std::string>(), h.cast<py::tuple>()[1].cast<Tensor>());
    else
      throw py::type_error(std::string(op) + ": parameters are tensors or (name, tensor) pairs, got " +
                           std::string(py::str(py::type::of(h).attr("__name__"))));
    ++i;
  }
  BITGRAD_CHECK(!out.empty(), op, "no parameters to optimise");
  for (const auto& [name, t] : out)
    BITGRAD_CHECK(t.requires_grad() && t.is_leaf(), op, "parameter '", name, "' is not a leaf tensor that requires grad");
  return out;
}

optim::NamedTensors params_of(const py::object& params, const char* op) {
  if (py::hasattr(params, "named_parameters") && !py::isinstance<py::list>(params))
    return named(params.attr("named_parameters")(), op);
  return named(params, op);
}

std::vector<Tensor> tensors(const py::object& params) {
  std::vector<Tensor> out;
  if (py::hasattr(params, "parameters") && !py::isinstance<py::list>(params)) return params.attr("parameters")().cast<std::vector<Tensor>>();
  for (const py::handle h : params) {
    if (py::isinstance<py::tuple>(h) && py::len(h) == 2) out.push_back(h.cast<py::tuple>()[1].cast<Tensor>());
    else out.push_back(h.cast<Tensor>());
  }
  return out;
}

}  // namespace

void init_optim(py::module_& top) {
  py::module_ m = top.def_submodule("optim", "Optimizers, learning-rate schedules and gradient clipping (numerics.md, Optimizers).");

  py::class_<optim::Schedule>(m, "Schedule", "Learning rate of a (0-based) step: constant, step or cosine, after a linear warm-up.")
      .def(py::init([](const std::string& kind, double lr, double gamma, std::int64_t step_size, std::int64_t total_steps, double min_lr,
                       std::int64_t warmup_steps) {
             optim::Schedule s;
             if (kind == "constant") s.kind = optim::Schedule::Kind::constant;
             else if (kind == "step") s.kind = optim::Schedule::Kind::step;
             else if (kind == "cosine") s.kind = optim::Schedule::Kind::cosine;
             else detail::fail("Schedule", "kind is '", kind, "'; expected one of constant, step, cosine");
             BITGRAD_CHECK(s.kind != optim::Schedule::Kind::cosine || total_steps > 0, "Schedule", "cosine needs total_steps > 0");
             s.lr = lr;
             s.gamma = gamma;
             s.step_size = step_size;
             s.total_steps = total_steps;
             s.min_lr = min_lr;
             s.warmup_steps = warmup_steps;
             return s;
           }),
           py::arg("kind") = "constant", py::kw_only(), py::arg("lr"), py::arg("gamma") = 0.1, py::arg("step_size") = 1000,
           py::arg("total_steps") = 0, py::arg("min_lr") = 0.0, py::arg("warmup_steps") = 0)
      .def("at", &optim::Schedule::at, py::arg("step"))
      .def("__call__", &optim::Schedule::at, py::arg("step"))
      .def("__repr__", &optim::Schedule::describe);

  py::class_<PyOptimizer>(m, "Optimizer", "An optimizer over named parameters with its learning rate or schedule.")
      .def("step", [](PyOptimizer& o, std::optional<double> lr) {
        const double r = lr ? *lr : o.current_lr();
        nogil([&] { o.opt->step(r); });
      }, py::arg("lr") = py::none(), "One update from the parameters' gradients (those without one are left alone).")
      .def("zero_grad", [](PyOptimizer& o) { o.opt->zero_grad(); }, "Drops every parameter's gradient.")
      .def_property("lr", &PyOptimizer::current_lr, [](PyOptimizer& o, double lr) {
        o.lr = lr;
        o.schedule.reset();
      }, "The learning rate the next step uses (the schedule's, when there is one); assigning sets a constant rate.")
      .def_property_readonly("steps", [](const PyOptimizer& o) { return o.opt->steps(); })
      .def_property_readonly("params", [](const PyOptimizer& o) { return o.opt->params(); })
      .def("state_dict", [](const PyOptimizer& o) {
        py::dict d;
        for (const auto& [name, t] : o.opt->state()) d[py::str(name)] = t;
        d["steps"] = o.opt->steps();
        return d;
      }, "Buffers by name (the tensors themselves) and the step count.")
      .def("load_state_dict", [](PyOptimizer& o, const py::dict& d) {
        optim::NamedTensors st;
        std::int64_t steps = 0;
        for (auto item : d) {
          const std::string k = item.first.cast<std::string>();
          if (k == "steps") steps = item.second.cast<std::int64_t>();
          else st.emplace_back(k, item.second.cast<Tensor>());
        }
        o.opt->load_state(st, steps);
      }, py::arg("state"))
      .def("__repr__", [](const PyOptimizer& o) {
        return o.opt->describe() + ", lr " + (o.schedule ? o.schedule->describe() : std::to_string(o.lr));
      });

  // lr: a number, or an optim.Schedule (then the same as schedule=, which it may not repeat)
  auto make = [](std::unique_ptr<optim::Optimizer> opt, const py::object& lr, std::optional<optim::Schedule> sched) {
    PyOptimizer o;
    if (py::isinstance<optim::Schedule>(lr)) {
      BITGRAD_CHECK(!sched, opt->describe().c_str(), "the learning rate is a Schedule and schedule= is given too; pass one of them");
      sched = lr.cast<optim::Schedule>();
      o.lr = sched->at(0);
    } else if (py::isinstance<py::float_>(lr) || (py::isinstance<py::int_>(lr) && !py::isinstance<py::bool_>(lr))) {
      o.lr = lr.cast<double>();
    } else {
      throw py::type_error(opt->describe() + ": lr is a " + std::string(py::str(py::type::of(lr).attr("__name__"))) +
                           "; expected a number or a bitgrad.optim.Schedule");
    }
    o.opt = std::move(opt);
    o.schedule = std::move(sched);
    return o;
  };
  m.def("SGD", [make](const py::object& params, const py::object& lr, double momentum, double weight_decay, bool nesterov,
                      std::optional<optim::Schedule> schedule) {
    optim::SgdOptions o;
    o.momentum = momentum;
    o.weight_decay = weight_decay;
    o.nesterov = nesterov;
    return make(std::make_unique<optim::Sgd>(params_of(params, "SGD"), o), lr, std::move(schedule));
  }, py::arg("params"), py::arg("lr") = py::float_(0.01), py::kw_only(), py::arg("momentum") = 0.0, py::arg("weight_decay") = 0.0,
        py::arg("nesterov") = false, py::arg("schedule") = py::none(),
        "SGD with momentum, weight decay and Nesterov (numerics.md, Optimizers). params: a module, (name, tensor) pairs or tensors.");
  auto adam = [make](const char* name, bool decoupled) {
    return [make, name, decoupled](const py::object& params, const py::object& lr, std::pair<double, double> betas, double eps, double weight_decay,
                                   bool decay_matrices_only, std::optional<optim::Schedule> schedule) {
      optim::AdamOptions o;
      o.beta1 = betas.first;
      o.beta2 = betas.second;
      o.eps = eps;
      o.weight_decay = weight_decay;
      o.decoupled = decoupled;
      o.decay_matrices_only = decay_matrices_only;
      return make(std::make_unique<optim::Adam>(params_of(params, name), o), lr, std::move(schedule));
    };
  };
  m.def("Adam", adam("Adam", false), py::arg("params"), py::arg("lr") = py::float_(0.001), py::kw_only(), py::arg("betas") = std::make_pair(0.9, 0.999),
        py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.0, py::arg("decay_matrices_only") = false, py::arg("schedule") = py::none());
  m.def("AdamW", adam("AdamW", true), py::arg("params"), py::arg("lr") = py::float_(0.001), py::kw_only(), py::arg("betas") = std::make_pair(0.9, 0.999),
        py::arg("eps") = 1e-8, py::arg("weight_decay") = 0.01, py::arg("decay_matrices_only") = false, py::arg("schedule") = py::none(),
        "Adam with decoupled weight decay.");
  m.def("clip_grad_norm", [](const py::object& params, double max_norm) {
    const std::vector<Tensor> ps = tensors(params);
    return nogil([&] { return optim::clip_grad_norm(ps, max_norm); });
  }, py::arg("params"), py::arg("max_norm"),
        "Scales every gradient by max_norm / (norm + 1e-6) when the global L2 norm exceeds max_norm; returns the norm before.");
  m.def("grad_norm", [](const py::object& params) {
    const std::vector<Tensor> ps = tensors(params);
    return nogil([&] { return optim::grad_norm(ps); });
  }, py::arg("params"), "The global gradient L2 norm (the canonical order).");
}

}  // namespace bitgrad::python
