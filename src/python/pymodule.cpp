// The trampoline of Python modules, the program's generator and the ambient context
// (pymodule.hpp). The rest of a Python module (attribute registration, __call__, train/eval,
// the containers) is Python: bitgrad/nn.py.
#include "python/pymodule.hpp"

#include <cstdint>
#include <map>
#include <set>

namespace bitgrad::python {
namespace {

// The contexts of the forwards in progress on this thread, innermost last. `authoritative`: set
// by a C++ caller's Context (a C++ Sequential running a Python module), whose mode then decides
// for every C++ module inside; otherwise each C++ module's own train()/eval() does.
struct Ambient {
  Ambient(const nn::Context& c, bool a) : ctx(c), authoritative(a) {}
  nn::Context ctx;
  bool authoritative = false;
  // the calls so far in this forward of each C++ module and of functional dropout: a module
  // called again gets ctx.call = its index (the map is looked up, never iterated)
  std::map<const nn::Module*, std::uint64_t> calls;
  std::uint64_t functional_dropouts = 0;
};
thread_local std::vector<Ambient> ambient;

py::function override_of(const nn::Module* m, const char* name) {
  py::function f = py::get_override(m, name);
  if (!f)
    throw StateError(std::string("nn.Module: the Python object of a module written in Python is gone, or its class lacks ") + name +
                     " (a subclass of bitgrad.nn.Module must call super().__init__())");
  return f;
}

// seeds given without stream= or first_index= to functional dropout: a second use would repeat
// the mask (the trap docs/python.md describes), so it is an error outside a checkpoint's recomputation
std::set<std::uint64_t>& fixed_dropout_seeds() {
  static auto* s = new std::set<std::uint64_t>();
  return *s;
}

// The call index of the k-th call (from 0) in a forward whose own context is call `outer`: a
// Python module run by a C++ parent that is itself called again keys its calls apart too.
std::uint64_t call_key(std::uint64_t outer, std::uint64_t k) {
  if (k == 0) return outer;
  if (outer == 0) return k;
  return rng::Stream(outer, "call").u64(k) | 1;
}

// the dropout id of functional dropout inside a forward: below the ids the generator gives
// layers (from 2^63) and far above any a caller numbers
constexpr std::uint64_t kFunctionalDropoutId = (std::uint64_t{1} << 63) - 1;

}  // namespace

std::optional<std::pair<rng::Stream, std::uint64_t>> functional_dropout_stream(std::int64_t row_size) {
  if (ambient.empty()) return std::nullopt;
  Ambient& a = ambient.back();
  const std::uint64_t k = call_key(a.ctx.call, a.functional_dropouts++);
  const rng::Stream s = rng::Stream(a.ctx.seed, "dropout").sub(kFunctionalDropoutId).sub(a.ctx.step).sub(k);
  return std::pair{s, static_cast<std::uint64_t>(a.ctx.row_offset * row_size)};
}

Tensor PyModule::forward(const Tensor& x, const nn::Context& ctx) {
  py::gil_scoped_acquire gil;
  return override_of(this, "_forward_in_context")(x, ctx).cast<Tensor>();
}

Shape PyModule::output_shape(const Shape& in) const {
  py::gil_scoped_acquire gil;
  const auto v = override_of(this, "_output_shape_of")(py::tuple(py::cast(in.vec()))).cast<std::vector<std::int64_t>>();
  return to_shape(v, "output_shape");
}

std::string PyModule::describe() const {
  py::gil_scoped_acquire gil;
  return override_of(this, "__repr__")().cast<std::string>();
}

std::shared_ptr<nn::Module> hold_module(const py::handle& h) {
  if (!py::isinstance<nn::Module>(h))
    throw py::type_error("expected a bitgrad.nn.Module, got " + std::string(py::str(py::type::of(h).attr("__name__"))));
  std::shared_ptr<nn::Module> m = h.cast<std::shared_ptr<nn::Module>>();
  if (!dynamic_cast<PyModule*>(m.get())) return m;
  // the aliasing pointer owns a reference to the Python object, which owns the C++ one
  auto* ref = new py::object(py::reinterpret_borrow<py::object>(h));
  std::shared_ptr<py::object> keep(ref, [](py::object* o) {
    py::gil_scoped_acquire gil;
    delete o;
  });
  return std::shared_ptr<nn::Module>(keep, m.get());
}

Generator& generator() {
  static auto* g = new Generator();
  return *g;
}

std::uint64_t module_seed(const std::optional<std::uint64_t>& seed) {
  if (seed) return *seed;
  Generator& g = generator();
  return rng::Stream(g.seed, "module").sub(g.modules++).u64(0);
}

// ids from 2^63 up: never one a caller numbers (0, 1, ... as the CLI does)
std::uint64_t dropout_id(const std::optional<std::uint64_t>& id, std::uint64_t count) {
  if (id) return *id;
  Generator& g = generator();
  const std::uint64_t first = (std::uint64_t{1} << 63) + g.dropouts;
  g.dropouts += count;
  return first;
}

nn::Context context_for(const nn::Module& m) {
  if (!ambient.empty()) {
    Ambient& a = ambient.back();
    nn::Context c = a.ctx;
    if (!a.authoritative) {
      c.training = m.training();
      c.module_modes = true;
    }
    c.call = call_key(a.ctx.call, a.calls[&m]++);
    return c;
  }
  nn::Context c;
  c.module_modes = true;
  if (m.training()) {
    c.training = true;
    c.seed = generator().seed;
    c.step = generator().steps++;
  }
  return c;
}

void init_pymodule(py::module_& m) {
  m.def("_push_context", [](const nn::Context& c, bool authoritative) { ambient.emplace_back(c, authoritative); }, py::arg("ctx"),
        py::arg("authoritative") = false);
  m.def("_pop_context", [] {
    if (!ambient.empty()) ambient.pop_back();
  });
  m.def("_context", []() -> py::object {
    if (ambient.empty()) return py::none();
    return py::cast(ambient.back().ctx);
  }, "The context of the forward in progress (or of `with bitgrad.nn.context(...)`), None outside.");
  // the frames with their call counts, for a checkpoint's recomputation to replay them
  m.def("_contexts", [] {
    py::list l;
    for (const Ambient& a : ambient) {
      py::list calls;
      // copied whole and restored whole by _set_contexts: the order of the copy reaches no result
      for (const auto& [mod, n] : a.calls) calls.append(py::make_tuple(reinterpret_cast<std::uintptr_t>(mod), n));
      l.append(py::make_tuple(a.ctx, a.authoritative, calls, a.functional_dropouts));
    }
    return l;
  });
  m.def("_set_contexts", [](const py::list& l) {
    ambient.clear();
    for (const py::handle h : l) {
      const auto t = h.cast<py::tuple>();
      Ambient a(t[0].cast<nn::Context>(), t[1].cast<bool>());
      for (const py::handle c : t[2].cast<py::list>()) {
        const auto p = c.cast<py::tuple>();
        a.calls[reinterpret_cast<const nn::Module*>(p[0].cast<std::uintptr_t>())] = p[1].cast<std::uint64_t>();
      }
      a.functional_dropouts = t[3].cast<std::uint64_t>();
      ambient.push_back(std::move(a));
    }
  });
  m.def("_next_step", [] { return generator().steps++; }, "The generator's next automatic step (a top-level training forward).");
}

void init_random(py::module_& m) {
  m.def("manual_seed", [](std::uint64_t seed) {
    generator() = Generator{seed};
    fixed_dropout_seeds().clear();
    return seed;
  }, py::arg("seed"),
        "Sets the program's seed and restarts its counters (docs/python.md, Randomness): layers made without seed=, dropout "
        "layers without layer_id=, training forwards without a step and draws without seed= are keyed by (seed, their "
        "index in program order).");
  m.def("initial_seed", [] { return generator().seed; }, "The seed manual_seed set (0 before any call).");
  m.def("get_rng_state", [] {
    const Generator& g = generator();
    py::dict d;
    d["seed"] = g.seed;
    d["modules"] = g.modules;
    d["dropouts"] = g.dropouts;
    d["steps"] = g.steps;
    d["draws"] = g.draws;
    return d;
  }, "The generator's state (ints): saved in a checkpoint, set_rng_state continues from it (T1, T7).");
  m.def("set_rng_state", [](const py::dict& d) {
    Generator g;
    for (auto item : d) {
      const std::string k = item.first.cast<std::string>();
      const std::uint64_t v = item.second.cast<std::uint64_t>();
      if (k == "seed") g.seed = v;
      else if (k == "modules") g.modules = v;
      else if (k == "dropouts") g.dropouts = v;
      else if (k == "steps") g.steps = v;
      else if (k == "draws") g.draws = v;
      else throw py::value_error("set_rng_state: unknown key '" + k + "'; expected seed, modules, dropouts, steps, draws");
    }
    generator() = g;
  }, py::arg("state"), "Restores a state get_rng_state returned.");
}

// The functional draws without seed= (dropout, randn, rand): the generator's next stream.
rng::Stream draw_stream() {
  Generator& g = generator();
  return rng::Stream(g.seed, "draw").sub(g.draws++);
}

void check_fixed_dropout_seed(std::uint64_t seed) {
  if (recomputing()) return;
  if (!fixed_dropout_seeds().insert(seed).second)
    detail::fail("dropout", "seed=", seed, " without stream= was used before: the call would draw the same mask again (every step "
                 "alike). Pass stream= (the step, say) with the seed, or leave seed out: bitgrad's generator then draws a new mask "
                 "each call (bitgrad.manual_seed sets its seed)");
}

}  // namespace bitgrad::python
