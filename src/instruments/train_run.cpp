// `bitgrad train`: train::run watched by the instruments — the manifest, the step trace
// (trace.jsonl), the op trace (ops.jsonl) and anomaly detection.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <sstream>

#include "bitgrad/autograd.hpp"
#include "bitgrad/dist.hpp"
#include "bitgrad/enum_names.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "io/format.hpp"
#include "instruments/manifest.hpp"
#include "instruments/shadow.hpp"
#include "instruments/step_tracer.hpp"
#include "instruments/trace.hpp"
#include "train/trainer.hpp"

namespace bitgrad::instruments {
namespace {

// manifest.json; a resumed run keeps the manifest it replaces in its history.
class ManifestWriter final : public train::RunObserver {
 public:
  ManifestWriter(const TrainOptions& opt, TraceLevel trace) : opt_(opt), trace_(trace) {}
  void begin(const store::RunDir* dir, train::Session& session, std::int64_t start) override {
    if (!dir) return;
    const train::Config& cfg = session.config();
    RunInfo info;
    info.command = opt_.command;
    info.config_file = cfg.file;
    info.config_hash = train::config_hash(cfg);
    info.seed = cfg.seed;
    info.threads = num_threads();
    info.workers = cfg.run.workers;
    info.accumulate = cfg.train.accumulate;
    info.precision = cfg.train.precision;
    info.perturbed = opt_.perturb_order.has_value();
    info.perturb_seed = opt_.perturb_order.value_or(0);
    info.trace = trace_;
    info.model = session.model().describe();
    for (const auto& [n, p] : session.params()) info.params.emplace_back(n, p.shape().str());
    info.data_files = cfg.data_files();
    info.resumed_at_step = start;
    info.ranks = session.world();
    if (session.world() > 1) info.hosts = session.hosts();
    dir->write_manifest(run_manifest_json(info, opt_.resume.empty() ? std::string() : dir->manifest_text()));
  }

 private:
  const TrainOptions& opt_;
  TraceLevel trace_;
};

// trace.jsonl, hashed off the critical path (instruments/step_tracer.hpp).
class StepTraceWriter final : public train::RunObserver {
 public:
  explicit StepTraceWriter(TraceLevel level) : level_(level) {}
  std::string describe() const override { return std::string(", trace ") + to_string(level_); }
  void begin(const store::RunDir* dir, train::Session&, std::int64_t) override {
    if (dir) tracer_.emplace(dir->step_trace());
  }
  void before_update() override {
    if (tracer_) tracer_->wait();
  }
  void end_step(std::int64_t step, const train::Session& session, const train::Session::StepOut& out) override {
    if (tracer_) tracer_->submit(step - 1, session, out);
  }
  void sync() override {
    if (tracer_) tracer_->wait();
  }

 private:
  TraceLevel level_;
  std::optional<StepTracer> tracer_;
};

bool all_finite(const Tensor& t, std::int64_t& at) {
  if (!is_floating(t.dtype())) return true;
  Tensor c = t.is_contiguous() ? t : t.contiguous_copy();
  bool ok = true;
  at = -1;
  BITGRAD_DISPATCH_FLOAT(c.dtype(), "detect_anomaly", T, [&] {
    const T* p = c.data<T>();
    for (std::int64_t i = 0; i < c.numel(); ++i)
      if (!std::isfinite(p[i])) {
        ok = false;
        at = i;
        return;
      }
  });
  return ok;
}

// The op hook: ops.jsonl and / or anomaly detection (the first non-finite op output or
// gradient stops the run, naming the op, its label, its call site and the step).
class OpWatch final : public train::RunObserver {
 public:
  OpWatch(bool trace, bool anomaly) : trace_(trace), anomaly_(anomaly) {}
  ~OpWatch() override {
    if (installed_) autograd::set_op_hook(nullptr, nullptr);
  }
  std::string describe() const override { return anomaly_ ? ", anomaly detection" : ""; }
  void begin(const store::RunDir* dir, train::Session&, std::int64_t) override {
    if (trace_ && dir) ops_.emplace(dir->op_trace());
    autograd::set_op_hook(&on_op, this);
    installed_ = true;
  }
  void begin_step(std::int64_t step) override {
    step_ = step;
    if (ops_) ops_->begin_step(step);
  }
  void end_step(std::int64_t, const train::Session&, const train::Session::StepOut&) override {
    if (ops_) ops_->flush();
  }
  void sync() override {  // an epoch's evaluation records its ops after end_step
    if (ops_) ops_->flush();
  }

 private:
  static void on_op(void* ctx, const autograd::OpEvent& e) {
    auto* w = static_cast<OpWatch*>(ctx);
    if (w->ops_) w->ops_->record(e.op, e.value, e.site.file, e.site.line, e.label, e.backward, e.input);
    std::int64_t at;
    if (w->anomaly_ && !all_finite(e.value, at)) {
      std::ostringstream os;
      os << "anomaly at step " << w->step_ << ": "
         << (e.backward ? "the gradient of input " + std::to_string(e.input) + " of '" : "the output of '") << e.op << "'"
         << (e.label.empty() ? "" : " (label " + e.label + ")") << ", called at " << site_string(e.site.file, e.site.line)
         << ", holds a non-finite value at element " << at << " of " << e.value.shape().str();
      throw Error(os.str());
    }
  }
  bool trace_, anomaly_, installed_ = false;
  std::int64_t step_ = 0;
  std::optional<OpTrace> ops_;
};

}  // namespace

TraceLevel parse_trace_level(const std::string& name) {
  if (auto t = enum_from_name(kTraceLevels, name)) return *t;
  throw Error("train: --trace must be " + enum_names_list(kTraceLevels) + ", got '" + name + "'");
}

const char* to_string(TraceLevel t) { return enum_name(kTraceLevels, t); }

namespace {
constexpr EnumName<Shadow> kShadows[] = {{Shadow::none, "none"}, {Shadow::f64, "f64"}};
}  // namespace

Shadow parse_shadow(const std::string& name) {
  if (name.empty()) return Shadow::none;
  if (auto s = enum_from_name(kShadows, name)) return *s;
  throw Error("train: --shadow takes f64 (a float64 twin of the run), got '" + name + "'");
}

const char* to_string(Shadow s) { return enum_name(kShadows, s); }

// A resumed run keeps the trace level it was trained with unless told otherwise (its op
// trace would otherwise stop at the resume).
TraceLevel trace_level(const TrainOptions& opt) {
  if (opt.trace) return *opt.trace;
  if (opt.resume.empty()) return TraceLevel::steps;
  const store::RunDir dir = store::RunDir::open(opt.resume, "resume");
  const std::string text = dir.manifest_text();
  if (text.empty()) return TraceLevel::steps;
  store::Json m;
  try {
    m = store::Json::parse(text);
  } catch (const std::exception&) {
    return TraceLevel::steps;  // a damaged manifest is reported where it is read in full
  }
  return manifest_trace(m, "resume", dir.file("manifest.json"));  // an unknown name is an error
}

// A resumed run reads the data its manifest hashed: a data file edited (or replaced) since
// would silently make it another run.
void check_resumed_data(const train::Config& cfg, const TrainOptions& opt) {
  if (opt.resume.empty()) return;
  const std::string text = store::RunDir::open(opt.resume, "resume").manifest_text();
  if (text.empty()) return;
  store::Json data;
  try {
    data = store::Json::parse(text).at("run").at("data");
  } catch (const std::exception&) {
    return;  // a damaged manifest is reported where it is read in full
  }
  if (!data.is_object()) return;
  const std::vector<std::string> files = cfg.data_files();
  std::size_t k = 0;
  for (auto it = data.begin(); it != data.end(); ++it, ++k) {
    // by path where the paths agree, else by position (a resume from another directory)
    const std::string f = std::find(files.begin(), files.end(), it.key()) != files.end() ? it.key() : (k < files.size() ? files[k] : "");
    if (f.empty() || !it->is_string()) continue;
    const std::string now = file_hash(f);
    if (now != it->get<std::string>())
      throw Error("resume: the data file " + f + " has changed since " + opt.resume + " was trained (hash " + now + ", the run's manifest has " +
                  it->get<std::string>() + "): the continued run would not be the same run");
  }
}

train::RunResult train(train::Config cfg, const TrainOptions& opt, std::ostream& out) {
  // data parallel: rank 0 writes the run and its traces; a check that fails here reaches every
  // rank through train::run's start-up exchange
  const bool root = dist::world_rank() == 0;
  TraceLevel level = TraceLevel::steps;
  try {
    if (root) {
      check_resumed_data(cfg, opt);
      level = trace_level(opt);
    }
    if (level == TraceLevel::ops && dist::world_size() > 1)
      throw Error("train: --trace ops records every op of a step, and on " + std::to_string(dist::world_size()) +
                  " ranks each rank runs only its shard's ops: trace ops with one process (the step trace, --trace steps, is the same on any number of ranks)");
  } catch (const std::exception& e) {
    if (dist::world_size() == 1) throw;
    train::fail_start(e.what());
  }
  ManifestWriter manifest(opt, level);
  StepTraceWriter steps(level);
  OpWatch ops(level == TraceLevel::ops, opt.detect_anomaly);
  std::vector<train::RunObserver*> observers{&manifest};
  if (level != TraceLevel::none) observers.push_back(&steps);
  if (level == TraceLevel::ops || opt.detect_anomaly) observers.push_back(&ops);
  std::optional<ShadowRun> shadow;
  if (opt.shadow == Shadow::f64) {
    shadow.emplace();
    observers.push_back(&*shadow);
  }
  train::RunResult r = train::run(std::move(cfg), opt, out, observers);
  if (shadow && root)
    out << "shadow    the float64 twin took " << io::strprintf("%.1f", shadow->seconds()) << " s of the run; its distance per step is in "
        << r.out_dir << "/metrics.jsonl (\"shadow\")\n";
  return r;
}

}  // namespace bitgrad::instruments
