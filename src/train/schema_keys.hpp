// How the configuration schema treats a key (src/train/config.cpp's visitors; the layer
// entries of layer_table.hpp use them for their options).
#pragma once

namespace bitgrad::train {

enum KeyFlag : unsigned {
  kEarly = 1,     // read in a first pass: keys visited before it depend on it (model type, eval every)
  kUnhashed = 2,  // cannot change a result: in the resolved TOML, not in the hash
  kReadOnly = 4,  // accepted in the file (and checked), never written
};

}  // namespace bitgrad::train
