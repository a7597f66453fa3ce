// From the first difference of two PyTorch runs to its cause and its fix. Each rule reads what
// the recorder wrote (manifest.json, the step records) and the op finding of the replays; the
// first that applies is the answer. The order matters: a different script or build explains
// everything, a random op or a data order names its generator before the settings are blamed.
#include "instruments/torch_cause.hpp"

#include <initializer_list>
#include <set>
#include <vector>

namespace bitgrad::instruments {

const char* const kOnnxRoute =
    "the same model trained through bitgrad.onnx is bit-identical at any thread count, loader workers and batch split: "
    "torch.onnx.export(model, example_batch, \"model.onnx\", opset_version=17, training=torch.onnx.TrainingMode.TRAINING, "
    "do_constant_folding=False), then [model] onnx = \"model.onnx\" in a bitgrad configuration and "
    "`bitgrad audit model.toml --threads 1,2 --workers 0,2` shows = everywhere (docs/onnx.md)";

namespace {

using json = store::Json;

const json* at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return nullptr;
    p = &(*p)[k];
  }
  return p;
}
std::string text(const json* v) { return v == nullptr ? "(none)" : v->is_string() ? v->get<std::string>() : v->dump(); }
// o[k] when o is an object whose k is a string, else "" (a manifest is input)
std::string str(const json& o, const char* k) { return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string(); }
bool differ(const json& a, const json& b, std::initializer_list<const char*> path) {
  const json *x = at(a, path), *y = at(b, path);
  return (x == nullptr) != (y == nullptr) || (x != nullptr && *x != *y);
}

// The clock reads of the user's code in either run: "train.py:12 (time.time)"
std::vector<std::string> clock_sites(const json& ma, const json& mb) {
  std::set<std::string> seen;
  std::vector<std::string> v;
  for (const json* m : {&ma, &mb})
    if (const json* c = at(*m, {"run", "clock_reads"}); c != nullptr && c->is_array())
      for (const json& r : *c) {
        const std::string s = str(r, "site") + " (" + str(r, "call") + ")";
        if (seen.insert(s).second) v.push_back(s);
      }
  return v;
}
std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < 3; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > 3) s += " and " + std::to_string(v.size() - 3) + " more";
  return s;
}

// The seeding calls (torch.manual_seed, random.seed, numpy.random.seed) of one run, as text
std::string seeding(const json& m, const std::string& call) {
  std::string s;
  if (const json* c = at(m, {"run", "settings_calls"}); c != nullptr && c->is_array())
    for (const json& r : *c)
      if (str(r, "call") == call)
        s += (s.empty() ? "" : ", ") + (r.contains("args") ? r["args"].dump() : std::string("[]")) + (str(r, "site").empty() ? "" : " at " + str(r, "site"));
  return s.empty() ? "never" : s;
}

// Which generators' states differ between two records ("torch", "numpy", "python"), among
// those the runs drew from: a generator whose state at the step is the one it had when the
// recording began (run.rng_at_start) in both runs was not used, and its difference (an
// unseeded generator nobody draws from) is no cause.
std::vector<std::string> rng_differs(const json& ma, const json& mb, const json& x, const json& y) {
  std::vector<std::string> v;
  for (const char* g : {"torch", "numpy", "python"}) {
    if (!differ(x, y, {"rng", g})) continue;
    const json *sa = at(ma, {"run", "rng_at_start", g}), *sb = at(mb, {"run", "rng_at_start", g});
    const json *xa = at(x, {"rng", g}), *yb = at(y, {"rng", g});
    const bool unused = sa != nullptr && sb != nullptr && xa != nullptr && yb != nullptr && *sa == *xa && *sb == *yb;
    if (!unused) v.emplace_back(g);
  }
  return v;
}

struct Said {
  std::ostream& out;
  void operator()(const std::string& cause, const std::vector<std::string>& fixes) const {
    out << "cause: " << cause << "\n";
    for (const std::string& f : fixes) out << "fix: " << f << "\n";
  }
};

const char* const kWorkerSeed =
    "draw the augmentation's numbers from a generator keyed by the sample, the same whichever process draws them: "
    "rng = numpy.random.default_rng([seed, epoch, index]) (or torch.Generator().manual_seed(...) from the same) in "
    "__getitem__; a worker_init_fn that seeds the global generators makes runs with one worker count repeat, not runs "
    "with another agree";

// one generator named as the script reaches it, with the seeding call it was given
std::string generator_fix(const std::string& g, bool calls_differ) {
  if (calls_differ) return "make the seeding calls the same in every run (they follow what differs between the runs: an argument, a variable, a step)";
  if (g == "numpy") return "numpy.random.seed(0) at the top of the script (or numpy.random.default_rng(0) passed where numbers are drawn)";
  if (g == "python") return "random.seed(0) at the top of the script (or a random.Random(0) passed where numbers are drawn)";
  return "torch.manual_seed(0) at the top of the script, before the model is made (or a torch.Generator().manual_seed(0) "
         "passed to the op or to DataLoader(generator=...))";
}

}  // namespace

void explain_torch(const json& ma, const json& mb, const json& x, const json& y, const std::string& what, const OpFinding& op,
                   std::ostream& out) {
  const Said say{out};
  if (differ(ma, mb, {"run", "script", "sha256"}) || differ(ma, mb, {"run", "script", "argv"})) {
    say("the runs ran another script or other arguments (run.script in the manifests): not a nondeterminism", {});
    return;
  }
  if (differ(ma, mb, {"torch", "version"}) || differ(ma, mb, {"torch", "git_version"}) || differ(ma, mb, {"torch", "blas"})) {
    say("the runs used other PyTorch builds (" + text(at(ma, {"torch", "version"})) + " vs " + text(at(mb, {"torch", "version"})) +
            "): their kernels may sum in other orders",
        {"record both runs with one PyTorch build", kOnnxRoute});
    return;
  }
  const bool threads = differ(ma, mb, {"run", "threads"}) || differ(ma, mb, {"run", "settings_at_exit", "threads"});
  const bool workers = differ(ma, mb, {"run", "set_from_outside", "num_workers"});
  const bool hashes = differ(ma, mb, {"python", "str_hash"});
  const bool seeds = differ(ma, mb, {"run", "seed"});
  const std::vector<std::string> clock = clock_sites(ma, mb);
  const std::vector<std::string> rng = rng_differs(ma, mb, x, y);
  const json *ha = at(ma, {"environment", "PYTHONHASHSEED"}), *hb = at(mb, {"environment", "PYTHONHASHSEED"});
  const std::string hash_seeds = ha == nullptr && hb == nullptr ? "unset in both runs: each draws its own" : text(ha) + " vs " + text(hb);
  const std::string pythonhashseed_fix = "iterate sorted(...) of the set (or a list) where the order reaches the numbers, or set PYTHONHASHSEED=0 "
                                         "in the environment of every run (it is read when Python starts); two runs under one PYTHONHASHSEED "
                                         "that agree confirm this cause (string hashes differ between any two runs without it)";
  const std::string clock_fix = "seed from a constant, not the clock (" + joined(clock) + ")";
  // the environment variables the runs read differently (a switch such as RESEED=1)
  std::string env_read;
  if (const json *ea = at(ma, {"run", "environment_read"}), *eb = at(mb, {"run", "environment_read"}); ea != nullptr && eb != nullptr && ea->is_object() && eb->is_object()) {
    std::set<std::string> names;
    for (const auto& [k, v] : ea->items()) names.insert(k);
    for (const auto& [k, v] : eb->items()) names.insert(k);
    for (const std::string& k : names)
      if (ea->value(k, json()) != eb->value(k, json())) env_read += (env_read.empty() ? "" : ", ") + k + " " + ea->value(k, json()).dump() + " vs " + eb->value(k, json()).dump();
  }
  auto call_of = [](const std::string& g) { return g == "torch" ? "torch.manual_seed" : g == "numpy" ? "numpy.random.seed" : "random.seed"; };
  auto differs_calls = [&](const std::string& g) { return seeding(ma, call_of(g)) != seeding(mb, call_of(g)); };
  // the clock is the cause where the script read it and either no generator it draws from
  // differs (it seeded one of its own, a shuffle's) or the seeding calls differ (seeded from it);
  // an epoch timer beside an unseeded generator is not
  auto by_clock = [&](const std::vector<std::string>& gens) {
    if (clock.empty()) return false;
    for (const std::string& g : gens)
      if (!differs_calls(g)) return false;
    return true;
  };
  auto seeded = [&](const std::string& g) {
    const std::string call = call_of(g);
    const std::string a = seeding(ma, call), b = seeding(mb, call);
    if (a != b)
      return call + " was called with " + a + " in one run and " + b + " in the other" +
             (env_read.empty() ? std::string() : " (the runs read the environment differently: " + env_read + ")");
    if (g == "torch" && seeds) return "torch.initial_seed() is " + text(at(ma, {"run", "seed"})) + " vs " + text(at(mb, {"run", "seed"})) + ": the script does not seed it";
    return call + (a == "never" ? " is never called" : " was called alike (" + a + "), so something else drew from it");
  };

  if (what == "input") {
    const bool order = !str(x, "indices").empty() && !str(y, "indices").empty() && str(x, "indices") != str(y, "indices");
    if (order) {
      if (by_clock(rng)) return say("the data order follows the wall clock: the script reads it at " + joined(clock) + " and the sampler's indices differ", {clock_fix});
      if (!rng.empty())
        return say("the data order differs (the sampler's indices) and so does the state of " + rng.front() + "'s generator at this step: " + seeded(rng.front()),
                   {generator_fix(rng.front(), differs_calls(rng.front()))});
      if (hashes) return say("the data order differs while every generator agrees; the runs hash strings differently (PYTHONHASHSEED " + hash_seeds + "): an order taken from a set", {pythonhashseed_fix});
      return say("the data order differs (the sampler's indices) while every generator agrees: an order the recorder does not see (a file listing, another process)", {"build the order from a fixed list or a seeded generator"});
    }
    if (workers)
      return say("the same samples with other contents under num_workers " + text(at(ma, {"run", "set_from_outside", "num_workers"})) + " vs " +
                     text(at(mb, {"run", "set_from_outside", "num_workers"})) +
                     ": the dataset's __getitem__ draws from a global generator (NumPy's, Python's or torch's), whose stream "
                     "follows the worker layout (in each worker PyTorch reseeds all three from the loader's seed and the worker's "
                     "number; in the main process they go on from the script's state)",
                 {kWorkerSeed});
    if (by_clock(rng)) return say("the batch differs and the script reads the wall clock at " + joined(clock), {clock_fix});
    if (!rng.empty()) return say("the batch's contents differ and so does the state of " + rng.front() + "'s generator: " + seeded(rng.front()), {generator_fix(rng.front(), differs_calls(rng.front()))});
    if (hashes) return say("the same sample indices with other contents; the runs hash strings differently (PYTHONHASHSEED " + hash_seeds + "): a dataset built in a set's order", {pythonhashseed_fix});
    return say("the batch's contents differ while the sample indices and every generator agree: the data itself (a file that changed, an augmentation seeded elsewhere)", {});
  }
  if (op.kind == OpFinding::random) {
    if (by_clock({"torch"})) return say("the random op " + op.op + " at " + op.site + " drew other numbers; torch's generator is seeded from the wall clock (" + joined(clock) + ")", {clock_fix});
    return say("the random op " + op.op + " at " + op.site + " drew other numbers from the same inputs: " + seeded("torch"), {generator_fix("torch", differs_calls("torch"))});
  }
  if (threads && (op.kind == OpFinding::computed || op.kind == OpFinding::none))
    return say("the thread count (" + text(at(ma, {"run", "threads"})) + " vs " + text(at(mb, {"run", "threads"})) + ")" +
                   (op.kind == OpFinding::computed ? ": " + op.op + " at " + op.site + " computed another result from the same inputs" : std::string()) +
                   "; PyTorch's CPU reductions and matrix products split their sums by the thread count, and no flag of PyTorch's "
                   "(torch.use_deterministic_algorithms included) fixes that order",
               {"it cannot be removed inside PyTorch: run every time with the same count (torch.set_num_threads(N) and OMP_NUM_THREADS=N)", kOnnxRoute});
  if (op.kind == OpFinding::reordered || op.kind == OpFinding::parted) {
    const std::string what_op = op.kind == OpFinding::parted ? "the step's ops ran in another order" : op.op + " at " + op.site + " took the same values in another order";
    if (hashes) return say(what_op + ", and the runs hash strings differently (PYTHONHASHSEED " + hash_seeds + "): a set iterated, or a dict filled from one", {pythonhashseed_fix});
    return say(what_op + ": an iteration whose order changes between runs (a set of objects hashed by address, threads finishing in another order)", {"iterate a list, or sorted(...) with a key that does not depend on addresses"});
  }
  if (op.kind == OpFinding::state) {
    if (seeds || !rng.empty()) return say(op.op + " at " + op.site + " met a value made before this step that differs (its first differing input): " + seeded(rng.empty() ? "torch" : rng.front()), {generator_fix(rng.empty() ? "torch" : rng.front(), differs_calls(rng.empty() ? "torch" : rng.front()))});
    if (hashes) return say(op.op + " at " + op.site + " met a value made before this step that differs; the runs hash strings differently (PYTHONHASHSEED " + hash_seeds + ")", {pythonhashseed_fix});
    return say(op.op + " at " + op.site + " met a value made before this step that differs: state the recorder does not see (a buffer, a module's attribute, a file)", {});
  }
  if (op.kind == OpFinding::computed)
    return say(op.op + " at " + op.site + " computed another result from the same inputs at the same settings: a kernel that is not deterministic on this machine",
               {"torch.use_deterministic_algorithms(True) makes PyTorch refuse the kernels it knows to be nondeterministic", kOnnxRoute});
  if (threads) return say("the thread count (" + text(at(ma, {"run", "threads"})) + " vs " + text(at(mb, {"run", "threads"})) + ")", {"run every time with the same count", kOnnxRoute});
  if (!rng.empty()) return say("the state of " + rng.front() + "'s generator differs at this step: " + seeded(rng.front()), {generator_fix(rng.front(), differs_calls(rng.front()))});
  if (seeds) return say(seeded("torch"), {generator_fix("torch", differs_calls("torch"))});
  if (hashes) return say("the runs hash strings differently (PYTHONHASHSEED " + hash_seeds + "), which orders sets", {pythonhashseed_fix});
  say("not identified from the records (replay the step for its first op: bitgrad diff without --no-replay)", {});
}

}  // namespace bitgrad::instruments
