// `bitgrad diff RUN_A RUN_B`: where two runs part.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/manifest.hpp"
#include "instruments/torch_cause.hpp"
#include "instruments/trace.hpp"
#include "instruments/ulps.hpp"
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

// A PyTorch record's generator states with those still at the state the recording began with
// (run.rng_at_start) marked "unused": a generator nobody drew from cannot have moved a number,
// so an unseeded one differing between runs is no difference
json used_rng(const json& rng, const json& manifest) {
  if (!rng.is_object()) return rng;
  json v = rng;
  const json* start = manifest.contains("run") && manifest["run"].is_object() && manifest["run"].contains("rng_at_start") ? &manifest["run"]["rng_at_start"] : nullptr;
  if (start == nullptr || !start->is_object()) return v;
  for (auto& [g, state] : v.items())
    if (start->contains(g) && (*start)[g] == state) state = "unused";
  return v;
}

// A run recorded from a PyTorch script (bitgrad.torch, docs/torch.md)
bool from_torch(const json& m) { return m.contains("run") && m["run"].is_object() && m["run"].value("source", "") == "torch"; }

// A PyTorch run has no configuration or checkpoint to replay from: its script runs again under
// the recorder up to `step`, that step's ops traced (their inputs' and outputs' fingerprints) and
// its tensors kept (python3 -m bitgrad.torch.replay), into RUN/replay-step-N.
std::string torch_replay(const store::RunDir& dir, const json& m, std::int64_t step, bool reuse) {
  // the interpreter that recorded the run, when it is one (a manifest is input: its "executable"
  // runs only if it names an existing python*; else the python3 on PATH)
  std::string python = "python3";
  if (m.contains("python") && m["python"].is_object() && m["python"].contains("executable") && m["python"]["executable"].is_string()) {
    const std::string exe = m["python"]["executable"].get<std::string>();
    const std::string base = exe.substr(exe.find_last_of('/') == std::string::npos ? 0 : exe.find_last_of('/') + 1);
    if (!exe.empty() && exe[0] == '/' && base.rfind("python", 0) == 0 && io::exists(exe)) python = exe;
  }
  const std::string out = dir.path() + "/replay-step-" + std::to_string(step);
  if (reuse && io::exists(out + "/replay.json") && io::exists(out + "/ops.jsonl")) return out;
  // Python reads PYTHONHASHSEED when it starts, before the replay could set it: the recorded
  // value goes into the command's environment (unset: each run draws its own, as the run did,
  // whatever the caller's environment holds)
  std::string env = "env -u PYTHONHASHSEED ";
  if (m.contains("environment") && m["environment"].is_object() && m["environment"].contains("PYTHONHASHSEED") &&
      m["environment"]["PYTHONHASHSEED"].is_string())
    env = "PYTHONHASHSEED=" + io::shell_quoted(m["environment"]["PYTHONHASHSEED"].get<std::string>()) + " ";
  const std::string cmd = env + io::shell_quoted(python) + " -m bitgrad.torch.replay " + io::shell_quoted(dir.path()) + " --step " +
                          std::to_string(step) + " --out " + io::shell_quoted(out) + " >" + io::shell_quoted(out + ".log") + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    const std::string log = io::exists(out + ".log") ? io::read_file(out + ".log") : "";
    throw Error("diff: replaying step " + std::to_string(step) + " of " + dir.path() + " failed (" + cmd + "): " +
                printable_excerpt(log.substr(log.size() > 2000 ? log.size() - 2000 : 0), 2000));
  }
  return out;
}

// The step's tensor `what` ("input", "loss", "grad NAME", "param NAME") as a replay kept it
Tensor replayed_tensor(const std::string& replay_dir, const std::string& what) {
  const io::SafeTensors st = io::load_safetensors(replay_dir + "/tensors.safetensors", io::Checksum::if_present);
  for (const auto& [name, t] : st.tensors)
    if (name == what) return t;
  throw Error("diff: " + replay_dir + "/tensors.safetensors holds no '" + what + "'");
}

// The first op of the step whose output (or gradient) differs, from two op traces of it; for a
// trace that records its inputs' fingerprints, whether they differed already — and if so,
// whether they are values the other run's step has too (the same values in another order) or
// values made before the step.
OpFinding first_op(const std::vector<json>& oa_all, const std::vector<json>& ob_all, std::ostream& out) {
  OpFinding found;
  auto field = [](const json& r, const char* k) { return r.contains(k) ? r[k].dump() : std::string(); };
  // a replay of step 1 traces the script's setup too (making the data and the model): a value
  // made there that differs shows as a step op's input that differed already; the first setup
  // op whose output differs is named beside it
  std::vector<json> oa, ob, sa, sb;
  for (const json& r : oa_all) (r.value("phase", "") == "setup" ? sa : oa).push_back(r);
  for (const json& r : ob_all) (r.value("phase", "") == "setup" ? sb : ob).push_back(r);
  for (std::size_t k = 0; k < std::min(sa.size(), sb.size()); ++k)
    if (field(sa[k], "op") != field(sb[k], "op") || field(sa[k], "hash") != field(sb[k], "hash")) {
      found.setup_op = sa[k].value("op", "");
      found.setup_site = sa[k].value("site", "");
      break;
    }
  for (std::size_t k = 0; k < std::min(oa.size(), ob.size()); ++k) {
    const json& r = oa[k];
    const json& q = ob[k];
    if (field(r, "op") != field(q, "op") || field(r, "phase") != field(q, "phase") || field(r, "shape") != field(q, "shape")) {
      auto where = [](const json& o) {
        const std::string label = o.value("label", ""), site = o.value("site", "");
        return " " + o.value("shape", "") + " (" + (label.empty() ? "" : label + ", ") + "called at " + site + ")";
      };
      out << "the op sequences part at op " << k + 1 << " of the step: " << r.value("phase", "") << " '" << r.value("op", "") << "'" << where(r)
          << " vs '" << q.value("op", "") << "'" << where(q) << "\n";
      found.kind = OpFinding::parted;
      found.op = r.value("op", "");
      found.site = r.value("site", "");
      return found;
    }
    if (field(r, "hash") == field(q, "hash")) continue;
    out << "first op: " << r.value("phase", "") << " '" << r.value("op", "") << "'";
    if (r.value("phase", "") == "backward" && r.contains("input")) out << " (gradient of input " << r.value("input", -1) << ")";
    out << ", label " << (r.value("label", "").empty() ? std::string("(none)") : r.value("label", "")) << ", called at "
        << r.value("site", "") << ", shape " << r.value("shape", "") << " (op " << k + 1 << " of the step)";
    if (r.contains("inputs") && q.contains("inputs")) {
      const std::string op = r.value("op", "");
      bool random = false;
      for (const char* name : {"bernoulli", "dropout", "normal", "uniform", "rand", "multinomial", "exponential", "geometric", "cauchy", "log_normal"})
        random = random || op.find(name) != std::string::npos;
      found.op = r.value("op", "");
      found.site = r.value("site", "");
      if (r["inputs"] != q["inputs"]) {
        // each differing input of one run's op is a value the other run's step holds too
        auto values = [](const std::vector<json>& ops) {
          std::set<std::string> v;
          for (const json& o : ops) {
            if (o.contains("hash") && o["hash"].is_string()) v.insert(o["hash"].get<std::string>());
            if (o.contains("inputs") && o["inputs"].is_array())
              for (const json& h : o["inputs"])
                if (h.is_string()) v.insert(h.get<std::string>());
          }
          return v;
        };
        const std::set<std::string> in_b = values(ob);
        bool all_there = r["inputs"].is_array() && q["inputs"].is_array() && r["inputs"].size() == q["inputs"].size();
        for (std::size_t i = 0; all_there && i < r["inputs"].size(); ++i)
          if (r["inputs"][i] != q["inputs"][i]) all_there = r["inputs"][i].is_string() && !r["inputs"][i].get<std::string>().empty() && in_b.count(r["inputs"][i].get<std::string>()) > 0;
        found.kind = all_there ? OpFinding::reordered : OpFinding::state;
        out << (all_there ? "; its inputs differed already, each a value the other run's step also has: the same values in another order"
                          : "; its inputs differed already (a value made before this step)");
        if (!all_there && !found.setup_op.empty())
          out << "; before the step, the first op whose output differs: '" << found.setup_op << "' called at " << found.setup_site;
      } else {
        found.kind = random ? OpFinding::random : OpFinding::computed;
        out << (random ? "; its inputs were the same: a random op, whose generator's state differed" : "; its inputs were the same: this op computed them differently");
      }
    }
    out << "\n";
    return found;
  }
  if (oa.size() != ob.size()) {
    out << "the op traces of the step agree on their first " << std::min(oa.size(), ob.size()) << " ops, then one ends\n";
    found.kind = OpFinding::parted;
  }
  return found;
}

std::vector<json> ops_of_step(const std::vector<json>& ops, std::int64_t step) {
  std::vector<json> v;
  for (const json& r : ops)
    if (r.contains("step") && r["step"].is_number_integer() && r["step"].get<std::int64_t>() == step) v.push_back(r);
  return v;
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
  const bool torch_a = from_torch(ma), torch_b = from_torch(mb);

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
  std::string other;  // the first difference outside the tensors
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
        if (ga.size() != gb.size()) {  // another model, or an optimizer over other parameters
          what = kind;
          detail = std::string("the number of ") + (kind == std::string("grad") ? "gradients" : "parameters") + " (" +
                   std::to_string(ga.size()) + " vs " + std::to_string(gb.size()) + ")";
          break;
        }
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
    // what else a record holds (a PyTorch run's: the optimizer state, the RNG states, the data
    // order) is reported only where every tensor agrees, at the end
    if (what.empty() && other.empty())
      for (const auto& [k, v] : x.items()) {
        if (k == "step" || k == "epoch" || k == "batch" || k == "input" || k == "loss" || k == "grad" || k == "param") continue;
        if (y.contains(k) && y[k] == v) continue;
        if (k == "rng" && used_rng(v, ma) == used_rng(y.value(k, json()), mb)) continue;
        other = "step " + std::to_string(step) + ", the record's '" + k + "' (" + printable_excerpt(v.dump(), 80) + " vs " +
                printable_excerpt(y.value(k, json()).dump(), 80) + ")";
        break;
      }
    if (what.empty()) continue;
    out << "first difference: step " << step << ", " << detail << "\n";
    // 3. the first op, with op traces
    OpFinding found;
    if (da.has("ops.jsonl") && db.has("ops.jsonl"))
      found = first_op(ops_of_step(da.read_lines("ops.jsonl"), step), ops_of_step(db.read_lines("ops.jsonl"), step), out);
    if (opt.replay && torch_a != torch_b) {
      out << "  (one run is a PyTorch script's, the other bitgrad's: neither replays the other's step)\n";
    } else if (opt.replay && torch_a) {
      // 3-4 for PyTorch runs: both scripts again up to the step, its ops traced and its tensors kept
      const std::string ra = torch_replay(da, ma, step, opt.reuse_replays), rb = torch_replay(db, mb, step, opt.reuse_replays);
      auto read_ops = [](const std::string& dir) {
        return io::exists(dir + "/ops.jsonl") ? store::parse_json_lines(io::read_file(dir + "/ops.jsonl"), "diff", dir + "/ops.jsonl")
                                              : std::vector<json>{};
      };
      // a replay that does not give the traced step describes another run (the script is not
      // deterministic on its own): say so before its figures
      auto check = [&](const std::string& replay_dir, const json& traced, const std::string& run) {
        const std::vector<json> again = io::exists(replay_dir + "/trace.jsonl")
                                            ? store::parse_json_lines(io::read_file(replay_dir + "/trace.jsonl"), "diff", replay_dir + "/trace.jsonl")
                                            : std::vector<json>{};
        for (const json& r : again)
          if (r.value("step", std::int64_t{-1}) == step) {
            for (const char* k : {"input", "loss", "grad", "param"})
              if (r.value(k, json()) != traced.value(k, json())) {
                out << "  warning: the replay of " << run << " does not reproduce its step " << step << " ('" << k
                    << "' differs: the script is not deterministic on its own); the figures below describe the replay\n";
                return;
              }
            return;
          }
        out << "  warning: the replay of " << run << " recorded no step " << step << "\n";
      };
      check(ra, x, a);
      check(rb, y, b);
      found = first_op(ops_of_step(read_ops(ra), step), ops_of_step(read_ops(rb), step), out);
      if (what != "input" && what != "grad" && what != "param") {
        const Tensor va = replayed_tensor(ra, what), vb = replayed_tensor(rb, what);
        if (va.shape() != vb.shape() || va.dtype() != vb.dtype()) {
          out << "  replayed tensors have different shapes: " << va.shape().str() << " vs " << vb.shape().str() << "\n";
        } else if (va.dtype() == DType::f32 || va.dtype() == DType::f64) {
          BITGRAD_DISPATCH_FLOAT(va.dtype(), "diff", T, [&] { compare_values<T>(va, vb, out); });
        }
      }
      out << "  (replays: " << ra << ", " << rb << ")\n";
      explain_torch(ma, mb, x, y, what, found, out);
    } else if (torch_a && torch_b) {
      explain_torch(ma, mb, x, y, what, found, out);
    } else if (opt.replay && (what == "grad" || what == "param")) {
      // no one tensor to replay
    } else if (opt.replay && !da.has("config.toml")) {
      out << "  (" << a << " has no configuration to replay the step from: a Python loop's run)\n";
    } else if (opt.replay) {
      // 4. the size of the difference, by replaying the step
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
  if (!other.empty()) {
    out << "every input, loss, gradient and parameter the same over " << n << " steps; first other difference: " << other << "\n";
    return 1;
  }
  out << "identical: " << n << " steps, every input, loss, gradient and parameter the same\n";
  return 0;
}

}  // namespace bitgrad::instruments
