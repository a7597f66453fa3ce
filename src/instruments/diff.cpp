// `bitgrad diff RUN_A RUN_B`: where two runs part.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/manifest.hpp"
#include "instruments/trace.hpp"
#include "io/format.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::instruments {
namespace {

using json = store::Json;

// trace.jsonl with every record checked for the fields diff reads
std::vector<json> read_trace(const store::RunDir& dir) {
  const std::string path = dir.file("trace.jsonl");
  std::vector<json> t = dir.read_lines("trace.jsonl");
  for (std::size_t i = 0; i < t.size(); ++i) {
    const json& r = t[i];
    const bool ok = r.contains("step") && r["step"].is_number_integer() && r.contains("input") && r["input"].is_string() && r.contains("loss") &&
                    r["loss"].is_string() && r.contains("grad") && r["grad"].is_array() && r.contains("param") && r["param"].is_array();
    if (!ok) throw Error("diff: " + path + ":" + std::to_string(i + 1) + ": not a step record (expected step, input, loss, grad, param)");
    for (const char* k : {"grad", "param"})
      for (const json& e : r[k])
        if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_string())
          throw Error("diff: " + path + ":" + std::to_string(i + 1) + ": '" + k + "' entries must be [name, hash]");
  }
  return t;
}

// ordered integer of a float's bits: the ULP distance is the difference of two of these
std::int64_t ordered(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x80000000u) ? -static_cast<std::int64_t>(u & 0x7fffffffu) : static_cast<std::int64_t>(u);
}
std::int64_t ordered(double f) {
  std::uint64_t u;
  std::memcpy(&u, &f, 8);
  return (u & 0x8000000000000000ull) ? -static_cast<std::int64_t>(u & 0x7fffffffffffffffull) : static_cast<std::int64_t>(u);
}

// The settings that decide a step's bits besides the configuration: a resumed run may have
// continued with another --accumulate or --perturb-order (its manifest's history).
struct Segment {
  std::int64_t from = 0;  // the step it continued from
  std::int64_t accumulate = 1;
  std::optional<std::uint64_t> perturb;
};
std::vector<Segment> segments(const json& manifest) {
  std::vector<const json*> runs;
  if (manifest.contains("history") && manifest["history"].is_array())
    for (const json& h : manifest["history"])
      if (h.contains("run")) runs.push_back(&h["run"]);
  runs.push_back(&manifest.at("run"));
  std::vector<Segment> v;
  for (const json* r : runs) {
    Segment g;
    g.from = r->value("resumed_at_step", std::int64_t{0});
    g.accumulate = r->value("accumulate", std::int64_t{1});
    if (r->contains("perturb_order") && !(*r)["perturb_order"].is_null()) g.perturb = (*r)["perturb_order"].get<std::uint64_t>();
    v.push_back(g);
  }
  return v;
}
// the segment that trained step index s (0-based): the last to start at or before it
const Segment& segment_of(const std::vector<Segment>& v, std::int64_t s) {
  const Segment* g = &v.front();
  for (const Segment& x : v)
    if (x.from <= s) g = &x;
  return *g;
}

// Replays run `dir` up to step `step` (1-based) from its nearest checkpoint and returns the
// tensor named `what` ("input", "loss", "grad NAME", "param NAME") of that step.
Tensor replay(const store::RunDir& dir, const json& manifest, std::int64_t step, const std::string& what) {
  train::Config cfg = train::load_config(dir.config_path());
  const std::vector<Segment> segs = segments(manifest);
  ThreadCountScope threads(manifest.at("run").value("threads", 0));
  const std::string isa_name = manifest.at("machine").value("code_path", "");
  const Isa isa = !isa_name.empty() && cpu_supports(parse_isa(isa_name)) ? parse_isa(isa_name) : active_isa();
  IsaScope isa_scope(isa);
  train::Session session(cfg, train::train_dataset(cfg), nullptr, 0);
  std::int64_t from = -1;
  for (std::int64_t s : dir.checkpoint_steps())
    if (s <= step - 1) from = s;
  if (from < 0) throw Error("diff: " + dir.path() + " has no checkpoint at or before step " + std::to_string(step - 1) + " to replay from");
  session.restore(dir.checkpoint(from), dir.path());
  for (std::int64_t s = from; s < step; ++s) {
    const Segment& g = segment_of(segs, s);
    session.set_segment(g.accumulate, g.perturb);
    train::Session::StepOut step_out = session.step(s);
    if (s + 1 < step) continue;
    if (what == "input") return step_out.batch.x;
    if (what == "loss") return Tensor::scalar(step_out.loss);
    const bool grad = what.rfind("grad ", 0) == 0;
    const std::string name = what.substr(grad ? 5 : 6);
    for (const auto& [n, p] : session.params())
      if (n == name) return grad ? p.grad().contiguous_copy() : p.contiguous_copy();
  }
  throw Error("diff: cannot replay '" + what + "' of step " + std::to_string(step) + " in " + dir.path());
}

template <class T>
void compare_values(const Tensor& a, const Tensor& b, std::ostream& out) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  double max_abs = 0;
  std::int64_t max_ulp = 0, at_abs = -1, at_ulp = -1, count = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    if (std::memcmp(pa + i, pb + i, sizeof(T)) == 0) continue;
    ++count;
    const double d = std::fabs(static_cast<double>(pa[i]) - static_cast<double>(pb[i]));
    const std::int64_t u = std::llabs(ordered(pa[i]) - ordered(pb[i]));
    if (!(d <= max_abs)) max_abs = d, at_abs = i;
    if (u > max_ulp) max_ulp = u, at_ulp = i;
  }
  out << io::strprintf("  replayed: %lld of %lld elements differ; max |a - b| = %.6g (element %lld: %.9g vs %.9g); max %lld ulp (element %lld)\n",
                static_cast<long long>(count), static_cast<long long>(a.numel()), max_abs, static_cast<long long>(at_abs),
                at_abs >= 0 ? static_cast<double>(pa[at_abs]) : 0.0, at_abs >= 0 ? static_cast<double>(pb[at_abs]) : 0.0,
                static_cast<long long>(max_ulp), static_cast<long long>(at_ulp));
}

}  // namespace

int diff(const std::string& a, const std::string& b, const DiffOptions& opt, std::ostream& out) {
  const store::RunDir da = store::RunDir::open(a, "diff"), db = store::RunDir::open(b, "diff");
  const json ma = da.manifest();
  const json mb = db.manifest();
  if (manifest_kind(ma, "diff", da.file("manifest.json")) != RunKind::train || manifest_kind(mb, "diff", db.file("manifest.json")) != RunKind::train)
    throw Error("diff: compares training runs; " + a + " or " + b + " is another kind of run");
  if (ma["run"]["parameters"] != mb["run"]["parameters"])
    throw Error("diff: " + a + " and " + b + " train different models (" + ma["run"].value("model", "?") + " vs " +
                mb["run"].value("model", "?") + ")");
  if (!da.has("trace.jsonl") || !db.has("trace.jsonl"))
    throw Error("diff: both runs need trace.jsonl (a run trained with --trace none has none)");

  // 1. manifests
  const auto la = store::flatten_json(ma), lb = store::flatten_json(mb);
  const std::map<std::string, std::string> fa(la.begin(), la.end()), fb(lb.begin(), lb.end());
  std::vector<std::string> keys;
  for (const auto& [k, v] : la) keys.push_back(k);
  for (const auto& [k, v] : lb)
    if (!fa.count(k)) keys.push_back(k);
  int shown = 0;
  out << "manifests:\n";
  for (const auto& k : keys) {
    const std::string va = fa.count(k) ? fa.at(k) : "(none)", vb = fb.count(k) ? fb.at(k) : "(none)";
    if (va == vb || k == "run.command") continue;
    out << "  " << k << ": " << va << " | " << vb << "\n";
    ++shown;
  }
  if (!shown) out << "  identical (but for the command line)\n";
  if (ma["run"].value("config_hash", "") != mb["run"].value("config_hash", ""))
    out << "  the configurations differ: compare " << a << "/config.toml and " << b << "/config.toml\n";

  // 2. traces, step by step
  const std::vector<json> ta = read_trace(da), tb = read_trace(db);
  const std::size_t n = std::min(ta.size(), tb.size());
  for (std::size_t i = 0; i < n; ++i) {
    const json& x = ta[i];
    const json& y = tb[i];
    const std::int64_t step = x.at("step").get<std::int64_t>();
    if (y.at("step").get<std::int64_t>() != step) throw Error("diff: the traces are not aligned at line " + std::to_string(i + 1));
    std::string what, detail, hash_a, hash_b;  // hashes of the differing tensor in the traces
    if (x.at("input") != y.at("input")) {
      what = "input";
      detail = "the input batch (epoch " + x["epoch"].dump() + ", batch " + x["batch"].dump() + ")";
    } else if (x.at("loss") != y.at("loss")) {
      what = "loss";
      detail = "the loss (" + x["loss"].get<std::string>() + " vs " + y["loss"].get<std::string>() + ")";
    } else {
      for (const char* kind : {"grad", "param"}) {
        const json& ga = x.at(kind);
        const json& gb = y.at(kind);
        for (std::size_t k = 0; k < ga.size() && what.empty(); ++k) {
          if (ga[k] != gb[k]) {
            const std::string name = ga[k][0].get<std::string>();
            what = std::string(kind) + " " + name;
            hash_a = ga[k][1].get<std::string>();
            hash_b = gb[k][1].get<std::string>();
            detail = std::string(kind == std::string("grad") ? "the gradient of " : "the updated parameter ") + name;
          }
        }
        if (!what.empty()) break;
      }
    }
    if (what.empty()) continue;
    out << "first difference: step " << step << ", " << detail << "\n";
    // 3. the first op, with op traces
    if (da.has("ops.jsonl") && db.has("ops.jsonl")) {
      std::vector<json> oa, ob;
      for (const json& r : da.read_lines("ops.jsonl"))
        if (r.at("step").get<std::int64_t>() == step) oa.push_back(r);
      for (const json& r : db.read_lines("ops.jsonl"))
        if (r.at("step").get<std::int64_t>() == step) ob.push_back(r);
      for (std::size_t k = 0; k < std::min(oa.size(), ob.size()); ++k) {
        if (oa[k] == ob[k]) continue;
        const json& r = oa[k];
        out << "first op: " << r.value("phase", "") << " '" << r.value("op", "") << "'";
        if (r.value("phase", "") == "backward") out << " (gradient of input " << r.value("input", -1) << ")";
        out << ", label " << (r.value("label", "").empty() ? std::string("(none)") : r.value("label", "")) << ", called at "
            << r.value("site", "") << ", shape " << r.value("shape", "") << " (op " << k + 1 << " of the step)\n";
        break;
      }
    }
    // 4. the size of the difference, by replaying the step
    if (opt.replay) {
      Tensor va = replay(da, ma, step, what), vb = replay(db, mb, step, what);
      // the replay must give the traced bits, or its numbers would describe something else
      auto check = [&](const Tensor& v, const std::string& traced, const std::string& dir) {
        std::string got;
        if (what == "loss") {
          const float f = static_cast<float>(v.item());
          std::uint32_t u;
          std::memcpy(&u, &f, 4);
          got = hex32(u);
        } else if (what != "input") {
          got = fingerprint(v).hex();
        }
        if (!got.empty() && got != traced)
          out << "  warning: replaying " << dir << " does not reproduce its trace (" << got << " instead of " << traced
              << "); the figures below describe the replay\n";
      };
      check(va, what == "loss" ? x["loss"].get<std::string>() : hash_a, a);
      check(vb, what == "loss" ? y["loss"].get<std::string>() : hash_b, b);
      if (va.shape() != vb.shape() || va.dtype() != vb.dtype()) {
        out << "  replayed tensors have different shapes: " << va.shape().str() << " vs " << vb.shape().str() << "\n";
      } else {
        BITGRAD_DISPATCH_FLOAT(va.dtype(), "diff", T, [&] { compare_values<T>(va, vb, out); });
      }
    }
    return 1;
  }
  if (ta.size() != tb.size()) {
    out << "identical over the " << n << " steps both traced; " << (ta.size() > tb.size() ? a : b) << " has "
        << (ta.size() > tb.size() ? ta.size() - n : tb.size() - n) << " more\n";
    return 1;
  }
  out << "identical: " << n << " steps, every input, loss, gradient and parameter the same\n";
  return 0;
}

}  // namespace bitgrad::instruments
