// Why two PyTorch runs part, and what removes it: the cause `bitgrad diff` and `bitgrad audit
// --torch` name from the manifests, the records of the first differing step and the op traces
// of its replay (docs/torch.md, "From the finding to a fix").
#pragma once

#include <ostream>
#include <string>

#include "store/json_lines.hpp"

namespace bitgrad::instruments {

// What the op traces of the differing step say about its first differing op.
struct OpFinding {
  enum Kind {
    none,        // no op traces, or every op agreed
    parted,      // the two op sequences are not the same ops
    random,      // a random op whose inputs agreed: its generator's state differed
    computed,    // an op whose inputs agreed computed another result
    reordered,   // its inputs differed, but each is a value the other run's step also has: another order
    state,       // its inputs differed, from a value made before the step
  };
  Kind kind = none;
  std::string op, site;
  std::string setup_op, setup_site;  // step 1: the first op before the first model call whose output differs
};

// "cause: ..." and "fix: ..." lines for two runs recorded from PyTorch scripts (manifests ma,
// mb) whose first difference is `what` ("input", "loss", "grad NAME", "param NAME") at the
// step records x, y.
void explain_torch(const store::Json& ma, const store::Json& mb, const store::Json& x, const store::Json& y, const std::string& what,
                   const OpFinding& op, std::ostream& out);

// The way out that needs no setting at all, for causes PyTorch cannot remove (a reduction
// whose order follows the thread count): the same model trained through bitgrad.onnx.
extern const char* const kOnnxRoute;

}  // namespace bitgrad::instruments
