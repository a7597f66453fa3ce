// The manifest of a study (audit, sensitivity): kind, command, configuration, seed, data files.
#pragma once

#include <string>

#include "bitgrad/train.hpp"

namespace bitgrad::instruments {

std::string study_manifest_json(const std::string& kind, const train::Config& c, const std::string& command, bool perturbed);

}  // namespace bitgrad::instruments
