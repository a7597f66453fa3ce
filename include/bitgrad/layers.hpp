// The layer kinds of a configuration's [model] layers, built alone: the registry behind the
// trainer's models (src/train/layer_table.hpp) opened to Python (bitgrad.nn.from_layers,
// bitgrad.nn.layer_kinds) and to tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bitgrad/nn.hpp"
#include "bitgrad/train.hpp"

namespace bitgrad::train {

// `layers` built in order for inputs of shape `input` (the batch included), as build_model
// builds a configuration's list: the same modules, the same errors (naming `file`, the line and
// the layer), each layer's parameters checked against the memory available before it allocates
// them. `vocabulary` > 0: the inputs are token windows [N, T] (an embedding's table, a linear
// with out = 0). The modules are not initialised.
std::shared_ptr<nn::Sequential> build_layers(const std::vector<LayerSpec>& layers, const Shape& input, std::int64_t vocabulary,
                                             const std::string& file);

// One line per layer kind, in the table's order: its TOML name, the bitgrad.nn call that makes
// the same module for the example input ("" where none makes it alone), and the example (an
// input shape, its options as inline TOML, a layer it needs before it).
struct LayerKindInfo {
  std::string name, python, options, before;
  std::vector<std::int64_t> input;
  std::int64_t vocabulary = 0;  // > 0: the input is token ids below it
};
std::vector<LayerKindInfo> layer_kinds();

}  // namespace bitgrad::train
