// `bitgrad audit`: the same training under different settings, compared pairwise.
#include <cmath>
#include <memory>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "instruments/manifest.hpp"
#include "io/format.hpp"
#include "train/run_dir.hpp"
#include "train/session.hpp"

namespace bitgrad::instruments {
namespace {

// One compared quantity of a run: its values (for the size of a difference) and the exact
// bits of its tensors (which decide equality: +0 and -0 differ, equal NaNs are equal).
struct Field {
  std::vector<double> values;
  Fingerprint bits;
  void add(const Tensor& t) {
    const Tensor c = t.contiguous_copy();
    bits.add(c);
    const Tensor d = c.cast(DType::f64);
    values.insert(values.end(), d.data<double>(), d.data<double>() + d.numel());
  }
};
const char* const kFields[] = {"predictions", "loss", "weight_gradients", "bias_gradients", "optimizer_state"};
constexpr int kNumFields = 5;

struct Outcome {
  int threads, workers;
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


}  // namespace

int audit(const train::Config& cfg0, const AuditOptions& opt, std::ostream& out) {
  BITGRAD_CHECK(!opt.threads.empty() && !opt.workers.empty() && !opt.accumulate.empty(), "audit", "the setting lists must not be empty");
  for (std::int64_t a : opt.accumulate)  // before the run count, which a bad value would make meaningless
    BITGRAD_CHECK(a >= 1 && cfg0.batch_size % a == 0, "audit", "batch size ", cfg0.batch_size, " is not divisible by accumulate ", a);
  const int combos = static_cast<int>(opt.threads.size() * opt.workers.size() * opt.accumulate.size());
  const int runs = opt.runs > 0 ? opt.runs : combos;
  BITGRAD_CHECK(runs >= 2, "audit", "needs at least 2 runs to compare, got ", runs,
                " (list several --threads, --workers or --accumulate values, or ask for --runs R)");
  check_fp_environment();
  auto train_ds = train::train_dataset(cfg0);
  auto test_ds = train::test_dataset(cfg0);
  const std::string dir = opt.out.empty() ? train::RunDir::default_path(cfg0.file, "audit-", false) : opt.out;
  const train::RunDir study = train::RunDir::create_study(dir, "audit");  // locked until the result is written
  // the fixed evaluation batch: the first evaluation-batch-size samples of the test set (or
  // of the training set without one)
  const data::Dataset& eval_ds = test_ds ? *test_ds : *train_ds;
  data::LoaderOptions lo;
  lo.batch_size = std::min<std::int64_t>(cfg0.eval_batch_size, eval_ds.size());
  lo.shuffle = false;
  data::Batch eval = data::make_batch(eval_ds, lo, data::epoch_order(eval_ds.size(), false, 0, 0), 0, 0);

  for (std::int64_t a : opt.accumulate) {
    if (a > 1 && !train::whole_subtree(cfg0.batch_size / a))
      out << "note: accumulate " << a << " gives micro-batches of " << cfg0.batch_size / a
          << " samples, not a power-of-two number of 32-sample blocks: contract T5 does not promise equality with accumulate 1\n";
  }
  std::vector<Outcome> res;
  for (int i = 0; i < runs; ++i) {
    const int c = i % combos;
    Outcome o;
    o.threads = opt.threads[static_cast<std::size_t>(c) % opt.threads.size()];
    o.workers = opt.workers[(static_cast<std::size_t>(c) / opt.threads.size()) % opt.workers.size()];
    o.accumulate = opt.accumulate[(static_cast<std::size_t>(c) / (opt.threads.size() * opt.workers.size())) % opt.accumulate.size()];
    train::Config cfg = cfg0;
    cfg.accumulate = o.accumulate;
    ThreadCountScope threads(o.threads);
    train::Session session(cfg, train_ds, test_ds, o.workers);
    const std::int64_t steps = opt.steps >= 0 ? opt.steps : session.planned_steps();
    float loss = 0;
    for (std::int64_t s = 0; s < steps; ++s) loss = session.step(s).loss;
    for (auto& f : o.field) f = std::make_unique<Field>();
    o.field[0]->add(session.predict(eval.x));
    o.field[1]->add(Tensor::scalar(loss));
    for (const auto& [name, p] : session.params()) {
      Tensor g = p.grad();
      if (g.defined()) o.field[p.ndim() >= 2 ? 2 : 3]->add(g);
    }
    for (const auto& [name, t] : session.optimizer().state()) o.field[4]->add(t);
    o.fingerprint = session.fingerprint().hex();
    out << io::strprintf("run %d: threads %d, workers %d, accumulate %lld, %lld steps: loss %.9g, fingerprint %s\n", i + 1, o.threads,
                         o.workers, static_cast<long long>(o.accumulate), static_cast<long long>(steps), static_cast<double>(loss),
                         o.fingerprint.c_str())
        << std::flush;
    res.push_back(std::move(o));
  }

  nlohmann::ordered_json j;
  j["config"] = cfg0.file;
  j["config_hash"] = train::config_hash(cfg0);
  j["evaluation_batch"] = lo.batch_size;
  nlohmann::ordered_json rj = nlohmann::ordered_json::array();
  for (const auto& o : res)
    rj.push_back({{"threads", o.threads}, {"workers", o.workers}, {"accumulate", o.accumulate}, {"fingerprint", o.fingerprint}});
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
  study.write_study("audit.json", j, study_manifest_json("audit", cfg0, opt.command, false));
  out << "\n" << (all_equal ? "all bitwise equal: " : "NOT all equal: ") << runs << " runs, matrices in " << dir << "/audit.json\n";
  return all_equal ? 0 : 1;
}

}  // namespace bitgrad::instruments
