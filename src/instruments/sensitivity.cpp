// `bitgrad sensitivity`: how much would nondeterministic reduction orders matter for this
// model? The canonical run and `members` runs whose every reduction takes a seeded random order
// train side by side on the same data; their distance is measured after every step.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/manifest.hpp"
#include "io/format.hpp"
#include "store/run_dir.hpp"
#include "store/study_dir.hpp"

namespace bitgrad::instruments {
namespace {

std::vector<double> flat(const optim::NamedTensors& params) {
  std::vector<double> v;
  for (const auto& [n, p] : params) {
    Tensor c = p.contiguous_copy().cast(DType::f64);
    v.insert(v.end(), c.data<double>(), c.data<double>() + c.numel());
  }
  return v;
}

double rel_distance(const std::vector<double>& a, const std::vector<double>& ref) {
  double d = 0, r = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (a[i] - ref[i]) * (a[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return r > 0 ? std::sqrt(d / r) : std::sqrt(d);
}


}  // namespace

void sensitivity(const train::Config& cfg, const SensitivityOptions& opt, std::ostream& out) {
  BITGRAD_CHECK(opt.members >= 1 && opt.members <= 64, "sensitivity", "members must be in [1, 64], got ", opt.members);
  check_fp_environment();
  ThreadCountScope threads(opt.threads);
  const std::string dir = opt.out.empty() ? train::default_run_dir(cfg.file, "sensitivity-", false) : opt.out;
  const store::StudyDir study = store::StudyDir::create(dir, "sensitivity");  // locked until the result is written
  auto train_ds = train::train_dataset(cfg);
  auto test_ds = train::test_dataset(cfg);
  std::vector<std::unique_ptr<train::Session>> m;
  m.push_back(std::make_unique<train::Session>(cfg, train_ds, test_ds, 0));
  for (int i = 1; i <= opt.members; ++i) m.push_back(std::make_unique<train::Session>(cfg, train_ds, test_ds, 0, static_cast<std::uint64_t>(i)));
  const std::int64_t steps = opt.steps >= 0 ? opt.steps : m[0]->planned_steps();
  const std::int64_t every = opt.print_every > 0 ? opt.print_every : std::max<std::int64_t>(1, steps / 10);
  out << "sensitivity of " << cfg.file << ": the canonical run and " << opt.members << " runs with perturbed reduction orders, " << steps
      << " steps\n";
  out << "      step     loss (canonical)   loss spread (max-min)   distance mean   distance max\n";
  nlohmann::ordered_json per = nlohmann::ordered_json::array();
  std::vector<double> log_d, xs;
  for (std::int64_t s = 0; s < steps; ++s) {
    std::vector<float> loss;
    for (auto& session : m) loss.push_back(session->step(s).loss);
    const std::vector<double> ref = flat(m[0]->params());
    double dmean = 0, dmax = 0;
    for (std::size_t i = 1; i < m.size(); ++i) {
      const double d = rel_distance(flat(m[i]->params()), ref);
      dmean += d / static_cast<double>(opt.members);
      dmax = std::max(dmax, d);
    }
    float lmin = loss[0], lmax = loss[0];
    for (float l : loss) lmin = std::min(lmin, l), lmax = std::max(lmax, l);
    per.push_back({{"step", s + 1}, {"loss", loss[0]}, {"loss_spread", lmax - lmin}, {"distance_mean", dmean}, {"distance_max", dmax}});
    if (dmean > 0) {
      log_d.push_back(std::log(dmean));
      xs.push_back(static_cast<double>(s + 1));
    }
    if ((s + 1) % every == 0 || s + 1 == steps) {
      out << io::strprintf("%10lld     %16.9g   %21.3g   %13.3g   %12.3g\n", static_cast<long long>(s + 1), static_cast<double>(loss[0]),
                           static_cast<double>(lmax - lmin), dmean, dmax)
          << std::flush;
    }
  }
  // growth: the least-squares slope of log(distance) against the step, over every step with a
  // nonzero distance (an average exponent; the divergence often grows in bursts)
  double rate = 0;
  if (xs.size() >= 2) {
    double mx = 0, my = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += log_d[i];
    mx /= static_cast<double>(xs.size());
    my /= static_cast<double>(xs.size());
    double sxy = 0, sxx = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) sxy += (xs[i] - mx) * (log_d[i] - my), sxx += (xs[i] - mx) * (xs[i] - mx);
    rate = sxx > 0 ? sxy / sxx : 0;
  }
  nlohmann::ordered_json j;
  j["config"] = cfg.file;
  j["config_hash"] = train::config_hash(cfg);
  j["members"] = opt.members;
  j["steps"] = steps;
  j["growth_rate_per_step"] = rate;
  const double first = per.empty() ? 0 : per.front()["distance_mean"].get<double>();
  const double last = per.empty() ? 0 : per.back()["distance_mean"].get<double>();
  out << io::strprintf("\ndivergence: relative parameter distance %.3g after step 1, %.3g after step %lld (x%.3g)\n", first, last,
                       static_cast<long long>(steps), first > 0 ? last / first : 0.0);
  if (xs.size() >= 2 && rate > 0)
    out << io::strprintf("growth: x%.4g per step on average (least squares on log distance; doubling every %.1f steps)\n", std::exp(rate),
                         std::log(2.0) / rate);
  else if (xs.empty())
    out << "growth: none (the members never left the canonical run)\n";
  else
    out << io::strprintf("growth: none measured (slope %.3g per step)\n", rate);
  if (test_ds) {
    std::vector<double> acc, tloss;
    for (auto& session : m) {
      const train::Eval e = session->evaluate();
      acc.push_back(e.accuracy);
      tloss.push_back(e.loss);
    }
    // canonical, then the members' range and standard deviation
    auto spread = [&](const std::vector<double>& v, const char* what, double scale, const char* unit) {
      double mn = v[0], mx = v[0], mean = 0, var = 0;
      for (double a : v) mn = std::min(mn, a), mx = std::max(mx, a), mean += a / static_cast<double>(v.size());
      for (double a : v) var += (a - mean) * (a - mean) / static_cast<double>(v.size());
      out << io::strprintf("final %s: canonical %.6g%s, all runs %.6g%s .. %.6g%s (std %.3g)\n", what, scale * v[0], unit, scale * mn, unit,
                           scale * mx, unit, scale * std::sqrt(var));
    };
    if (acc[0] >= 0) {
      j["final_accuracy"] = acc;
      spread(acc, "test accuracy", 100, "%");
    }
    j["final_test_loss"] = tloss;
    spread(tloss, "test loss", 1, "");
  }
  j["per_step"] = per;
  study.write("sensitivity.json", j, study_manifest_json(RunKind::sensitivity, cfg, opt.command, true));
  out << "written to " << dir << "/sensitivity.json\n";
}

}  // namespace bitgrad::instruments
