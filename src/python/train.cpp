// Training from Python: configurations (a file, a dict or TOML text), bitgrad.Session (the
// CLI's training step, stepped by a Python loop: the same bits as `bitgrad train`), and
// bitgrad.train (the whole `bitgrad train`, run directory and instruments included). Also the
// safetensors files.
#include <csignal>

#include "bitgrad/instruments.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/layers.hpp"
#include "bitgrad/session.hpp"
#include "python/bind.hpp"
#include "python/pymodule.hpp"

namespace bitgrad::python {
namespace {

py::object none_if_negative(double v) { return v < 0 ? py::object(py::none()) : py::object(py::float_(v)); }

// A training session of a configuration, stepped from Python.
class PySession {
 public:
  PySession(train::Config cfg, std::optional<int> threads, std::optional<int> workers, std::optional<std::uint64_t> seed,
            std::optional<std::int64_t> accumulate) {
    if (seed) cfg.seed = *seed;
    if (accumulate) cfg.train.accumulate = *accumulate;
    if (threads) cfg.run.threads = *threads;
    if (workers) cfg.run.workers = *workers;
    BITGRAD_CHECK(cfg.run.threads >= 0, "Session", "threads is ", cfg.run.threads, "; expected >= 1 (or 0: as set)");
    BITGRAD_CHECK(cfg.run.workers >= 0, "Session", "workers is ", cfg.run.workers, "; expected >= 0");
    check_fp_environment();
    // the session's own execution context: Python threads stepping several sessions at once
    // do not share a pool or a thread count
    context_ = std::make_unique<ExecContext>(cfg.run.threads > 0 ? cfg.run.threads : num_threads(), active_isa());
    nogil([&] {
      ExecScope t(*context_);
      session_.emplace(cfg, train::train_dataset(cfg), train::test_dataset(cfg), cfg.run.workers);
    });
  }
  py::dict step() {
    const train::Session::StepOut o = nogil([&] {
      ExecScope t(*context_);
      return session_->step(done_);
    });
    ++done_;
    py::dict d;
    d["step"] = done_;
    d["epoch"] = o.batch.epoch;
    d["batch"] = o.batch.index;
    d["loss"] = static_cast<double>(o.loss);
    d["lr"] = o.lr;
    d["grad_norm"] = none_if_negative(o.grad_norm);
    if (session_->config().train.precision != Precision::fp32) {
      d["loss_scale"] = o.loss_scale;
      d["skipped"] = o.skipped;
    }
    return d;
  }
  py::dict evaluate() const {
    const train::Eval e = nogil([&] {
      ExecScope t(*context_);
      return session_->evaluate();
    });
    py::dict d;
    d["accuracy"] = none_if_negative(e.accuracy);
    d["loss"] = e.loss;
    return d;
  }
  Tensor predict(const Tensor& x) const {
    return nogil([&] {
      ExecScope t(*context_);
      return session_->predict(x);
    });
  }
  std::string fingerprint() const {
    return nogil([&] {
      ExecScope t(*context_);
      return session_->fingerprint().hex();
    });
  }
  const train::Session& session() const { return *session_; }
  std::int64_t steps_done() const { return done_; }

 private:
  std::unique_ptr<ExecContext> context_;  // before session_: destroyed after it
  std::optional<train::Session> session_;
  std::int64_t done_ = 0;
};

// While a run trains with the GIL released, SIGINT and SIGTERM ask it to stop after its step and
// write a checkpoint (as on the command line); the handlers found are put back afterwards.
extern "C" void on_stop(int sig) { train::request_stop(sig); }
class StopSignals {
 public:
  StopSignals() {
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &sa, &int_);
    ::sigaction(SIGTERM, &sa, &term_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &int_, nullptr);
    ::sigaction(SIGTERM, &term_, nullptr);
    train::clear_stop_request();
  }

 private:
  struct sigaction int_ {}, term_ {};
};

py::dict run_result(const train::RunResult& r) {
  py::dict d;
  d["fingerprint"] = r.fingerprint.hex();
  d["steps"] = r.steps;
  d["last_loss"] = r.last_loss;
  d["test_accuracy"] = r.test_accuracy;
  d["test_loss"] = r.test_loss;
  d["out_dir"] = r.out_dir;
  return d;
}

}  // namespace

void init_train(py::module_& m) {
  py::class_<train::Config>(m, "Config", "A checked training configuration (docs/cli.md documents the file).")
      .def_readonly("file", &train::Config::file)
      .def_readwrite("seed", &train::Config::seed)
      .def_property_readonly("batch_size", [](const train::Config& c) { return c.train.batch_size; })
      .def_property_readonly("epochs", [](const train::Config& c) { return c.train.epochs; })
      .def_property_readonly("steps", [](const train::Config& c) { return c.train.steps; })
      .def_property_readonly("accumulate", [](const train::Config& c) { return c.train.accumulate; })
      .def_property("threads", [](const train::Config& c) { return c.run.threads; }, [](train::Config& c, int v) { c.run.threads = v; })
      .def_property("workers", [](const train::Config& c) { return c.run.workers; }, [](train::Config& c, int v) { c.run.workers = v; })
      .def_property_readonly("precision", [](const train::Config& c) { return std::string(precision_name(c.train.precision)); })
      .def("hash", &train::config_hash, "XXH3-128 of the settings that define the training (everything but [run]).")
      .def("toml", &train::resolved_toml, "Every value, defaults included, as TOML.")
      .def("__repr__", [](const train::Config& c) { return "<bitgrad.Config " + c.file + " " + train::config_hash(c) + ">"; });
  m.def("load_config", &train::load_config, py::arg("path"), "Reads and checks a configuration file; errors name FILE:LINE.");
  m.def("parse_config", &train::parse_config, py::arg("text"), py::arg("name") = "<string>", "A configuration from TOML text.");

  // the layer table (bitgrad/layers.hpp); bitgrad.nn.from_layers writes its dicts as TOML for it
  py::module_ nnm = m.attr("nn").cast<py::module_>();
  nnm.def("_from_layers", [](const std::string& toml, const std::vector<std::int64_t>& input, std::int64_t vocabulary, std::optional<std::uint64_t> seed,
                             const std::string& weights) {
    BITGRAD_CHECK(!input.empty(), "from_layers", "input_shape is empty; give the batch and each sample's dimensions, e.g. [1, 3, 32, 32]");
    for (std::int64_t d : input) BITGRAD_CHECK(d > 0, "from_layers", "input_shape ", Shape(input).str(), " has a dimension below 1");
    BITGRAD_CHECK(vocabulary >= 0, "from_layers", "vocabulary is ", vocabulary, "; expected 0 (no token inputs) or the number of tokens");
    const train::Config c = train::parse_config(toml, "bitgrad.nn.from_layers");
    auto s = train::build_layers(c.model.layers, Shape(input), vocabulary, "bitgrad.nn.from_layers");
    nn::initialize(*s, nn::parse_init(weights), module_seed(seed));
    std::uint64_t site = 0;
    s->number_sites(site);
    return s;
  }, py::arg("toml"), py::arg("input_shape"), py::arg("vocabulary"), py::arg("seed"), py::arg("weights"));
  nnm.def("layer_kinds", [] {
    py::list out;
    for (const train::LayerKindInfo& k : train::layer_kinds()) {
      py::dict d;
      d["type"] = k.name;
      d["python"] = k.python;
      d["options"] = k.options;
      d["before"] = k.before;
      d["input_shape"] = k.input;
      d["vocabulary"] = k.vocabulary;
      out.append(d);
    }
    return out;
  }, "The kinds of [model] layers, in the table's order: type, the bitgrad.nn call that makes the same module for the example "
     "(python), and the example (input_shape, vocabulary, options and a layer needed before it, as inline TOML).");

  py::class_<PySession, std::shared_ptr<PySession>>(m, "Session",
                                                    "The CLI's training step for a configuration, stepped from Python: after n "
                                                    "steps its fingerprint is that of `bitgrad train CONFIG --steps n`.")
      .def(py::init([](const py::object& config, std::optional<int> threads, std::optional<int> workers, std::optional<std::uint64_t> seed,
                       std::optional<std::int64_t> accumulate) {
             return without_gil_on_delete(new PySession(to_config(config), threads, workers, seed, accumulate));
           }),
           py::arg("config"), py::kw_only(), py::arg("threads") = py::none(), py::arg("workers") = py::none(), py::arg("seed") = py::none(),
           py::arg("accumulate") = py::none(), "config: a file path, a dict (the file's tables) or a bitgrad.Config.")
      .def("step", &PySession::step, "One optimizer step; returns its record (step from 1, epoch, batch, loss, lr, grad_norm).")
      .def("evaluate", &PySession::evaluate, "Test accuracy (None for regression) and loss.")
      .def("predict", &PySession::predict, py::arg("x"), "Evaluation-mode forward of the model.")
      .def("fingerprint", &PySession::fingerprint, "Parameters, optimizer buffers and step count (what `bitgrad train` prints).")
      .def_property_readonly("steps", &PySession::steps_done, "Steps taken.")
      .def_property_readonly("planned_steps", [](const PySession& s) { return s.session().planned_steps(); })
      .def_property_readonly("batches_per_epoch", [](const PySession& s) { return s.session().batches_per_epoch(); })
      .def_property_readonly("model", [](const PySession& s) { return s.session().model_ptr(); })
      .def_property_readonly("config", [](const PySession& s) { return s.session().config(); })
      .def("named_parameters", [](const PySession& s) { return s.session().params(); })
      .def("parameters", [](const PySession& s) {
        std::vector<Tensor> out;
        for (const auto& [n, t] : s.session().params()) out.push_back(t);
        return out;
      })
      .def("optimizer_state", [](const PySession& s) {
        py::dict d;
        for (const auto& [n, t] : s.session().optimizer().state()) d[py::str(n)] = t;
        return d;
      });

  m.def("train", [](const py::object& config, std::optional<std::int64_t> steps, std::optional<std::int64_t> epochs, const std::string& out,
                    const std::string& resume, std::optional<int> threads, std::optional<int> workers, std::optional<std::uint64_t> seed,
                    std::optional<std::int64_t> accumulate, std::optional<std::string> trace, bool detect_anomaly, const std::string& shadow,
                    std::int64_t checkpoint_every, std::optional<std::uint64_t> perturb_order, bool quiet) {
    train::Config cfg = to_config(config);
    instruments::TrainOptions o;
    if (steps) o.steps = *steps;
    if (epochs) o.epochs = *epochs;
    o.out = out;
    o.resume = resume;
    if (threads) o.threads = *threads;
    if (workers) o.workers = *workers;
    o.seed = seed;
    if (accumulate) o.accumulate = *accumulate;
    if (trace) o.trace = instruments::parse_trace_level(*trace);
    o.detect_anomaly = detect_anomaly;
    o.shadow = instruments::parse_shadow(shadow);
    o.checkpoint_every = checkpoint_every;
    o.perturb_order = perturb_order;
    o.progress = 0;
    o.command = "bitgrad.train (Python)";
    Output output(quiet);
    const train::RunResult r = nogil([&] {
      StopSignals signals;
      return instruments::train(cfg, o, output.os);
    });
    output.os.flush();
    return run_result(r);
  }, py::arg("config"), py::kw_only(), py::arg("steps") = py::none(), py::arg("epochs") = py::none(), py::arg("out") = "",
        py::arg("resume") = "", py::arg("threads") = py::none(), py::arg("workers") = py::none(), py::arg("seed") = py::none(),
        py::arg("accumulate") = py::none(), py::arg("trace") = py::none(), py::arg("detect_anomaly") = false, py::arg("shadow") = "",
        py::arg("checkpoint_every") = 0, py::arg("perturb_order") = py::none(), py::arg("quiet") = false,
        "`bitgrad train`: trains to the stop point with the run directory (manifest, metrics, traces, checkpoints) and returns "
        "the result (fingerprint, steps, last_loss, test_accuracy, test_loss, out_dir). Ctrl-C stops after the step in progress "
        "with a checkpoint and raises bitgrad.Interrupted.");

  py::module_ io = m.def_submodule("io", "safetensors files (with bitgrad's checksum) and atomic writes.");
  io.def("save_safetensors", [](const std::string& path, const py::object& tensors, const std::map<std::string, std::string>& metadata) {
    io::NamedTensors ts;
    if (py::isinstance<py::dict>(tensors))
      for (auto item : tensors.cast<py::dict>()) {
        const std::string key = py::str(item.first).cast<std::string>();
        if (!py::isinstance<Tensor>(item.second))
          throw py::type_error("save_safetensors: the value of '" + key + "' is a " +
                               std::string(py::str(py::type::of(item.second).attr("__name__"))) +
                               ", not a bitgrad.Tensor (a safetensors file holds tensors; an optimizer's state_dict also holds "
                               "its step count under 'steps': keep it in the metadata, metadata={'steps': str(state.pop('steps'))})");
        ts.emplace_back(key, item.second.cast<Tensor>());
      }
    else
      ts = tensors.cast<io::NamedTensors>();
    nogil([&] { io::save_safetensors(path, ts, metadata); });
  }, py::arg("path"), py::arg("tensors"), py::arg("metadata") = std::map<std::string, std::string>{},
         "Writes tensors (a dict or (name, tensor) pairs) atomically, with an XXH3-128 checksum in the metadata.");
  io.def("load_safetensors", [](const std::string& path, bool require_checksum) {
    const io::SafeTensors st = nogil([&] { return io::load_safetensors(path, require_checksum ? io::Checksum::required : io::Checksum::if_present); });
    py::dict d;
    for (const auto& [name, t] : st.tensors) d[py::str(name)] = t;
    return py::make_tuple(d, st.metadata);
  }, py::arg("path"), py::arg("require_checksum") = false,
         "(tensors, metadata) of a safetensors file; bitgrad's checksum is verified when present (required with require_checksum).");
}

}  // namespace bitgrad::python
