// Manifests inside the instruments: the names of their enum fields (one table each, through
// bitgrad/enum_names.hpp), those fields read back from a manifest, and the manifest of a study.
#pragma once

#include <string>

#include "bitgrad/enum_names.hpp"
#include "bitgrad/instruments.hpp"
#include "store/json_lines.hpp"

namespace bitgrad::instruments {

inline constexpr EnumName<RunKind> kRunKinds[] = {
    {RunKind::train, "train"}, {RunKind::audit, "audit"}, {RunKind::sensitivity, "sensitivity"}, {RunKind::scaling, "scaling"}};
inline constexpr EnumName<TraceLevel> kTraceLevels[] = {{TraceLevel::none, "none"}, {TraceLevel::steps, "steps"}, {TraceLevel::ops, "ops"}};

// The run section's enum fields of a manifest read back (`file` is where it was read from,
// `who` the command): a name this build does not know throws "WHO: FILE: run.KEY: unknown ...
// 'NAME'; expected ..."; an absent precision or trace is that of a manifest written before
// them (fp32, steps).
RunKind manifest_kind(const store::Json& manifest, const std::string& who, const std::string& file);
Precision manifest_precision(const store::Json& manifest, const std::string& who, const std::string& file);
TraceLevel manifest_trace(const store::Json& manifest, const std::string& who, const std::string& file);

std::string study_manifest_json(RunKind kind, const train::Config& c, const std::string& command, bool perturbed);

}  // namespace bitgrad::instruments
