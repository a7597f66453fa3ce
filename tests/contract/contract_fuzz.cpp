// The contract fuzzer: random training set-ups (contract/case.hpp), each trained under a matrix
// of settings that the reproducibility contract (docs/numerics.md, ../shared/DESIGN.md §2) says
// cannot change a bit — threads, loader workers, code paths, a resume at a random step, the
// same perturbed order at two thread counts, every accumulate that divides the batch (T5:
// equal unless the run said the contract does not hold), a run on 2 to 8 MPI ranks against
// one process with the same accumulate (T6, when built with MPI), and recomputed activations (T9). A pair that must agree and does not
// fails the case; the case is shrunk and printed as a TOML file and the two command lines.
//
//   contract_fuzz [--cases N] [--seconds S] [--seed S] [--first I] [--out DIR] [--torch DIR] [--keep-going] [--print] [--census]
// --torch DIR: also the graphs torch exported (sample_axis_models.py --export DIR):
// one case in three trains one of them; a run the contract refuses for it must be refused alike.
// --print writes the cases' TOML files to DIR (contract-cases by default) and trains nothing;
// --census counts the layer types and losses the cases draw, trains nothing, and fails when one
// that the configuration accepts (and the fuzzer should reach) is never drawn.
// Exit 0 when every case held, 1 when one failed, 2 on a usage or set-up error.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "bitgrad/instruments.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/rng.hpp"
#include "dist/plan.hpp"
#include "bitgrad/runtime.hpp"
#include "contract/case.hpp"

namespace bitgrad::contract {
namespace {

struct Setting {
  int threads = 1, workers = 0;
  std::int64_t accumulate = 1;
  Isa isa = Isa::scalar;
  std::optional<std::uint64_t> perturb;
  std::int64_t resume_at = 0;  // > 0: train this many steps, then resume to the end
  int ranks = 1;               // > 1: mpirun -n ranks bitgrad train (T6)
  std::string recompute;       // non-empty: [model] recompute = this (T9)

  std::string command(const std::string& toml) const {
    std::string env = std::string("BITGRAD_ISA=") + isa_name(isa) + " ";
    std::string opts = " --threads " + std::to_string(threads) + " --workers " + std::to_string(workers);
    if (accumulate > 1) opts += " --accumulate " + std::to_string(accumulate);
    if (ranks > 1) return env + "mpirun --oversubscribe --bind-to none -n " + std::to_string(ranks) + " bitgrad train " + toml + opts;
    if (perturb) opts += " --perturb-order " + std::to_string(*perturb);
    if (resume_at > 0)
      return env + "bitgrad train " + toml + opts + " --steps " + std::to_string(resume_at) + " --out R && " + env + "bitgrad train " + toml +
             opts + " --resume R";
    if (!recompute.empty()) return env + "bitgrad train " + toml + opts + "   # with recompute = \"" + recompute + "\" in [model]";
    return env + "bitgrad train " + toml + opts;
  }
};

Setting setting(int threads, int workers, std::int64_t accumulate, Isa isa) {
  Setting s;
  s.threads = threads, s.workers = workers, s.accumulate = accumulate, s.isa = isa;
  return s;
}

struct Outcome {
  std::string fingerprint, trace, error;
  bool t5_note = false;
};

std::string g_root;  // temporary directory of this process
int g_runs = 0;
int g_rank_runs = 0;  // of them on MPI ranks
int g_errors = 0;     // trainings that stopped with an error (a pair holds when both stop alike)
std::map<std::string, int> g_error_kinds;  // their messages (iterated only to print)

// A run on several ranks: mpirun on the bitgrad binary of this build.
void run_ranks(const Case& c, const Setting& s, const std::string& dir, Outcome& o) {
#ifdef BITGRAD_MPIRUN
  io::make_dirs(dir);
  io::write_file_atomic(dir + "/case.toml", c.toml());
  const std::string cmd = "cd '" + dir + "' && BITGRAD_ISA=" + isa_name(s.isa) + " timeout -k 5 300 " + BITGRAD_MPIRUN +
                          " --oversubscribe --allow-run-as-root --bind-to none -n " + std::to_string(s.ranks) + " " + BITGRAD_BIN +
                          " train case.toml --out run --no-progress --threads " + std::to_string(s.threads) + " --workers " +
                          std::to_string(s.workers) + " --accumulate " + std::to_string(s.accumulate) + " >out.txt 2>err.txt";
  const int rc = std::system(cmd.c_str());
  const std::string out = io::exists(dir + "/out.txt") ? io::read_file(dir + "/out.txt") : "";
  if (rc != 0) {
    const std::string err = io::exists(dir + "/err.txt") ? io::read_file(dir + "/err.txt") : "";
    o.error = "mpirun -n " + std::to_string(s.ranks) + " failed: " + err.substr(0, 500);
    return;
  }
  const std::size_t at = out.rfind("fingerprint ");
  o.fingerprint = at == std::string::npos ? "(none)" : out.substr(at + 12, 32);
  o.trace = io::read_file(dir + "/run/trace.jsonl");
#else
  (void)c, (void)s, (void)dir;
  o.error = "built without MPI";
#endif
}

// A case as written to FILE for a person: an ONNX case's graph beside it (FILE.onnx, named relative
// to the TOML, which resolves it against its own directory)
Case written(Case c, const std::string& file) {
  if (!c.onnx) return c;
  io::write_file_atomic(file + ".onnx", c.torch.empty() ? onnx_model_bytes(c) : io::read_file(c.onnx_path));
  c.onnx_path = file.substr(file.rfind('/') + 1) + ".onnx";
  return c;
}

Outcome run_case(const Case& case_in, const Setting& s) {
  Outcome o;
  const std::string dir = g_root + "/run" + std::to_string(g_runs++);
  Case c = case_in;  // an ONNX case's graph written beside the run (a torch graph is read where it is)
  if (c.onnx && c.torch.empty()) {
    c.onnx_path = dir + ".onnx";
    io::write_file_atomic(c.onnx_path, onnx_model_bytes(c));
  }
  if (s.ranks > 1) {
    ++g_rank_runs;
    run_ranks(c, s, dir, o);
    if (std::system(("rm -rf '" + dir + "' '" + dir + ".onnx'").c_str()) != 0) std::fprintf(stderr, "contract_fuzz: cannot remove %s\n", dir.c_str());
    return o;
  }
  try {
    train::Config cfg = train::parse_config(c.toml(), "case.toml");
    if (!s.recompute.empty()) cfg.model.recompute = nn::parse_recompute(s.recompute);
    IsaScope isa(s.isa);
    instruments::TrainOptions opt;
    opt.threads = s.threads;
    opt.workers = s.workers;
    opt.accumulate = s.accumulate;
    opt.perturb_order = s.perturb;
    opt.progress = 0;
    opt.out = dir;
    std::ostringstream log;
    if (s.resume_at > 0) {
      opt.steps = s.resume_at;
      instruments::train(cfg, opt, log);
      opt.steps = -1;
      opt.out.clear();
      opt.resume = dir;
    }
    o.fingerprint = instruments::train(cfg, opt, log).fingerprint.hex();
    o.trace = io::read_file(dir + "/trace.jsonl");
    o.t5_note = log.str().find("contract T5 does not hold") != std::string::npos;
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  if (std::system(("rm -rf '" + dir + "' '" + dir + ".onnx'").c_str()) != 0) std::fprintf(stderr, "contract_fuzz: cannot remove %s\n", dir.c_str());
  return o;
}

// Why b breaks the contract against a ("" when it holds).
std::string verdict(const Outcome& a, const Outcome& b, bool may_differ_with_note) {
  if (!a.error.empty() || !b.error.empty()) return a.error == b.error ? "" : "one run failed: " + (a.error.empty() ? b.error : a.error);
  if (a.fingerprint == b.fingerprint && a.trace == b.trace) return "";
  if (may_differ_with_note && b.t5_note) return "";
  return a.fingerprint != b.fingerprint ? "fingerprints differ (" + a.fingerprint + " vs " + b.fingerprint + ")" : "traces differ";
}

struct Pair {
  Setting a, b;
  bool t5 = false;  // b may differ if it printed the T5 note
};

// The settings matrix of one case (drawn from the case's own stream).
std::vector<Pair> matrix(const Case& c, std::uint64_t seed, std::uint64_t index) {
  rng::Stream r = rng::Stream(seed, "contract-matrix").sub(index);
  std::uint64_t k = 0;
  auto below = [&](std::int64_t n) { return static_cast<std::int64_t>(r.below(k++, static_cast<std::uint64_t>(n))); };
  std::vector<Isa> isas;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (cpu_supports(i)) isas.push_back(i);
  const Setting base = setting(1, 0, 1, isas.back());
  std::vector<Pair> v;
  for (int n = 0; n < 2; ++n) v.push_back({base, setting(static_cast<int>(2 + below(7)), static_cast<int>(below(4)), 1, isas.back())});
  for (Isa i : isas)
    if (i != base.isa) v.push_back({base, setting(static_cast<int>(1 + below(8)), 0, 1, i)});
  std::vector<std::int64_t> divisors;
  for (std::int64_t d = 2; d <= c.batch; ++d)
    if (c.batch % d == 0) divisors.push_back(d);
  for (int n = 0; n < 3 && !divisors.empty(); ++n) {
    const auto at = static_cast<std::size_t>(below(static_cast<std::int64_t>(divisors.size())));
    v.push_back({base, setting(static_cast<int>(1 + below(4)), static_cast<int>(below(3)), divisors[at], isas.back()), true});
    divisors.erase(divisors.begin() + static_cast<std::ptrdiff_t>(at));
  }
  if (c.steps > 1) {
    Setting s = setting(static_cast<int>(1 + below(4)), static_cast<int>(below(3)), 1, isas.back());
    s.resume_at = 1 + below(c.steps - 1);
    v.push_back({base, s});
  }
  Setting p1 = base, p2 = setting(static_cast<int>(2 + below(7)), static_cast<int>(below(3)), 1, isas[static_cast<std::size_t>(below(static_cast<std::int64_t>(isas.size())))]);
  p1.perturb = p2.perturb = 1 + static_cast<std::uint64_t>(below(1000));
  v.push_back({p1, p2});
#ifdef BITGRAD_MPIRUN
  // T6: data parallel on 2 to 8 ranks against one process with the same accumulate (1 in half
  // the cases, else a divisor of the batch: micro-batches that are whole subtrees, or not, when
  // the ranks hold whole micro-batches), as many ranks as the batch's tree has leaves
  std::vector<std::int64_t> accs{1};
  for (std::int64_t d = 2; d <= c.batch; ++d)
    if (c.batch % d == 0) accs.push_back(d);
  const std::int64_t acc = below(2) == 0 ? 1 : accs[static_cast<std::size_t>(below(static_cast<std::int64_t>(accs.size())))];
  const std::int64_t leaves = dist::step_layout(c.batch, c.batch, acc, 1).leaves;
  if (leaves >= 2) {
    Setting one = setting(1, 0, acc, isas.back()), d = setting(1, static_cast<int>(below(2)), acc, isas.back());
    d.ranks = static_cast<int>(2 + below(std::min<std::int64_t>(leaves, 8) - 1));
    v.push_back({one, d});
  }
#endif
  // T9: recomputed activations (drawn last, so every earlier pair of a case is what it was)
  Setting rc = setting(static_cast<int>(1 + below(4)), static_cast<int>(below(3)), 1, isas.back());
  rc.recompute = below(2) == 0 ? "blocks" : "all";
  v.push_back({base, rc});
  // a case `bitgrad train` does not split into micro-batches (splits_the_batch: batchnorm,
  // numerics.md §31) loses its micro-batch pairs, rank pairs with accumulate > 1 included; its
  // rank pairs with accumulate = 1 stay (the statistics are exchanged, §20). After every draw, so
  // that the other pairs stay what they were.
  if (!splits_the_batch(c))
    v.erase(std::remove_if(v.begin(), v.end(), [](const Pair& p) { return p.a.accumulate > 1 || p.b.accumulate > 1; }), v.end());
  // a torch graph that mixes samples trains whole only: its rank pairs go too (§42)
  if (!splits_over_ranks(c)) v.erase(std::remove_if(v.begin(), v.end(), [](const Pair& p) { return p.a.ranks > 1 || p.b.ranks > 1; }), v.end());
  return v;
}

std::string failure(const Case& c, const Pair& p) {
  const Outcome a = run_case(c, p.a), b = run_case(c, p.b);
  for (const Outcome* o : {&a, &b})
    if (!o->error.empty()) ++g_errors, ++g_error_kinds[o->error.substr(0, 160)];
  return verdict(a, b, p.t5);
}

// Shrinks c while the pair still fails; returns the smallest failing case.
Case shrink(Case c, const Pair& p, std::string& why) {
  for (bool smaller = true; smaller;) {
    smaller = false;
    for (const Case& s : simplifications(c)) {
      const std::string w = failure(s, p);
      if (!w.empty()) {
        c = s, why = w, smaller = true;
        break;
      }
    }
  }
  return c;
}

int usage() {
  std::fprintf(stderr, "usage: contract_fuzz [--cases N] [--seconds S] [--seed S] [--first I] [--out DIR] [--torch DIR] [--keep-going] [--print] [--census]\n");
  return 2;
}

// What the cases drew, in name order (a std::map, iterated only to print).
using Census = std::map<std::string, std::int64_t>;
void count(Census& n, const Case& c) {
  for (const std::string& f : features(c)) ++n[f];
  ++n[!splits_over_ranks(c) ? "(whole batch only)" : splits_the_batch(c) ? "(accumulate and ranks)" : "(ranks, no accumulate)"];
  if (c.precision != "fp32") ++n["precision=" + c.precision];
}
std::string census_line(const Census& n) {
  std::string s;
  for (const auto& [k, v] : n) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(v);
  return s;
}
// Every layer type the configuration accepts for the data the fuzzer makes (not the token
// models' embedding, transformer_block, tied_head), with every option, and every loss.
const char* const kMustDraw[] = {
    "linear", "conv2d", "flatten", "relu", "gelu", "tanh", "sigmoid", "dropout", "maxpool2d", "avgpool2d", "layernorm", "batchnorm",
    "rmsnorm", "groupnorm", "instancenorm", "rnn", "lstm", "gru", "conv", "conv(1d)", "conv1d", "conv_transpose2d", "conv+stride",
    "conv+dilation", "conv+groups", "conv_transpose2d+stride", "conv_transpose2d+groups", "conv1d+groups", "conv+pads", "conv_transpose2d+pads", "maxpool2d+padding", "maxpool2d+dilation", "maxpool2d+ceil_mode",
    "avgpool2d+padding", "avgpool2d+ceil_mode", "avgpool2d+count_include_pad=false", "adaptive_avgpool2d", "adaptive_maxpool2d",
    "global_avgpool", "upsample+nearest", "upsample+bilinear", "upsample+bilinear+align_corners", "rnn+all", "rnn+last", "lstm+all",
    "lstm+last", "gru+all", "gru+last", "lstm+num_layers", "gru+num_layers", "rnn+num_layers", "loss=cross_entropy", "loss=mse", "loss=l1",
    "loss=smooth_l1", "loss=huber", "loss=bce_with_logits", "loss=cross_entropy+label_smoothing", "loss=cross_entropy+class_weights",
    "loss=cross_entropy+ignore_index"};

}  // namespace
}  // namespace bitgrad::contract

int main(int argc, char** argv) {
  using namespace bitgrad::contract;
  std::int64_t cases = 100, first = 0;
  double seconds = 0;
  std::uint64_t seed = 1;
  std::string out;
  bool keep_going = false, print = false, census = false;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--keep-going" || k == "--print" || k == "--census") {
      (k == "--print" ? print : k == "--census" ? census : keep_going) = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    const char* v = argv[++i];
    if (k == "--torch") {
      try {
        load_torch_idioms(v);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
      }
    } else if (k == "--cases") cases = std::atoll(v);
    else if (k == "--seconds") seconds = std::atof(v);
    else if (k == "--seed") seed = std::strtoull(v, nullptr, 10);
    else if (k == "--first") first = std::atoll(v);
    else if (k == "--out") out = v;
    else return usage();
  }
  if (print) {
    if (out.empty()) out = "contract-cases";
    bitgrad::io::make_dirs(out);
    for (std::int64_t i = first; i < first + cases; ++i) {
      const std::string file = out + "/case-" + std::to_string(seed) + "-" + std::to_string(i) + ".toml";
      bitgrad::io::write_file_atomic(file, written(generate(seed, static_cast<std::uint64_t>(i)), file).toml());
      std::cout << file << "\n";
    }
    return 0;
  }
  if (census) {
    Census n;
    int unreadable = 0;
    for (std::int64_t i = first; i < first + cases; ++i) {
      Case c = generate(seed, static_cast<std::uint64_t>(i));
      count(n, c);
      if (c.onnx) ++n["(onnx)"];
      c.onnx = false;  // its layers as a layer list: the ONNX file is written only where a case runs
      try {  // every case is a configuration `bitgrad train` reads
        (void)bitgrad::train::parse_config(c.toml(), "case-" + std::to_string(i) + ".toml");
      } catch (const std::exception& e) {
        std::cout << "unreadable case " << i << ": " << e.what() << "\n";
        ++unreadable;
      }
    }
    std::cout << "contract_fuzz: seed " << seed << ", cases " << first << ".." << first + cases - 1 << " drew: " << census_line(n) << "\n";
    int missing = 0;
    for (const char* f : kMustDraw)
      if (!n.count(f)) std::cout << "never drawn: " << f << "\n", ++missing;
    return missing || unreadable ? 1 : 0;
  }
  if (out.empty()) out = "contract-failures";
  char tmpl[] = "/tmp/bitgrad-contract-XXXXXX";
  if (!::mkdtemp(tmpl)) return std::perror("contract_fuzz: mkdtemp"), 2;
  g_root = tmpl;
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t done = 0, failed = 0, pairs = 0;
  Census drawn;
  for (std::int64_t i = first; i < first + cases; ++i) {
    if (seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) break;
    const Case c = generate(seed, static_cast<std::uint64_t>(i));
    count(drawn, c);
    bool ok = true;
    for (const Pair& p : matrix(c, seed, static_cast<std::uint64_t>(i))) {
      ++pairs;
      std::string why = failure(c, p);
      if (why.empty()) continue;
      ok = false;
      const Case small = shrink(c, p, why);
      bitgrad::io::make_dirs(out);
      const std::string file = out + "/case-" + std::to_string(seed) + "-" + std::to_string(i) + ".toml";
      bitgrad::io::write_file_atomic(file, written(small, file).toml());
      std::cout << "FAIL case " << i << " (seed " << seed << "): " << why << "\n  shrunk case: " << file << "\n" << written(small, file).toml()
                << "  these two must give the same fingerprint and trace:\n    " << p.a.command(file) << "\n    " << p.b.command(file) << "\n"
                << std::flush;
      break;
    }
    ++done;
    failed += !ok;
    if (!ok && !keep_going) break;
  }
  if (std::system(("rm -rf '" + g_root + "'").c_str()) != 0) std::fprintf(stderr, "contract_fuzz: cannot remove %s\n", g_root.c_str());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "contract_fuzz: seed " << seed << ", cases " << first << ".." << first + done - 1 << ", " << pairs << " pairs of runs, "
            << g_runs << " trainings (" << g_rank_runs << " on MPI ranks) in " << static_cast<long long>(secs) << " s\n";
  std::cout << "drawn: " << census_line(drawn) << "\n";
  if (g_errors) {  // a case both sides refuse alike holds, but says nothing: shown, so that it is seen
    std::cout << g_errors << " trainings stopped with an error (alike on both sides of their pairs):\n";
    for (const auto& [what, n] : g_error_kinds) std::cout << "  " << n << " x " << what << "\n";
  }
  std::cout << done - failed << " passed, " << failed << " failed\n";
  return failed ? 1 : 0;
}
