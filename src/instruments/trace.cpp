// Fingerprint traces as JSON records (docs/cli.md, "Traces").
#include "instruments/trace.hpp"

#include <cstdio>
#include <cstring>

#include "bitgrad/instruments.hpp"
#include "io/format.hpp"

#ifndef BITGRAD_SOURCE_DIR
#define BITGRAD_SOURCE_DIR ""
#endif

namespace bitgrad::instruments {

std::string hex32(std::uint32_t v) { return io::strprintf("0x%08x", v); }

std::string site_string(const char* file, int line) {
  std::string f = file ? file : "";
  const std::string root = std::string(BITGRAD_SOURCE_DIR) + "/";
  if (root.size() > 1 && f.rfind(root, 0) == 0) f = f.substr(root.size());
  // a build that compiles by relative paths (a build directory beside the sources, or ccache
  // with base_dir) names the file from the build directory: the same site either way
  while (f.rfind("../", 0) == 0) f = f.substr(3);
  return f + ":" + std::to_string(line);
}

store::Json step_record_json(const StepRecord& r) {
  std::uint32_t bits;
  std::memcpy(&bits, &r.loss, 4);
  auto pairs = [](const std::vector<std::pair<std::string, Digest128>>& v) {
    store::Json a = store::Json::array();
    for (const auto& [name, d] : v) a.push_back({name, d.hex()});
    return a;
  };
  return {{"step", r.step}, {"epoch", r.epoch}, {"batch", r.batch}, {"input", r.input.hex()},
          {"loss", hex32(bits)}, {"grad", pairs(r.grads)}, {"param", pairs(r.params)}};
}

void OpTrace::begin_step(std::int64_t step) {
  step_ = step;
  seq_ = 0;
}

void OpTrace::record(const char* op, const Tensor& value, const char* file, int line, const std::string& label, bool backward, int input) {
  store::Json r = {{"step", step_}, {"seq", seq_++}, {"phase", backward ? "backward" : "forward"}, {"op", op}};
  if (backward) r["input"] = input;
  r["label"] = label;
  r["site"] = site_string(file, line);
  r["shape"] = value.shape().str();
  r["hash"] = fingerprint(value).hex();
  out_.write(r);
}

}  // namespace bitgrad::instruments
