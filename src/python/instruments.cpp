// bitgrad.instruments: diff, audit, sensitivity, report and sample as functions that return
// their findings as Python objects (the JSON files they write, parsed), printing the CLI's text
// unless quiet.
#include "bitgrad/infer.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/io.hpp"
#include "python/bind.hpp"

namespace bitgrad::python {
namespace {

py::object parse_json(const std::string& path) {
  const std::string text = io::read_file(path);
  return py::module_::import("json").attr("loads")(py::str(text));
}

// Runs a study (`kind`: audit, sensitivity) into `out` (empty: runs/KIND-NAME), its printout to
// Python's stdout unless quiet, without the GIL; returns its KIND.json as a dict with out_dir.
template <class Options, class Run>
py::dict run_study(const train::Config& cfg, const std::string& kind, Options& o, const std::string& out, bool quiet, Run run,
                   int* rc = nullptr) {
  o.out = out.empty() ? train::default_run_dir(cfg.file, kind + "-", false) : out;
  o.command = "bitgrad.instruments." + kind + " (Python)";
  Output output(quiet);
  const int code = nogil([&] { return run(output.os); });
  output.os.flush();
  py::dict d = parse_json(o.out + "/" + kind + ".json");
  d["out_dir"] = o.out;
  if (rc) *rc = code;
  return d;
}
}  // namespace

void init_instruments(py::module_& top) {
  py::module_ m = top.def_submodule("instruments", "What reads and compares runs (docs/cli.md): diff, audit, sensitivity, report, sample.");

  m.def("diff", [](const std::string& a, const std::string& b, bool replay, bool quiet) {
    instruments::DiffOptions o;
    o.replay = replay;
    std::ostringstream text;
    const int rc = nogil([&] { return instruments::diff(a, b, o, text); });
    if (!quiet) py::print(text.str(), py::arg("end") = "");
    py::dict d;
    d["identical"] = rc == 0;
    d["text"] = text.str();
    return d;
  }, py::arg("run_a"), py::arg("run_b"), py::kw_only(), py::arg("replay") = true, py::arg("quiet") = false,
        "Compares two run directories: {'identical': bool, 'text': the report (the first step, tensor and op that differ, "
        "and the replayed difference)}. An error for what cannot be compared.");

  m.def("audit", [](const py::object& config, const std::vector<int>& threads, const std::vector<int>& workers,
                    const std::vector<std::int64_t>& accumulate, std::optional<std::int64_t> steps, int runs, const std::string& out, bool quiet) {
    const train::Config cfg = to_config(config);
    instruments::AuditOptions o;
    o.threads = threads;
    o.workers = workers;
    o.accumulate = accumulate;
    if (steps) o.steps = *steps;
    o.runs = runs;
    int rc = 0;
    py::dict d = run_study(cfg, "audit", o, out, quiet, [&](std::ostream& os) { return instruments::audit(cfg, o, os); }, &rc);
    d["identical"] = rc == 0;
    return d;
  }, py::arg("config"), py::kw_only(), py::arg("threads") = std::vector<int>{1}, py::arg("workers") = std::vector<int>{0},
        py::arg("accumulate") = std::vector<std::int64_t>{1}, py::arg("steps") = py::none(), py::arg("runs") = 0, py::arg("out") = "",
        py::arg("quiet") = false,
        "Trains the configuration under each combination of threads, workers and accumulate; returns audit.json (the pairwise "
        "difference matrices) with 'identical' and 'out_dir'.");

  m.def("sensitivity", [](const py::object& config, int members, std::optional<std::int64_t> steps, int threads, const std::string& out, bool quiet) {
    const train::Config cfg = to_config(config);
    instruments::SensitivityOptions o;
    o.members = members;
    if (steps) o.steps = *steps;
    o.threads = threads;
    return run_study(cfg, "sensitivity", o, out, quiet, [&](std::ostream& os) {
      instruments::sensitivity(cfg, o, os);
      return 0;
    });
  }, py::arg("config"), py::kw_only(), py::arg("members") = 4, py::arg("steps") = py::none(), py::arg("threads") = 0, py::arg("out") = "",
        py::arg("quiet") = false,
        "The canonical run beside runs with perturbed reduction orders; returns sensitivity.json (per-step loss spread and "
        "parameter distance, growth rate, accuracy spread).");

  m.def("report", [](const std::vector<std::string>& runs, const std::string& out_html, bool replace_any) {
    const instruments::ReportSummary s = nogil([&] { return instruments::write_report(runs, out_html, replace_any); });
    py::dict d;
    d["runs"] = s.runs;
    d["plots"] = s.plots;
    d["path"] = out_html;
    return d;
  }, py::arg("runs"), py::arg("out_html"), py::kw_only(), py::arg("replace_any") = false,
        "One self-contained HTML page of run directories; returns {'runs', 'plots', 'path'}.");

  m.def("sample", [](const std::string& run_dir, const std::string& prompt, std::int64_t tokens, double temperature, std::int64_t top_k,
                     std::uint64_t seed, int threads, std::optional<std::int64_t> logprobs) {
    infer::SampleOptions o;
    if (logprobs) {
      BITGRAD_CHECK(*logprobs >= 0, "sample", "logprobs must be >= 0 (or None), got ", *logprobs);
      o.logprobs = *logprobs;
    }
    o.prompt = prompt;
    o.tokens = tokens;
    o.temperature = temperature;
    o.top_k = top_k;
    o.seed = seed;
    o.threads = threads;
    const infer::SampleResult r = nogil([&] { return infer::sample(run_dir, o); });
    py::dict d;
    d["text"] = r.text;
    d["tokens"] = r.tokens;
    d["step"] = r.step;
    if (logprobs) d["logprobs"] = py::module_::import("json").attr("loads")(r.logprobs_json);
    return d;
  }, py::arg("run_dir"), py::kw_only(), py::arg("prompt") = "\n", py::arg("tokens") = 200, py::arg("temperature") = 1.0, py::arg("top_k") = 0,
        py::arg("seed") = 0, py::arg("threads") = 0, py::arg("logprobs") = py::none(),
        "Text from a trained language model: a function of (run, prompt, tokens, temperature, top_k, seed); with logprobs=K also each "
        "generated token's log-probability and the K most likely (OpenAI's object, as `bitgrad serve` writes it).");

  m.def("machine_manifest", [] { return py::module_::import("json").attr("loads")(instruments::machine_manifest_json()); },
        "What `bitgrad env` prints: version, numerics, compiler, CPU, code path, environment.");
  m.def("read_metrics", [](const std::string& run_dir) {
    const std::string text = io::read_file(run_dir + "/metrics.jsonl");
    py::list out;
    py::object loads = py::module_::import("json").attr("loads");
    std::size_t at = 0;
    while (at < text.size()) {
      std::size_t nl = text.find('\n', at);
      if (nl == std::string::npos) nl = text.size();
      if (nl > at) out.append(loads(py::str(text.substr(at, nl - at))));
      at = nl + 1;
    }
    return out;
  }, py::arg("run_dir"), "The records of a run's metrics.jsonl, in order.");
}

}  // namespace bitgrad::python
