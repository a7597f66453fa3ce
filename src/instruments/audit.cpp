// `bitgrad audit`: the same training under different settings, compared pairwise.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/manifest.hpp"
#include "io/format.hpp"
#include "dist/plan.hpp"
#include "store/checkpoint.hpp"
#include "store/run_dir.hpp"
#include "store/study_dir.hpp"

namespace bitgrad::instruments {
namespace {

// One compared quantity of a run: its values (for the size of a difference) and the exact
// bits of its tensors (which decide equality: +0 and -0 differ, equal NaNs are equal).
// The bits are hashed as the list of the tensors' own fingerprints, which is what a run's
// step trace records: a run on several ranks is compared through its trace.
struct Field {
  std::vector<double> values;
  Fingerprint bits;
  void add(const Tensor& t) {
    const Tensor c = t.contiguous_copy();
    add_digest(fingerprint(c).hex());
    add_values(c);
  }
  void add_digest(const std::string& hex) { bits.add_bytes(hex.data(), hex.size()); }
  void add_values(const Tensor& t) {
    const Tensor d = t.contiguous_copy().cast(DType::f64);
    values.insert(values.end(), d.data<double>(), d.data<double>() + d.numel());
  }
};
const char* const kFields[] = {"predictions", "loss", "weight_gradients", "bias_gradients", "optimizer_state"};
constexpr int kNumFields = 5;

struct Outcome {
  int ranks = 1, threads, workers;
  std::int64_t accumulate;
  std::unique_ptr<Field> field[kNumFields];
  std::string fingerprint;
  std::string digest(int f) const { return field[f]->bits.digest().hex(); }
};

// total absolute difference, as in the 2017 experiment (NaN where a NaN meets a number)
double total_abs(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i]))) s += std::fabs(a[i] - b[i]);
  return s;
}

// A matrix cell: "=" for the same bits, else the total absolute difference ("0*" when the
// values are equal but the bits are not: signed zeros or NaN payloads).
std::string cell(bool same_bits, double d) {
  if (same_bits) return "=";
  if (d == 0) return "0*";
  return io::strprintf("%.3g", d);
}


// mpirun on PATH, or an error saying how to get it.
std::string find_mpirun() {
  const char* path = std::getenv("PATH");
  std::string p = path ? path : "";
  std::size_t at = 0;
  while (at <= p.size()) {
    const std::size_t end = p.find(':', at);
    const std::string d = p.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const std::string f = (d.empty() ? "." : d) + "/mpirun";
    if (::access(f.c_str(), X_OK) == 0) return f;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  throw Error("audit: --ranks needs mpirun, which is not on PATH (Debian: apt-get install openmpi-bin)");
}

// A run on `o.ranks` ranks: `mpirun -n R bitgrad train` into dir, checkpointing the step
// before the last; the gradients' and loss's bits come from its step trace, their values from
// the last step replayed in this process from that checkpoint (whose own bits must match the
// trace), the parameters and optimizer state from its final checkpoint.
void ranks_run(const train::Config& cfg, Outcome& o, std::int64_t steps, const std::string& dir, std::ostream& out) {
  const std::string mpirun = find_mpirun();
  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  BITGRAD_CHECK(n > 0, "audit", "cannot find the bitgrad executable to launch under mpirun");
  const std::string cmd = io::shell_quoted(mpirun) + " --oversubscribe --bind-to none" + (::geteuid() == 0 ? " --allow-run-as-root" : "") + " -n " +
                          std::to_string(o.ranks) + " " + io::shell_quoted(exe) + " train " + io::shell_quoted(cfg.file) + " --out " + io::shell_quoted(dir) + " --steps " +
                          std::to_string(steps) + " --threads " + std::to_string(o.threads) + " --workers " + std::to_string(o.workers) +
                          " --accumulate " + std::to_string(o.accumulate) + " --checkpoint-every " + std::to_string(std::max<std::int64_t>(1, steps - 1)) +
                          " --no-epoch-checkpoints --no-progress --trace steps >" + io::shell_quoted(dir + ".log") + " 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    const std::string log = io::exists(dir + ".log") ? io::read_file(dir + ".log") : "";
    throw Error("audit: the run on " + std::to_string(o.ranks) + " ranks failed (" + cmd + "): " + printable_excerpt(log.substr(log.size() > 2000 ? log.size() - 2000 : 0)));
  }
  train::Config c = cfg;
  c.train.accumulate = o.accumulate;
  ThreadCountScope threads(o.threads);
  train::Session session(c, train::train_dataset(c), train::test_dataset(c), 0);
  session.restore(store::load_checkpoint(dir, store::checkpoint_name(steps - 1)), dir);
  session.step(steps - 1);  // the gradients' values
  const std::vector<store::Json> trace = store::RunDir::open(dir, "audit").read_lines("trace.jsonl");
  BITGRAD_CHECK(!trace.empty() && trace.back().at("step").get<std::int64_t>() == steps, "audit", dir, "/trace.jsonl does not end at step ", steps);
  const store::Json& last = trace.back();
  const std::string loss_hex = last.at("loss").get<std::string>();
  const std::uint32_t bits = static_cast<std::uint32_t>(std::stoul(loss_hex, nullptr, 16));
  float loss;
  std::memcpy(&loss, &bits, sizeof loss);
  o.field[1]->add(Tensor::scalar(loss));
  std::size_t k = 0;
  bool replay_matches = true;
  for (const auto& [name, p] : session.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    const std::string d = last.at("grad").at(k).at(1).get<std::string>();
    replay_matches = replay_matches && d == fingerprint(g.contiguous_copy()).hex();
    o.field[p.ndim() >= 2 ? 2 : 3]->add_digest(d);
    o.field[p.ndim() >= 2 ? 2 : 3]->add_values(g);
    ++k;
  }
  if (!replay_matches)
    out << "note: run on " << o.ranks << " ranks: its last step's gradients differ from that step replayed in one process from its checkpoint\n";
  session.restore(store::load_checkpoint(dir, store::checkpoint_name(steps)), dir);
}

}  // namespace

int audit(const train::Config& cfg0, const AuditOptions& opt, std::ostream& out) {
  BITGRAD_CHECK(!opt.threads.empty() && !opt.workers.empty() && !opt.accumulate.empty() && !opt.ranks.empty(), "audit",
                "the setting lists must not be empty");
  for (int r : opt.ranks) {
    BITGRAD_CHECK(r >= 1, "audit", "--ranks must be at least 1, got ", r);
    if (r > 1)
      for (std::int64_t a : opt.accumulate)
        if (const std::string why = dist::layout_problem(cfg0.train.batch_size, a, r); !why.empty()) throw Error("audit: --ranks " + std::to_string(r) + ": " + why);
  }
  if (*std::max_element(opt.ranks.begin(), opt.ranks.end()) > 1) find_mpirun();
  for (std::int64_t a : opt.accumulate)  // before the run count, which a bad value would make meaningless
    BITGRAD_CHECK(a >= 1 && cfg0.train.batch_size % a == 0, "audit", "batch size ", cfg0.train.batch_size, " is not divisible by accumulate ", a);
  const int combos = static_cast<int>(opt.threads.size() * opt.workers.size() * opt.accumulate.size() * opt.ranks.size());
  const int runs = opt.runs > 0 ? opt.runs : combos;
  BITGRAD_CHECK(runs >= 2, "audit", "needs at least 2 runs to compare, got ", runs,
                " (list several --threads, --workers or --accumulate values, or ask for --runs R)");
  check_fp_environment();
  auto train_ds = train::train_dataset(cfg0);
  auto test_ds = train::test_dataset(cfg0);
  const std::string dir = opt.out.empty() ? train::default_run_dir(cfg0.file, "audit-", false) : opt.out;
  const store::StudyDir study = store::StudyDir::create(dir, "audit");  // locked until the result is written
  // the fixed evaluation batch: the first evaluation-batch-size samples of the test set (or
  // of the training set without one)
  const data::Dataset& eval_ds = test_ds ? *test_ds : *train_ds;
  data::LoaderOptions lo;
  lo.batch_size = std::min<std::int64_t>(cfg0.eval.batch_size, eval_ds.size());
  lo.shuffle = false;
  data::Batch eval = data::make_batch(eval_ds, lo, data::epoch_order(eval_ds.size(), false, 0, 0), 0, 0);

  for (std::int64_t a : opt.accumulate) {
    if (a > 1 && !train::whole_subtree(cfg0.train.batch_size / a))
      out << "note: accumulate " << a << " gives micro-batches of " << cfg0.train.batch_size / a
          << " samples, not a power-of-two number of 32-sample blocks: contract T5 does not promise equality with accumulate 1\n";
  }
  std::vector<Outcome> res;
  for (int i = 0; i < runs; ++i) {
    const int c = i % combos;
    Outcome o;
    o.threads = opt.threads[static_cast<std::size_t>(c) % opt.threads.size()];
    o.workers = opt.workers[(static_cast<std::size_t>(c) / opt.threads.size()) % opt.workers.size()];
    o.accumulate = opt.accumulate[(static_cast<std::size_t>(c) / (opt.threads.size() * opt.workers.size())) % opt.accumulate.size()];
    o.ranks = opt.ranks[(static_cast<std::size_t>(c) / (opt.threads.size() * opt.workers.size() * opt.accumulate.size())) % opt.ranks.size()];
    train::Config cfg = cfg0;
    cfg.train.accumulate = o.accumulate;
    ThreadCountScope threads(o.threads);
    train::Session session(cfg, train_ds, test_ds, o.workers);
    const std::int64_t steps = opt.steps >= 0 ? opt.steps : session.planned_steps();
    BITGRAD_CHECK(steps >= 1, "audit", "needs at least one step");
    for (auto& f : o.field) f = std::make_unique<Field>();
    if (o.ranks > 1) {
      ranks_run(cfg0, o, steps, dir + "/run-" + std::to_string(i + 1), out);
      // the final state, restored from the run's last checkpoint
      session.restore(store::load_checkpoint(dir + "/run-" + std::to_string(i + 1), store::checkpoint_name(steps)), dir);
    } else {
      float loss = 0;
      for (std::int64_t s = 0; s < steps; ++s) loss = session.step(s).loss;
      o.field[1]->add(Tensor::scalar(loss));
      for (const auto& [name, p] : session.params()) {
        Tensor g = p.grad();
        if (g.defined()) o.field[p.ndim() >= 2 ? 2 : 3]->add(g);
      }
    }
    o.field[0]->add(session.predict(eval.x));
    for (const auto& [name, t] : session.optimizer().state()) o.field[4]->add(t);
    o.fingerprint = session.fingerprint().hex();
    out << io::strprintf("run %d: ranks %d, threads %d, workers %d, accumulate %lld, %lld steps: loss %.9g, fingerprint %s\n", i + 1, o.ranks,
                         o.threads, o.workers, static_cast<long long>(o.accumulate), static_cast<long long>(steps),
                         o.field[1]->values.empty() ? 0.0 : o.field[1]->values[0], o.fingerprint.c_str())
        << std::flush;
    res.push_back(std::move(o));
  }

  nlohmann::ordered_json j;
  j["config"] = cfg0.file;
  j["config_hash"] = train::config_hash(cfg0);
  j["evaluation_batch"] = lo.batch_size;
  nlohmann::ordered_json rj = nlohmann::ordered_json::array();
  for (const auto& o : res)
    rj.push_back({{"ranks", o.ranks}, {"threads", o.threads}, {"workers", o.workers}, {"accumulate", o.accumulate}, {"fingerprint", o.fingerprint}});
  j["runs"] = rj;
  bool all_equal = true, zeros_with_other_bits = false;
  nlohmann::ordered_json mats, same;
  for (int f = 0; f < kNumFields; ++f) {
    out << "\n" << kFields[f] << " (total absolute difference between runs; = the same bits):\n";
    nlohmann::ordered_json m = nlohmann::ordered_json::array(), e = nlohmann::ordered_json::array();
    for (int a = 0; a < runs; ++a) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array(), erow = nlohmann::ordered_json::array();
      out << (a ? " [" : "[[");
      for (int b = 0; b < runs; ++b) {
        const Outcome &ra = res[static_cast<std::size_t>(a)], &rb = res[static_cast<std::size_t>(b)];
        const bool bits = ra.digest(f) == rb.digest(f);
        const double d = total_abs(ra.field[f]->values, rb.field[f]->values);
        all_equal = all_equal && bits;
        zeros_with_other_bits = zeros_with_other_bits || (!bits && d == 0);
        row.push_back(d);
        erow.push_back(bits);
        out << (b ? " " : "") << cell(bits, d);
      }
      out << (a + 1 == runs ? "]]\n" : "]\n");
      m.push_back(row);
      e.push_back(erow);
    }
    mats[kFields[f]] = m;
    same[kFields[f]] = e;
  }
  if (zeros_with_other_bits) out << "(0*: equal values in other bits: signed zeros or NaN payloads)\n";
  j["matrices"] = mats;
  j["bitwise_equal"] = same;
  j["all_zero"] = all_equal;  // decided by the bits
  study.write("audit.json", j, study_manifest_json(RunKind::audit, cfg0, opt.command, false));
  out << "\n" << (all_equal ? "all bitwise equal: " : "NOT all equal: ") << runs << " runs, matrices in " << dir << "/audit.json\n";
  return all_equal ? 0 : 1;
}

}  // namespace bitgrad::instruments
