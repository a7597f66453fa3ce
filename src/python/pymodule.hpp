// Modules written in Python and randomness without traps (docs/python.md, "Modules in
// Python" and "Randomness"). PyModule is the trampoline that makes a Python subclass of
// bitgrad.nn.Module a C++ nn::Module (so optimizers, Sequential, initialisation, casts and
// fingerprints take it as any layer); the program's generator keys what a caller leaves unkeyed;
// the ambient context carries nn::Context into the C++ modules a Python forward calls.
#pragma once

#include <optional>
#include <utility>

#include "python/bind.hpp"

namespace bitgrad::python {

// The C++ side of a Python module: forward, output_shape and describe call the Python object's
// methods (with the GIL). A Python module's mode starts as training, as PyTorch's.
class PyModule : public nn::Module {
 public:
  PyModule() { train(true); }
  Tensor forward(const Tensor& x, const nn::Context& ctx) override;
  Shape output_shape(const Shape& in) const override;
  std::string describe() const override;
};

// The shared_ptr a C++ parent keeps of module h: for a Python module, one that also keeps the
// Python object alive (its forward is Python's), so a child never outlives its Python half.
std::shared_ptr<nn::Module> hold_module(const py::handle& h);

// The program's generator (bitgrad.manual_seed): what each unkeyed draw takes, in program order.
struct Generator {
  std::uint64_t seed = 0;
  std::uint64_t modules = 0;   // layers created without seed=
  std::uint64_t dropouts = 0;  // dropout ids given to layers created without layer_id=
  std::uint64_t steps = 0;     // training forwards of a top-level module without a context step
  std::uint64_t draws = 0;     // functional dropout / randn / rand calls without seed=
};
Generator& generator();  // with the GIL held
// The initialisation seed of a layer made now: `seed` when given, else the generator's next.
std::uint64_t module_seed(const std::optional<std::uint64_t>& seed);
// A dropout id: `id` when given, else the generator's next `count` ids (the first returned).
std::uint64_t dropout_id(const std::optional<std::uint64_t>& id, std::uint64_t count = 1);
// The context a C++ module's forward gets when called from Python without one: the ambient
// context of the Python forward that calls it (its mode from the module), or at top level its
// own mode with the generator's seed and next step.
nn::Context context_for(const nn::Module& m);

// The stream of a functional draw without seed= (dropout, randn, rand): (seed, "draw").sub(n),
// n counting such draws since manual_seed.
rng::Stream draw_stream();
// Functional dropout without seed= inside a forward (an ambient context): keyed as a dropout
// layer is, by the context's seed and step, a reserved id and the call's index in the forward,
// from the context's row offset (the first index: row_offset * row_size), so micro-batches and
// recomputation draw the whole batch's masks (contract T5); none outside a forward.
std::optional<std::pair<rng::Stream, std::uint64_t>> functional_dropout_stream(std::int64_t row_size);
// Functional dropout with seed= alone: an error the second time a seed is used so (outside a
// checkpoint's recomputation), since it would repeat the mask.
void check_fixed_dropout_seed(std::uint64_t seed);

void init_pymodule(py::module_& nn);  // in bitgrad.nn, after the Module class (nn.cpp)
void init_random(py::module_& m);     // manual_seed and the generator's state, in bitgrad

}  // namespace bitgrad::python
