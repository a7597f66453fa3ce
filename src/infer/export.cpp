// bitgrad export RUN --safetensors FILE --onnx FILE: the latest checkpoint's
// parameters and buffers for other tools. A [model] onnx run's names are the ONNX initializers'
// (the Sequential's "0." dropped), so PyTorch's load_state_dict(..., strict=True) takes them
// (BatchNorm's num_batches_tracked included); --onnx writes the run's ONNX graph with the trained
// initializers, which onnx::load reads back to the same bits.
#include "bitgrad/infer.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/onnx.hpp"
#include "bitgrad/train.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::infer {

ExportResult export_run(const std::string& run_dir, const ExportOptions& o) {
  BITGRAD_CHECK(!o.safetensors.empty() || !o.onnx.empty(), "export", "nothing to write: give --safetensors FILE and/or --onnx FILE");
  const store::RunDir dir = store::RunDir::open(run_dir, "export");
  const train::Config cfg = train::load_config(dir.config_path());
  const bool graph = !cfg.model.onnx.empty();
  BITGRAD_CHECK(graph || o.onnx.empty(), "export", run_dir, " trained a layer list; --onnx writes models imported with [model] onnx");
  const store::Checkpoint ck = dir.latest_checkpoint();
  io::NamedTensors named;
  for (const auto& [name, t] : ck.params) {
    std::string n = name;
    if (graph) {
      BITGRAD_CHECK(n.rfind("0.", 0) == 0, "export", run_dir, ": checkpoint tensor '", n, "' is not the ONNX graph's");
      n = n.substr(2);
    }
    named.emplace_back(n, t);
  }
  ExportResult r;
  r.step = ck.info.step;
  if (!o.safetensors.empty()) {
    io::save_safetensors(o.safetensors, named, {{"format", "pt"}, {"bitgrad.run", run_dir}, {"bitgrad.step", std::to_string(ck.info.step)}});
    r.tensors = named.size();
  }
  if (!o.onnx.empty()) {
    auto g = onnx::load(cfg.model.onnx);
    auto params = g->named_parameters();
    for (auto& b : g->named_buffers()) params.push_back(b);
    BITGRAD_CHECK(params.size() == named.size(), "export", run_dir, ": the checkpoint holds ", named.size(), " tensors, ", cfg.model.onnx, " ",
                  params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      BITGRAD_CHECK(params[i].first == named[i].first && params[i].second.shape() == named[i].second.shape(), "export", run_dir,
                    ": checkpoint tensor '", named[i].first, "' does not match the graph's '", params[i].first, "'");
      params[i].second.copy_from(named[i].second);
    }
    io::write_file_atomic(o.onnx, g->to_onnx_bytes());
  }
  return r;
}

}  // namespace bitgrad::infer
