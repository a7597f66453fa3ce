// `bitgrad report RUN... -o report.html`: one self-contained HTML page (inline SVG and CSS, a
// few lines of script, no network) of training, sensitivity and audit runs.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <map>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/version.hpp"
#include "instruments/manifest.hpp"
#include "instruments/svg_plot.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::instruments {
namespace {

using ordered_json = store::Json;
using svg::escape;
using svg::num;

struct Run {
  std::string dir;
  RunKind kind = RunKind::train;
  Precision precision = Precision::fp32;  // [train] precision (mixed precision)
  std::string name;  // for legends: the last path component, or the path where that is ambiguous
  ordered_json manifest;
  // train
  svg::Series loss, test_loss, test_acc;
  std::map<std::string, svg::Series> grad_norm;  // by parameter name
  std::vector<std::string> grad_names;           // in the metrics' order
  svg::Series shadow;                            // --shadow f64: distance to the float64 twin, all parameters
  std::map<std::string, svg::Series> shadow_param;
  std::vector<std::string> shadow_names;
  std::vector<ordered_json> trace;
  bool has_trace = false;
  // sensitivity / audit
  ordered_json result;
};

double number(const ordered_json& j, const std::string& path, const char* key) {
  const std::optional<double> v = j.contains(key) ? store::json_number(j[key]) : std::nullopt;
  if (!v) throw Error("report: " + path + ": '" + key + "' is missing or not a number");
  return *v;
}

void read_train(Run& r) {
  const std::string path = r.dir + "/metrics.jsonl";
  r.test_acc.markers = r.test_loss.markers = true;
  const store::RunDir dir = store::RunDir::open(r.dir, "report");
  const ordered_json& run = r.manifest.contains("run") ? r.manifest["run"] : ordered_json();
  if (run.is_object() && run.contains("source") && run["source"] == "torch" && !dir.has("metrics.jsonl")) {
    // a PyTorch script's run (bitgrad.torch): its loss curve is the trace's, one point per
    // recorded step, from the loss's float32 bits
    r.trace = dir.read_lines("trace.jsonl");
    r.has_trace = true;
    for (const ordered_json& t : r.trace) {
      const std::string bits = t.is_object() && t.contains("loss") && t["loss"].is_string() ? t["loss"].get<std::string>() : std::string();
      if (bits.empty()) continue;  // a step without a loss
      if (bits.size() != 10 || bits.compare(0, 2, "0x") != 0 || bits.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos)
        throw Error("report: " + dir.file("trace.jsonl") + ": step " + (t.contains("step") ? t["step"].dump() : "?") + ": 'loss' is not a float's bits (\"0x\" and 8 hex digits): " +
                    printable_excerpt(bits, 40));
      const std::uint32_t u = static_cast<std::uint32_t>(std::stoul(bits, nullptr, 16));
      float f;
      std::memcpy(&f, &u, sizeof f);
      r.loss.x.push_back(number(t, dir.file("trace.jsonl"), "step"));
      r.loss.y.push_back(f);
    }
    return;
  }
  for (const ordered_json& m : dir.read_lines("metrics.jsonl")) {
    const double step = number(m, path, "step");
    if (m.contains("loss")) r.loss.x.push_back(step), r.loss.y.push_back(number(m, path, "loss"));
    if (m.contains("test_loss")) r.test_loss.x.push_back(step), r.test_loss.y.push_back(number(m, path, "test_loss"));
    if (m.contains("test_accuracy")) r.test_acc.x.push_back(step), r.test_acc.y.push_back(100 * number(m, path, "test_accuracy"));
    if (m.contains("shadow") && m["shadow"].is_object()) {
      const ordered_json& s = m["shadow"];
      r.shadow.x.push_back(step), r.shadow.y.push_back(number(s, path, "distance"));
      if (s.contains("params") && s["params"].is_object())
        for (auto it = s["params"].begin(); it != s["params"].end(); ++it) {
          if (!r.shadow_param.count(it.key())) r.shadow_names.push_back(it.key()), r.shadow_param[it.key()].name = it.key();
          const std::optional<double> v = store::json_number(*it);
          if (!v) throw Error("report: " + path + ": shadow distance of '" + it.key() + "' is not a number");
          r.shadow_param[it.key()].x.push_back(step), r.shadow_param[it.key()].y.push_back(*v);
        }
    }
    if (m.contains("grad_stats")) {
      for (auto it = m["grad_stats"].begin(); it != m["grad_stats"].end(); ++it) {
        if (!r.grad_norm.count(it.key())) r.grad_names.push_back(it.key()), r.grad_norm[it.key()].name = it.key();
        svg::Series& s = r.grad_norm[it.key()];
        s.x.push_back(step);
        s.y.push_back(number(*it, path, "norm"));
      }
    }
  }
  if (dir.has("trace.jsonl")) {
    r.trace = dir.read_lines("trace.jsonl");
    r.has_trace = true;
  }
}

// Where two step traces part: "identical (N steps)", "differ from step S (what)", ...
std::string trace_agreement(const Run& a, const Run& b, bool& same) {
  same = false;
  if (!a.has_trace || !b.has_trace) return "no trace";
  const std::size_t n = std::min(a.trace.size(), b.trace.size());
  for (std::size_t i = 0; i < n; ++i) {
    const ordered_json& x = a.trace[i];
    const ordered_json& y = b.trace[i];
    if (x == y) continue;
    const char* what = x.value("input", "") != y.value("input", "") ? "input"
                       : x.value("loss", "") != y.value("loss", "") ? "loss"
                       : x.value("grad", ordered_json()) != y.value("grad", ordered_json()) ? "gradients"
                                                                                            : "parameters";
    return "differ from step " + x.value("step", ordered_json(0)).dump() + " (" + what + ")";
  }
  if (a.trace.size() != b.trace.size()) return "same over " + std::to_string(n) + " steps, lengths differ";
  same = true;
  return "identical (" + std::to_string(n) + " steps)";
}

std::string section_train(const std::vector<const Run*>& runs) {
  std::string o = "<section id=\"training\"><h2>Training</h2>\n<table class=\"summary\"><tr><th>run</th><th>steps</th><th>last loss</th><th>test accuracy</th><th>threads</th><th>workers</th><th>accumulate</th><th>precision</th><th>code path</th></tr>\n";
  svg::LinePlot loss{"Training loss", "step", "loss", false, {}}, acc{"Test accuracy", "step", "accuracy (%)", false, {}},
      tloss{"Test loss", "step", "test loss", false, {}};
  for (const Run* r : runs) {
    const ordered_json& run = r->manifest["run"];
    o += "<tr><td>" + escape(r->dir) + "</td><td>" + (r->loss.x.empty() ? "0" : num(r->loss.x.back())) + "</td><td>" +
         (r->loss.y.empty() ? "" : num(r->loss.y.back())) + "</td><td>" + (r->test_acc.y.empty() ? "" : num(r->test_acc.y.back()) + "%") +
         "</td><td>" + escape(run.value("threads", ordered_json()).dump()) + "</td><td>" + escape(run.value("workers", ordered_json()).dump()) +
         "</td><td>" + escape(run.value("accumulate", ordered_json()).dump()) + "</td><td>" + precision_name(r->precision) +
         "</td><td>" +
         escape(r->manifest.value("machine", ordered_json::object()).value("code_path", "")) + "</td></tr>\n";
    loss.series.push_back(r->loss);
    if (!r->test_acc.x.empty()) acc.series.push_back(r->test_acc);
    if (!r->test_loss.x.empty()) tloss.series.push_back(r->test_loss);
  }
  o += "</table>\n<div class=\"plots\">" + svg::render(loss);
  if (!acc.series.empty()) o += svg::render(acc);
  if (!tloss.series.empty()) o += svg::render(tloss);
  for (const Run* r : runs) {
    if (r->grad_names.empty()) continue;
    svg::LinePlot g{"Gradient norms: " + r->name, "step", "||g||", true, {}};
    for (const auto& n : r->grad_names) g.series.push_back(r->grad_norm.at(n));
    o += svg::render(g);
  }
  o += "</div>\n";
  if (runs.size() >= 2) {
    o += "<h3>Step traces compared</h3><p>Each run's trace.jsonl (input batch, loss, gradients and parameters of every step) against "
         "every other's. <code>bitgrad diff A B</code> says more about a pair.</p>\n<table class=\"agreement\"><tr><th></th>";
    for (std::size_t j = 0; j < runs.size(); ++j) o += "<th>" + std::to_string(j + 1) + "</th>";
    o += "</tr>\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      o += "<tr><th>" + std::to_string(i + 1) + ". " + escape(runs[i]->dir) + "</th>";
      for (std::size_t j = 0; j < runs.size(); ++j) {
        bool same = false;
        const std::string t = i == j ? "" : trace_agreement(*runs[i], *runs[j], same);
        o += "<td class=\"" + std::string(i == j ? "" : same ? "same" : "differ") + "\">" + escape(t) + "</td>";
      }
      o += "</tr>\n";
    }
    o += "</table>\n";
  }
  return o + "</section>\n";
}

std::string section_sensitivity(const Run& r, int id) {
  const std::string path = r.dir + "/sensitivity.json";
  const ordered_json& j = r.result;
  if (!j.contains("per_step") || !j["per_step"].is_array()) throw Error("report: " + path + ": 'per_step' is missing");
  svg::Series dmean{"mean over members", {}, {}, false}, dmax{"largest", {}, {}, false}, spread{"loss max - min", {}, {}, false},
      loss{"canonical run", {}, {}, false};
  for (const ordered_json& s : j["per_step"]) {
    const double step = number(s, path, "step");
    dmean.x.push_back(step), dmean.y.push_back(number(s, path, "distance_mean"));
    dmax.x.push_back(step), dmax.y.push_back(number(s, path, "distance_max"));
    spread.x.push_back(step), spread.y.push_back(number(s, path, "loss_spread"));
    loss.x.push_back(step), loss.y.push_back(number(s, path, "loss"));
  }
  std::string o = "<section id=\"sensitivity-" + std::to_string(id) + "\"><h2>Sensitivity: " + escape(r.dir) + "</h2>\n<p>" + escape(j.value("config", "")) + ": the canonical run and " +
                  j.value("members", ordered_json(0)).dump() +
                  " members whose every reduction ran in a seeded random order (<code>--perturb-order</code>), trained side by side. ";
  const double rate = j.value("growth_rate_per_step", 0.0);
  if (rate > 0)
    o += "The distance grows by x" + num(std::exp(rate)) + " per step on average (doubling every " + num(std::log(2.0) / rate) + " steps). ";
  if (j.contains("final_accuracy") && j["final_accuracy"].is_array() && !j["final_accuracy"].empty()) {
    std::vector<double> a;
    for (const auto& v : j["final_accuracy"]) a.push_back(100 * v.get<double>());
    o += "Final test accuracy: canonical " + num(a[0]) + "%, all runs " + num(*std::min_element(a.begin(), a.end())) + "% to " +
         num(*std::max_element(a.begin(), a.end())) + "%. ";
  }
  if (j.contains("final_test_loss") && j["final_test_loss"].is_array() && !j["final_test_loss"].empty()) {
    std::vector<double> l;
    for (const auto& v : j["final_test_loss"]) l.push_back(v.get<double>());
    o += "Final test loss: canonical " + num(l[0]) + ", all runs " + num(*std::min_element(l.begin(), l.end())) + " to " +
         num(*std::max_element(l.begin(), l.end())) + ".";
  }
  o += "</p>\n<div class=\"plots\">";
  o += svg::render(svg::LinePlot{"Relative parameter distance to the canonical run", "step", "||p - p_canonical|| / ||p_canonical||", true, {dmean, dmax}});
  o += svg::render(svg::LinePlot{"Spread of the loss across runs", "step", "max - min", true, {spread}});
  o += svg::render(svg::LinePlot{"Training loss", "step", "loss", false, {loss}});
  return o + "</div></section>\n";
}

// The two sizes of noise side by side: each shadowed run's distance to its float64 twin (rounding
// of the run's precision against f64) and each sensitivity run's distance between canonical and
// order-perturbed members (the order of reductions), both ||p - p_ref|| / ||p_ref|| per step.
std::string section_shadow(const std::vector<const Run*>& shadowed, const std::vector<const Run*>& sens) {
  std::string o = "<section id=\"shadow\"><h2>Rounding noise: the float64 shadow</h2>\n<p>A run trained with <code>--shadow f64</code> "
                  "has a float64 twin stepped in lockstep from the same weights, batches and dropout masks; the distance between them is "
                  "how far rounding in the run's precision has carried it. ";
  if (!sens.empty()) o += "Beside it, the order-perturbation divergence of <code>bitgrad sensitivity</code> (mean over members). ";
  o += "</p>\n<div class=\"plots\">";
  svg::LinePlot both{"Relative parameter distance: float64 shadow and order perturbation", "step", "||p - p_ref|| / ||p_ref||", true, {}};
  for (const Run* r : shadowed) {
    svg::Series s = r->shadow;
    s.name = "f64 shadow: " + r->name + " (" + precision_name(r->precision) + ")";
    both.series.push_back(s);
  }
  for (const Run* r : sens) {
    svg::Series s{"order perturbation: " + r->name, {}, {}, false};
    for (const ordered_json& p : r->result["per_step"]) {
      const double d = number(p, r->dir + "/sensitivity.json", "distance_mean");
      if (d > 0) s.x.push_back(number(p, r->dir + "/sensitivity.json", "step")), s.y.push_back(d);
    }
    both.series.push_back(s);
  }
  o += svg::render(both);
  for (const Run* r : shadowed) {
    svg::LinePlot per{"Distance to the float64 shadow per parameter: " + r->name, "step", "||p - p64|| / ||p64||", true, {}};
    for (const auto& n : r->shadow_names) per.series.push_back(r->shadow_param.at(n));
    o += svg::render(per);
  }
  return o + "</div></section>\n";
}

// A benchmark sweep (bench/scaling.sh via bench/report_peer.py): step time against batch size
// and against width, one line per framework and thread count, and the table of points.
std::string section_scaling(const Run& r, int id) {
  const std::string path = r.dir + "/scaling.json";
  const ordered_json& j = r.result;
  if (!j.contains("points") || !j["points"].is_array()) throw Error("report: " + path + ": 'points' is missing");
  struct Pt {
    std::string fw;
    int threads;
    double batch, width, ms;
  };
  std::vector<Pt> pts;
  for (const ordered_json& q : j["points"]) {
    if (!q.is_object() || !q.contains("framework") || !q["framework"].is_string())
      throw Error("report: " + path + ": a point has no 'framework'");
    pts.push_back({q["framework"].get<std::string>(), static_cast<int>(number(q, path, "threads")), number(q, path, "batch"),
                   number(q, path, "width"), number(q, path, "ms_per_step")});
  }
  auto lines = [&](bool by_batch) {
    std::vector<svg::Series> out;
    for (const char* fw : {"bitgrad", "pytorch"})
      for (int t : {1, 2}) {
        svg::Series s{std::string(fw) + ", " + std::to_string(t) + (t == 1 ? " thread" : " threads"), {}, {}, true};
        for (const Pt& p : pts)
          if (p.fw == fw && p.threads == t && (by_batch ? p.width == 512 : p.batch == 128))
            s.x.push_back(by_batch ? p.batch : p.width), s.y.push_back(by_batch ? p.ms / p.batch * 1000.0 : p.ms);
        if (!s.x.empty()) out.push_back(std::move(s));
      }
    return out;
  };
  std::string o = "<section id=\"scaling-" + std::to_string(id) + "\"><h2>Scaling: " + escape(r.dir) + "</h2>\n<p>" +
                  escape(r.manifest["run"].value("config", "")) + ". Median step time of bitgrad and PyTorch";
  if (j.contains("pytorch_setups") && j["pytorch_setups"].is_object()) {
    o += " (PyTorch set-up:";
    for (const auto& [t, setup] : j["pytorch_setups"].items()) o += " " + escape(t) + " thread(s) " + escape(setup.is_string() ? setup.get<std::string>() : setup.dump()) + ";";
    o.back() = ')';
  }
  o += ".</p>\n<div class=\"plots\">";
  o += svg::render(svg::LinePlot{"Time per sample against batch size (width 512)", "batch size", "microseconds per sample", false, lines(true)});
  o += svg::render(svg::LinePlot{"Step time against width (batch 128)", "hidden width", "ms per step", true, lines(false)});
  o += "</div>\n<table class=\"agreement\"><tr><th>framework</th><th>threads</th><th>batch</th><th>width</th><th>ms per step</th></tr>\n";
  for (const Pt& p : pts)
    o += "<tr><td>" + escape(p.fw) + "</td><td>" + std::to_string(p.threads) + "</td><td>" + svg::num(p.batch) + "</td><td>" + svg::num(p.width) +
         "</td><td>" + svg::num(p.ms) + "</td></tr>\n";
  return o + "</table></section>\n";
}

std::string section_audit(const Run& r, int id) {
  const std::string path = r.dir + "/audit.json";
  const ordered_json& j = r.result;
  if (!j.contains("matrices") || !j["matrices"].is_object() || !j.contains("runs") || !j["runs"].is_array())
    throw Error("report: " + path + ": 'matrices' or 'runs' is missing");
  // a PyTorch script's audit (audit --torch): the last step's tensors, distances in ULPs
  const bool torch = j.contains("units") && j["units"] == "ulps";
  std::vector<std::string> labels;
  for (const ordered_json& x : j["runs"])
    labels.push_back(std::to_string(labels.size() + 1) + ": t" + x.value("threads", ordered_json(0)).dump() + " w" + x.value("workers", ordered_json(0)).dump() +
                     (torch ? "" : " a" + x.value("accumulate", ordered_json(1)).dump()));
  const bool zero = j.value("all_zero", false);
  std::string o = "<section id=\"audit-" + std::to_string(id) + "\"><h2>Audit: " + escape(r.dir) + "</h2>\n<p>" +
                  escape(torch ? (j.contains("torch_command") && j["torch_command"].is_string() ? j["torch_command"].get<std::string>() : std::string())
                               : j.value("config", "")) + ", " + std::to_string(labels.size()) +
                  (torch ? " runs of a PyTorch script (t threads, w loader workers): the largest distance in ULPs between the last step's tensors of every pair of runs. "
                         : " runs (t threads, w loader workers, a accumulate): total absolute difference between every pair of runs. ") +
                  "<strong class=\"" + (zero ? "same\">all bitwise equal" : "differ\">NOT all equal") + "</strong>.</p>\n<div class=\"plots\">";
  for (auto it = j["matrices"].begin(); it != j["matrices"].end(); ++it) {
    svg::Heatmap h;
    h.title = it.key();
    std::replace(h.title.begin(), h.title.end(), '_', ' ');
    h.labels = labels;
    for (const ordered_json& row : *it) {
      h.values.emplace_back();
      for (const ordered_json& v : row) h.values.back().push_back(v.is_number() ? v.get<double>() : INFINITY);
      if (h.values.back().size() != labels.size()) throw Error("report: " + path + ": matrix '" + it.key() + "' is not " + std::to_string(labels.size()) + " x " + std::to_string(labels.size()));
    }
    if (h.values.size() != labels.size()) throw Error("report: " + path + ": matrix '" + it.key() + "' has the wrong number of rows");
    o += svg::render(h);
  }
  o += "</div>\n";
  // which settings move the bits, and where each class of runs parts from its nearest
  if (j.contains("moves_the_bits") && j["moves_the_bits"].is_object()) {
    o += "<ul>";
    for (auto it = j["moves_the_bits"].begin(); it != j["moves_the_bits"].end(); ++it)
      o += "<li>" + escape(it.key()) + ": " + (it->is_boolean() && it->get<bool>() ? "<strong class=\"differ\">moves the bits</strong>" : "<span class=\"same\">the same bits</span>") + "</li>";
    o += "</ul>\n";
  }
  if (j.contains("findings") && j["findings"].is_array())
    for (const ordered_json& f : j["findings"]) {
      if (!f.contains("runs") || !f["runs"].is_array() || f["runs"].size() != 2 || !f.contains("diff") || !f["diff"].is_array()) continue;
      o += "<h3>run " + escape(f["runs"][1].dump()) + " against run " + escape(f["runs"][0].dump()) + "</h3>\n<pre>";
      for (const ordered_json& l : f["diff"]) o += escape(l.is_string() ? l.get<std::string>() : l.dump()) + "\n";
      o += "</pre>\n";
    }
  return o + "</section>\n";
}

std::string section_manifests(const std::vector<Run>& runs) {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> vals;
  for (const Run& r : runs) {
    vals.emplace_back();
    for (const auto& [k, v] : store::flatten_json(r.manifest)) {
      if (!vals.back().count(k) && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      vals.back()[k] = v;
    }
  }
  std::string o = "<section id=\"manifests\"><h2>Manifests</h2>\n<p><label><input type=\"checkbox\" id=\"only-diff\"> show only the rows that differ</label> "
                  "(differing rows are highlighted)</p>\n<table class=\"manifest\"><tr><th>key</th>";
  for (const Run& r : runs) o += "<th>" + escape(r.dir) + "</th>";
  o += "</tr>\n";
  int differing = 0;
  for (const auto& k : keys) {
    bool same = true;
    for (const auto& v : vals) same = same && v.count(k) && v.at(k) == vals.front().at(k);
    differing += !same;
    o += "<tr class=\"" + std::string(same ? "same" : "differ") + "\"><td>" + escape(k) + "</td>";
    for (const auto& v : vals) {
      std::string s = v.count(k) ? v.at(k) : "";
      if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
      o += "<td>" + escape(s) + "</td>";
    }
    o += "</tr>\n";
  }
  o += "</table>\n<p>" + std::to_string(differing) + " of " + std::to_string(keys.size()) + " entries differ.</p></section>\n";
  return o;
}

const char* const kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px 32px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; } h3 { font-size: 15px; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
table.manifest td { font: 12px monospace; max-width: 420px; overflow-wrap: anywhere; }
tr.differ td, td.differ, strong.differ { background: #fde0c5; } td.same, strong.same { background: #dcefd8; }
body.only-diff table.manifest tr.same { display: none; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; } figure { margin: 0; }
svg.plot { background: #fff; border: 1px solid #e4e4e4; }
svg .title { font: 600 13px system-ui, sans-serif; } svg .tick { font: 11px system-ui, sans-serif; fill: #555; }
svg .label, svg .legend { font: 12px system-ui, sans-serif; fill: #333; } svg .cellv { font: 10px monospace; fill: #222; }
svg .frame { fill: none; stroke: #999; } svg .grid { stroke: #eee; } svg polyline { stroke-width: 1.5; }
svg .empty { font: 13px system-ui, sans-serif; fill: #888; } svg .legendbox { fill: #fff; fill-opacity: 0.85; stroke: #ddd; }
)";

// Counts the plots and reports on the console (the Chromium test reads it); the checkbox
// filters the manifest table.
const char* const kScript = R"(
(function () {
  var plots = document.querySelectorAll('svg.plot');
  var drawn = 0;
  for (var i = 0; i < plots.length; i++)
    if (plots[i].querySelector('polyline, circle, rect.cell, text.empty')) drawn++;
  document.body.setAttribute('data-plots', String(plots.length));
  document.body.setAttribute('data-drawn', String(drawn));
  var box = document.getElementById('only-diff');
  if (box) box.addEventListener('change', function () { document.body.classList.toggle('only-diff', box.checked); });
  console.log('bitgrad report: ' + drawn + ' of ' + plots.length + ' plots drawn');
})();
)";

}  // namespace

namespace {
constexpr const char* kReportTitle = "<title>bitgrad report</title>";

// A report replaces only what a report made: a run's manifest.json, a config or someone's
// page under the same name is left alone unless the user says so.
void check_replaceable(const std::string& out_html, bool replace_any) {
  struct stat st {};
  if (::stat(out_html.c_str(), &st) != 0) return;  // a new file
  if (!S_ISREG(st.st_mode)) throw Error("report: " + out_html + " exists and is not a regular file");
  if (replace_any) return;
  std::string head(512, '\0');
  std::FILE* f = std::fopen(out_html.c_str(), "rb");
  const std::size_t n = f ? std::fread(head.data(), 1, head.size(), f) : 0;
  if (f) std::fclose(f);
  head.resize(n);
  if (head.find(kReportTitle) == std::string::npos)
    throw Error("report: " + out_html + " exists and is not a bitgrad report; choose another -o, or pass --force to replace it");
}

// a run's configuration, or the script of a PyTorch run
std::string what_ran(const ordered_json& run) {
  if (run.contains("source") && run["source"] == "torch" && run.contains("script") && run["script"].is_object() && run["script"].contains("path") &&
      run["script"]["path"].is_string())
    return run["script"]["path"].get<std::string>();
  return run.value("config", "");
}
}  // namespace

ReportSummary write_report(const std::vector<std::string>& dirs, const std::string& out_html, bool replace_any) {
  if (dirs.empty()) throw Error("report: name at least one run directory");
  check_replaceable(out_html, replace_any);
  std::vector<Run> runs;
  for (const std::string& d0 : dirs) {
    Run r;
    r.dir = d0;
    while (r.dir.size() > 1 && r.dir.back() == '/') r.dir.pop_back();
    r.name = r.dir.substr(r.dir.find_last_of('/') == std::string::npos ? 0 : r.dir.find_last_of('/') + 1);
    const store::RunDir dir = store::RunDir::open(r.dir, "report");
    r.manifest = dir.manifest();
    r.kind = manifest_kind(r.manifest, "report", dir.file("manifest.json"));
    r.precision = manifest_precision(r.manifest, "report", dir.file("manifest.json"));
    switch (r.kind) {
      case RunKind::train: read_train(r); break;
      case RunKind::sensitivity: r.result = dir.read_json("sensitivity.json"); break;
      case RunKind::audit: r.result = dir.read_json("audit.json"); break;
      case RunKind::scaling: r.result = dir.read_json("scaling.json"); break;
    }
    runs.push_back(std::move(r));
  }
  for (Run& r : runs) {
    int same = 0;
    for (const Run& q : runs) same += q.name == r.name;
    if (same > 1 || r.name.empty()) r.name = r.dir;
    r.loss.name = r.test_loss.name = r.test_acc.name = r.name;
  }
  std::string body;
  std::vector<const Run*> train;
  for (const Run& r : runs)
    if (r.kind == RunKind::train) train.push_back(&r);
  if (!train.empty()) body += section_train(train);
  std::vector<std::string> anchors(runs.size(), "manifests");
  int ns = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].kind == RunKind::train) anchors[i] = "training";
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].kind == RunKind::sensitivity) body += section_sensitivity(runs[i], ++ns), anchors[i] = "sensitivity-" + std::to_string(ns);
  std::vector<const Run*> shadowed, sens;
  for (const Run& r : runs) {
    if (r.kind == RunKind::train && !r.shadow.x.empty()) shadowed.push_back(&r);
    if (r.kind == RunKind::sensitivity) sens.push_back(&r);
  }
  if (!shadowed.empty()) body += section_shadow(shadowed, sens);
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].kind == RunKind::audit) body += section_audit(runs[i], ++na), anchors[i] = "audit-" + std::to_string(na);
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (runs[i].kind == RunKind::scaling) body += section_scaling(runs[i], ++nb), anchors[i] = "scaling-" + std::to_string(nb);
  body += section_manifests(runs);

  ReportSummary sum;
  for (std::size_t at = 0; (at = body.find("<svg class=\"plot", at)) != std::string::npos; ++at) ++sum.plots;
  sum.runs = static_cast<int>(runs.size());
  std::string html = std::string("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">") + kReportTitle + "<style>";
  html += kStyle;
  html += "</style></head>\n<body>\n<h1>bitgrad report</h1>\n<p>" + std::to_string(runs.size()) + " run" + (runs.size() == 1 ? "" : "s") +
          ", made by bitgrad " + kVersion + " (numerics " + std::to_string(kNumericsVersion) + "). Self-contained: no network, plots are inline SVG.</p>\n<ul>";
  for (std::size_t i = 0; i < runs.size(); ++i)
    html += "<li><a href=\"#" + anchors[i] + "\">" + escape(runs[i].dir) + "</a>: " + to_string(runs[i].kind) + " of " +
            escape(what_ran(runs[i].manifest["run"])) + "</li>";
  html += "<li><a href=\"#manifests\">manifests</a></li></ul>\n" + body + "<script>" + kScript + "</script>\n</body></html>\n";
  io::write_file_atomic(out_html, html);
  return sum;
}

}  // namespace bitgrad::instruments
