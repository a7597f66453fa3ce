// `bitgrad audit --torch "python3 train.py ARGS"`: an unmodified PyTorch script run under each
// setting (threads, loader workers) and repeated, recorded by bitgrad.torch; the pairwise
// matrices of its last step's loss, parameters and gradients (= the same bits, else the largest
// distance in ULPs), which settings move the bits, and for each run that differs the first
// divergent step, op, cause and fix (bitgrad diff's, between it and its nearest run).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "bitgrad/io.hpp"
#include "bitgrad/instruments.hpp"
#include "instruments/torch_cause.hpp"
#include "instruments/ulps.hpp"
#include "io/format.hpp"
#include "store/run_dir.hpp"
#include "store/study_dir.hpp"

namespace bitgrad::instruments {
namespace {

using json = store::Json;

// The words of a command line as a POSIX shell splits them: blanks separate, '…' keeps
// everything, "…" keeps all but \" \\ \$ \`, a backslash outside quotes keeps the next character.
// Anything a shell would expand ($, `, *, ;, |, <, >, &) is refused: the command is run, not
// interpreted.
std::vector<std::string> split_words(const std::string& cmd) {
  std::vector<std::string> words;
  std::string w;
  bool in_word = false;
  for (std::size_t i = 0; i < cmd.size(); ++i) {
    const char c = cmd[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(w), w.clear(), in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const std::size_t end = cmd.find('\'', i + 1);
      if (end == std::string::npos) throw Error("audit: --torch: unterminated ' in " + printable_excerpt(cmd, 200));
      w += cmd.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      std::size_t j = i + 1;
      for (; j < cmd.size() && cmd[j] != '"'; ++j) {
        if (cmd[j] == '\\' && j + 1 < cmd.size() && std::string("\"\\$`").find(cmd[j + 1]) != std::string::npos) ++j;
        else if (cmd[j] == '$' || cmd[j] == '`')
          throw Error("audit: --torch: '" + std::string(1, cmd[j]) + "' would be expanded by a shell; give the command with its values written out");
        w += cmd[j];
      }
      if (j >= cmd.size()) throw Error("audit: --torch: unterminated \" in " + printable_excerpt(cmd, 200));
      i = j;
    } else if (c == '\\') {
      if (i + 1 < cmd.size()) w += cmd[++i];
    } else if (std::string("$`*?;|<>&(){}~").find(c) != std::string::npos) {
      throw Error("audit: --torch: '" + std::string(1, c) + "' would be interpreted by a shell; quote it, or give the command with its values written out");
    } else {
      w += c;
    }
  }
  if (in_word) words.push_back(w);
  return words;
}

// The command's interpreter, its own options, the script and its arguments.
struct TorchCommand {
  std::vector<std::string> interpreter;  // "python3" and options such as -u
  std::string script;
  std::vector<std::string> args;
};
TorchCommand parse_command(const std::string& cmd) {
  const std::vector<std::string> w = split_words(cmd);
  const std::string expected = "expected \"python3 SCRIPT [ARGS...]\"";
  if (w.empty()) throw Error("audit: --torch: the command is empty; " + expected);
  const std::string base = w[0].substr(w[0].find_last_of('/') == std::string::npos ? 0 : w[0].find_last_of('/') + 1);
  if (base.rfind("python", 0) != 0) throw Error("audit: --torch: the command must start with a Python interpreter, got '" + w[0] + "'; " + expected);
  TorchCommand c;
  c.interpreter.push_back(w[0]);
  std::size_t i = 1;
  for (; i < w.size() && !w[i].empty() && w[i][0] == '-'; ++i) {
    if (w[i] == "-m" || w[i] == "-c" || w[i] == "-")
      throw Error("audit: --torch: '" + w[i] + "': the audit runs a script file (the recorder runs it as python3 SCRIPT would); " + expected);
    c.interpreter.push_back(w[i]);
    if ((w[i] == "-W" || w[i] == "-X") && i + 1 < w.size()) c.interpreter.push_back(w[++i]);
  }
  if (i >= w.size()) throw Error("audit: --torch: no script in '" + printable_excerpt(cmd, 200) + "'; " + expected);
  c.script = w[i];
  if (!io::exists(c.script)) throw Error("audit: --torch: the script '" + c.script + "' does not exist");
  c.args.assign(w.begin() + static_cast<std::ptrdiff_t>(i) + 1, w.end());
  return c;
}

// One run: its settings, where it is, and its last step's tensors by kind
struct TorchRun {
  int threads = 1, workers = 0, repeat = 0;
  std::string dir;
  json manifest;
  std::map<std::string, Tensor> kind[3];  // loss, parameters, gradients
};
const char* const kKinds[] = {"loss", "parameters", "gradients"};

// "=" for the same bits; else the largest distance in ULPs of an element; "shape" when the
// tensors are not comparable (another set of names or shapes)
struct Cell {
  bool same = false, comparable = true;
  std::int64_t ulps = 0;
  std::string text() const { return same ? "=" : !comparable ? "shape" : std::to_string(ulps); }
};
Cell compare(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  Cell c;
  c.same = true;
  if (a.size() != b.size()) return Cell{false, false, 0};
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    const Tensor &x = ia->second, &y = ib->second;
    if (ia->first != ib->first || x.shape() != y.shape() || x.dtype() != y.dtype()) return Cell{false, false, 0};
    const bool f64 = x.dtype() == DType::f64;
    const void* px = f64 ? static_cast<const void*>(x.data<double>()) : static_cast<const void*>(x.data<float>());
    const void* py = f64 ? static_cast<const void*>(y.data<double>()) : static_cast<const void*>(y.data<float>());
    if (std::memcmp(px, py, static_cast<std::size_t>(x.numel()) * (f64 ? 8 : 4)) == 0) continue;
    c.same = false;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const std::int64_t u = x.dtype() == DType::f64 ? ulp_distance(x.data<double>()[i], y.data<double>()[i])
                                                     : ulp_distance(x.data<float>()[i], y.data<float>()[i]);
      c.ulps = std::max(c.ulps, u);
    }
    c.ulps = std::max<std::int64_t>(c.ulps, 1);  // other bits at no distance (+0 and -0, NaN payloads): not 0
  }
  return c;
}

void read_last(TorchRun& r) {
  const std::string path = r.dir + "/last.safetensors";
  if (!io::exists(path)) throw Error("audit: " + r.dir + " recorded no step (no last.safetensors): does the script step a torch.optim optimizer?");
  for (auto& [name, t] : io::load_safetensors(path, io::Checksum::if_present).tensors) {
    // "loss", or "loss K" per optimizer where several step
    const int k = name == "loss" || name.rfind("loss ", 0) == 0 ? 0 : name.rfind("param ", 0) == 0 ? 1 : name.rfind("grad ", 0) == 0 ? 2 : -1;
    if (k >= 0 && (t.dtype() == DType::f32 || t.dtype() == DType::f64)) r.kind[k].emplace(name, t.contiguous_copy());
  }
}

std::string setting(const TorchRun& r) { return "threads " + std::to_string(r.threads) + ", workers " + std::to_string(r.workers); }

}  // namespace

int audit_torch(const std::string& command, const AuditOptions& opt, std::ostream& out) {
  BITGRAD_CHECK(!opt.threads.empty() && !opt.workers.empty(), "audit", "the setting lists must not be empty");
  BITGRAD_CHECK(opt.accumulate == std::vector<std::int64_t>{1} && opt.ranks == std::vector<int>{1} && opt.steps < 0, "audit",
                "--torch varies --threads and --workers; --accumulate, --ranks and --steps are for bitgrad's own configurations "
                "(the script decides its batches and its steps)");
  const TorchCommand cmd = parse_command(command);
  const int settings = static_cast<int>(opt.threads.size() * opt.workers.size());
  const int repeats = opt.runs > 0 ? opt.runs : settings > 1 ? 1 : 2;
  BITGRAD_CHECK(settings * repeats >= 2, "audit", "needs at least 2 runs to compare; list several --threads or --workers, or ask for --runs 2");
  std::string stem = cmd.script.substr(cmd.script.find_last_of('/') == std::string::npos ? 0 : cmd.script.find_last_of('/') + 1);
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".py") == 0) stem.resize(stem.size() - 3);
  const std::string dir = opt.out.empty() ? "runs/audit-" + stem : opt.out;
  const store::StudyDir study = store::StudyDir::create(dir, "audit");

  std::vector<TorchRun> runs;
  for (int rep = 0; rep < repeats; ++rep)
    for (int w : opt.workers)
      for (int t : opt.threads) {
        TorchRun r;
        r.threads = t, r.workers = w, r.repeat = rep;
        r.dir = dir + "/run-" + std::to_string(runs.size() + 1);
        runs.push_back(std::move(r));
      }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    TorchRun& r = runs[i];
    const std::string n = std::to_string(r.threads);
    // the thread count from outside: the variables OpenMP and the BLAS libraries read at start,
    // and torch.set_num_threads through the recorder
    std::string line = "OMP_NUM_THREADS=" + n + " MKL_NUM_THREADS=" + n + " OPENBLAS_NUM_THREADS=" + n;
    for (const std::string& a : cmd.interpreter) line.append(" ").append(io::shell_quoted(a));
    line += " -m bitgrad.torch.record --out " + io::shell_quoted(r.dir) + " --threads " + n + " --workers " + std::to_string(r.workers) +
            " --keep-last -- " + io::shell_quoted(cmd.script);
    for (const std::string& a : cmd.args) line.append(" ").append(io::shell_quoted(a));
    line.append(" >").append(io::shell_quoted(r.dir + ".log")).append(" 2>&1");
    if (std::system(line.c_str()) != 0) {
      const std::string log = io::exists(r.dir + ".log") ? io::read_file(r.dir + ".log") : "";
      throw Error("audit: run " + std::to_string(i + 1) + " (" + setting(r) + ") failed (" + line + "): " +
                  printable_excerpt(log.substr(log.size() > 2000 ? log.size() - 2000 : 0), 2000));
    }
    r.manifest = store::RunDir::open(r.dir, "audit").manifest();
    const json& run = r.manifest.at("run");
    if (run.contains("recording_error"))
      throw Error("audit: run " + std::to_string(i + 1) + " (" + setting(r) + ", " + r.dir + ") stopped recording: " + printable_excerpt(run["recording_error"].dump(), 300));
    read_last(r);
    std::string loss = "(none)";
    if (auto it = r.kind[0].find("loss"); it != r.kind[0].end()) loss = io::strprintf("%.9g", it->second.item());
    out << "run " << i + 1 << ": " << setting(r) << ": " << (run.contains("steps") ? run["steps"].dump() : "?") << " optimizer steps, last loss " << loss << " (" << r.dir << ")\n";
    auto str = [](const json& o, const char* k) { return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string("?"); };
    if (run.contains("overridden") && run["overridden"].is_array())
      for (const json& o : run["overridden"])
        if (o.is_object() && o.contains("explicit") && o["explicit"] == true)
          out << "  note: the script sets " << str(o, "setting") << " to " << (o.contains("script") ? o["script"].dump() : "?") << " at " << str(o, "site")
              << "; the audit kept " << (o.contains("used") ? o["used"].dump() : "?") << " (the setting under test)\n";
    out << std::flush;
  }

  const std::size_t n = runs.size();
  std::vector<std::vector<Cell>> cells[3];
  bool all_same = true;
  for (int k = 0; k < 3; ++k) {
    out << "\n" << kKinds[k] << " at the last step (= the same bits; else the largest distance in ULPs):\n";
    cells[k].assign(n, std::vector<Cell>(n));
    for (std::size_t a = 0; a < n; ++a) {
      out << (a ? " [" : "[[");
      for (std::size_t b = 0; b < n; ++b) {
        cells[k][a][b] = compare(runs[a].kind[k], runs[b].kind[k]);
        all_same = all_same && cells[k][a][b].same;
        out << (b ? " " : "") << cells[k][a][b].text();
      }
      out << (a + 1 == n ? "]]\n" : "]\n");
    }
  }
  auto same = [&](std::size_t a, std::size_t b) { return cells[0][a][b].same && cells[1][a][b].same && cells[2][a][b].same; };
  // runs that differ only in one thing: the setting (or the repetition) that moves the bits
  struct Axis {
    const char* name;
    std::vector<std::pair<std::size_t, std::size_t>> pairs, differing;
  } axes[] = {{"repeated at one setting", {}, {}}, {"--threads", {}, {}}, {"--workers", {}, {}}};
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = a + 1; b < n; ++b) {
      const bool t = runs[a].threads != runs[b].threads, w = runs[a].workers != runs[b].workers;
      const int axis = !t && !w ? 0 : t && !w ? 1 : w && !t ? 2 : -1;
      if (axis < 0) continue;
      axes[axis].pairs.emplace_back(a, b);
      if (!same(a, b)) axes[axis].differing.emplace_back(a, b);
    }
  out << "\n";
  json verdict = json::object();
  for (const Axis& x : axes) {
    if (x.pairs.empty()) continue;
    const bool moves = !x.differing.empty();
    verdict[x.name] = moves;
    if (&x == &axes[0]) {
      out << (moves ? "the script is not deterministic on its own: runs " + std::to_string(x.differing[0].first + 1) + " and " +
                          std::to_string(x.differing[0].second + 1) + " (" + setting(runs[x.differing[0].first]) + ") differ\n"
                    : "repeated runs at one setting agree\n");
      continue;
    }
    if (moves) {
      const auto [a, b] = x.differing[0];
      out << x.name << " moves the bits: runs " << a + 1 << " and " << b + 1 << " (" << setting(runs[a]) << " vs " << setting(runs[b]) << ") differ"
          << (axes[0].differing.empty() ? "" : " (with repeated runs differing too, part of it may be the script's own)") << "\n";
    } else {
      out << x.name << " changes nothing: the runs that differ only in it agree\n";
    }
  }
  if (repeats == 1) out << "(one run per setting: --runs 2 tells a setting's effect from the script's own)\n";

  // the runs fall into classes of the same bits; each class after the first is traced against
  // the class before it whose settings are nearest (the fewest that differ): one finding per
  // class, which every run of it shares
  std::vector<std::size_t> cls(n), reps;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t c = reps.size();
    for (std::size_t k = 0; k < reps.size() && c == reps.size(); ++k)
      if (same(i, reps[k])) c = k;
    if (c == reps.size()) reps.push_back(i);
    cls[i] = c;
  }
  if (reps.size() > 1) {
    out << "runs with the same bits:";
    for (std::size_t k = 0; k < reps.size(); ++k) {
      out << (k ? "; " : " ");
      for (std::size_t i = 0, m = 0; i < n; ++i)
        if (cls[i] == k) out << (m++ ? ", " : "") << i + 1;
    }
    out << "\n";
  }
  json findings = json::array();
  for (std::size_t k = 1; k < reps.size(); ++k) {
    const std::size_t i = reps[k];
    std::size_t best = reps[0];
    int best_d = 99;
    for (std::size_t q = 0; q < k; ++q) {
      const std::size_t j = reps[q];
      const int d = (runs[i].threads != runs[j].threads) + (runs[i].workers != runs[j].workers);
      if (d < best_d) best = j, best_d = d;
    }
    const std::pair<std::size_t, std::size_t> key{best, i};
    std::ostringstream d;
    DiffOptions dopt;
    dopt.reuse_replays = true;
    try {
      diff(runs[key.first].dir, runs[key.second].dir, dopt, d);
    } catch (const std::exception& e) {  // one class not traced: the matrices and the others stand
      d << "not traced: " << e.what() << "\n";
    }
    out << "\nrun " << key.second + 1 << " against run " << key.first + 1 << " (" << setting(runs[key.second]) << " vs " << setting(runs[key.first])
        << "), for the runs with run " << key.second + 1 << "'s bits:\n";
    std::istringstream lines(d.str());
    bool in_manifests = false;
    json text = json::array();
    for (std::string l; std::getline(lines, l);) {
      // the manifests' differences are the settings above and the paths of the runs
      if (l == "manifests:") {
        in_manifests = true;
        continue;
      }
      if (in_manifests && l.rfind("  ", 0) == 0) continue;
      in_manifests = false;
      out << "  " << l << "\n";
      text.push_back(l);
    }
    findings.push_back({{"runs", {key.first + 1, key.second + 1}}, {"diff", text}});
  }

  nlohmann::ordered_json j;
  j["torch_command"] = command;
  j["script"] = cmd.script;
  nlohmann::ordered_json rj = nlohmann::ordered_json::array();
  for (const TorchRun& r : runs)
    rj.push_back({{"threads", r.threads}, {"workers", r.workers}, {"repeat", r.repeat + 1}, {"dir", r.dir},
                  {"overridden", r.manifest.at("run").contains("overridden") ? r.manifest["run"]["overridden"] : json::array()}});
  j["runs"] = rj;
  nlohmann::ordered_json mats, eq;
  for (int k = 0; k < 3; ++k) {
    nlohmann::ordered_json m = nlohmann::ordered_json::array(), e = nlohmann::ordered_json::array();
    for (std::size_t a = 0; a < n; ++a) {
      nlohmann::ordered_json row = nlohmann::ordered_json::array(), erow = nlohmann::ordered_json::array();
      for (std::size_t b = 0; b < n; ++b) {
        const Cell& c = cells[k][a][b];
        row.push_back(c.same ? nlohmann::ordered_json(0) : c.comparable ? nlohmann::ordered_json(c.ulps) : nlohmann::ordered_json(nullptr));
        erow.push_back(c.same);
      }
      m.push_back(row);
      e.push_back(erow);
    }
    mats[kKinds[k]] = m;
    eq[kKinds[k]] = e;
  }
  j["units"] = "ulps";
  j["matrices"] = mats;
  j["bitwise_equal"] = eq;
  j["moves_the_bits"] = verdict;
  j["findings"] = findings;
  j["all_zero"] = all_same;
  RunInfo info;
  info.kind = RunKind::audit;
  info.command = opt.command;
  info.config_file = cmd.script;
  json m = json::parse(run_manifest_json(info));
  m["run"]["source"] = "torch";
  m["run"]["torch_command"] = command;
  study.write("audit.json", j, m.dump(2) + "\n");
  out << "\n" << (all_same ? "all bitwise equal: " : "NOT all equal: ") << n << " runs, matrices in " << dir << "/audit.json\n";
  return all_same ? 0 : 1;
}

}  // namespace bitgrad::instruments
