// The bitgrad command: argument parsing and output only. Errors are one line on stderr and
// exit code 2.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <system_error>
#include <thread>

#include "bitgrad/bitgrad.hpp"
#include "bitgrad/instruments.hpp"
#include "serve/serve.hpp"

namespace {

std::string version_line() {
  return std::string("bitgrad ") + bitgrad::kVersion + " (numerics " + std::to_string(bitgrad::kNumericsVersion) + ", commit " +
         bitgrad::git_commit() + ")";
}

int cmd_selftest(int threads, const std::string& isa) {
  using namespace bitgrad;
  check_fp_environment();
  ThreadCountScope thread_count(threads);
  IsaScope code_path(isa.empty() ? active_isa() : parse_isa(isa));
  SelftestResult r = run_selftest();
  std::printf("bitgrad %s selftest\n", kVersion);
  std::printf("numerics %d\n", kNumericsVersion);
  std::printf("isa %s, threads %d\n", isa_name(active_isa()), num_threads());
  std::printf("model %s\n", r.model.c_str());
  for (const auto& [name, d] : r.gradients) std::printf("grad %-3s %s\n", name.c_str(), d.hex().c_str());
  std::printf("loss %.9g\n", r.loss);
  std::printf("fingerprint %s\n", r.fingerprint.hex().c_str());
  return 0;
}

// A seed given as decimal digits only, in [0, max]: CLI11 would turn "-1" or "2^64" into
// 2^64 - 1 without a word.
std::uint64_t parse_seed(const std::string& flag, const std::string& text, std::uint64_t max) {
  std::uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 20;
  for (char c : text) {
    if (!ok) break;
    const unsigned d = static_cast<unsigned>(c - '0');
    ok = c >= '0' && c <= '9' && v <= (max - d) / 10;
    v = v * 10 + d;
  }
  if (!ok) throw bitgrad::Error(flag + " must be a whole number in [0, " + std::to_string(max) + "], got '" + text + "'");
  return v;
}

volatile std::sig_atomic_t g_under_mpirun = 0;

// The first SIGINT / SIGTERM asks the run to stop after its step and checkpoint; a second one
// stops at once (the default action).
extern "C" void on_stop_signal(int sig) {
  if (bitgrad::train::stop_requested()) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  bitgrad::train::request_stop(sig);
  // Under mpirun, which stops reading the ranks' output while it waits to kill them, a write to
  // a full stdout pipe would block rank 0 before its checkpoint: from now on such a write fails
  // instead (a write already blocked is restarted, and then fails too).
  if (g_under_mpirun) ::fcntl(STDOUT_FILENO, F_SETFL, ::fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
  static const char msg[] = "\nbitgrad: stopping after this step to write a checkpoint (signal again to stop at once)\n";
  [[maybe_unused]] const ssize_t n = ::write(2, msg, sizeof msg - 1);
}

// Under mpirun every rank runs this; rank 0 prints. An error all ranks share (a refused start,
// a replica mismatch) is printed once by rank 0; an error of one rank is printed by it, naming
// the rank, and ends the job (the others would wait for it in vain).
int cmd_train(const std::string& config, const bitgrad::instruments::TrainOptions& o) {
  namespace dist = bitgrad::dist;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const bool ranks = dist::launched_by_mpirun();
  g_under_mpirun = ranks;
  int rank = 0;
  try {
    rank = dist::world_rank();  // starts MPI under mpirun
    bitgrad::train::Config cfg;
    try {
      cfg = bitgrad::train::load_config(config);
    } catch (const std::exception& e) {
      if (!ranks) throw;
      bitgrad::train::fail_start(e.what());
    }
    bitgrad::instruments::train(cfg, o, std::cout);
  } catch (const bitgrad::train::Interrupted& e) {
    std::cout.flush();
    if (rank == 0) std::fprintf(stderr, "bitgrad: %s\n", e.what());
    // no MPI_Finalize: mpirun, which forwarded the signal, is ending the job, and a finalize
    // would wait for it; the checkpoint is written
    return 128 + e.signal;
  } catch (const dist::CollectiveError& e) {
    std::cout.flush();
    if (rank == 0) std::fprintf(stderr, "bitgrad: error: %s\n", e.what());
    dist::finalize();
    return 2;
  } catch (const std::exception& e) {
    if (!ranks || dist::world_size() == 1) throw;
    std::cout.flush();
    std::fprintf(stderr, "bitgrad: error: rank %d (%s): %s\n", rank, dist::host_name().c_str(), e.what());
    std::fflush(stderr);
    dist::abort_job(2);
    return 2;
  }
  dist::finalize();
  return 0;
}

// Output that never reached stdout (a full disk, a closed file) is an error, not exit 0.
int checked_stdout(int rc) {
  errno = 0;
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  int err = errno;
  if (!flushed || std::ferror(stdout) || !std::cout) {
    // an earlier write's errno was overwritten by the calls since: one more byte, written to
    // the descriptor itself, fails for the same cause (a full device, a file past ulimit -f);
    // a closed pipe would have ended the process at the first write (SIGPIPE)
    if (err == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) err = errno;
    std::fprintf(stderr, "bitgrad: error: cannot write to standard output (%s)\n",
                 err ? std::strerror(err) : "an earlier write to it failed");
    return rc != 0 ? rc : 2;
  }
  return rc;
}

// `bitgrad serve`: SIGTERM or SIGINT drains the server: new requests are answered 503, the ones in
// flight (streams too) run to their end, then the command exits 0; past --drain-timeout the rest
// end with an error event and it exits 1. The signals are taken by a thread of their own
// (sigwait), so every thread of the server runs with them blocked.
int cmd_serve(const std::string& run_dir, const bitgrad::serve::ServeOptions& o) {
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not the end
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  bitgrad::serve::Server server(run_dir, o);
  bool drained = true;
  std::atomic<bool> finished{false}, cut{false};
  std::thread cutter;  // during a drain: a second signal ends it at once
  // every thread started before the address is printed: a process limit (ulimit -u) is an error
  // naming the thread, not an address that answers nothing
  std::thread waiter;
  try {
    waiter = std::thread([&] {
      int sig = 0;
      ::sigwait(&stop, &sig);
      if (finished) return;
      std::fprintf(stderr, "bitgrad serve: signal %d: new requests answered 503; draining the requests in flight (up to %g s; "
                   "another signal ends them now)\n", sig, o.drain_seconds);
      try {
        cutter = std::thread([&] {
          int again = 0;
          ::sigwait(&stop, &again);
          if (finished) return;
          std::fprintf(stderr, "bitgrad serve: signal %d again: ending the requests in flight now\n", again);
          cut = true;
          server.cut_drain();
        });
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "bitgrad serve: cannot start the thread that waits for a second signal (%s): the drain runs its course\n", e.what());
      }
      drained = server.drain(o.drain_seconds);
      if (!drained)
        std::fprintf(stderr, "bitgrad serve: %s: the requests still running ended with an error\n",
                     cut ? "the drain was ended by the second signal" : "the drain ran out of time");
    });
  } catch (const std::system_error& e) {
    throw bitgrad::Error(std::string("serve: cannot start the thread that waits for SIGTERM (") + e.what() + ")");
  }
  std::cout << "bitgrad serve: " << server.describe() << " on http://" << o.host << ":" << server.port() << std::endl;
  server.run();
  finished = true;
  ::kill(::getpid(), SIGTERM);  // blocked: ends the sigwait still waiting (the waiter's if no signal came, else the cutter's)
  waiter.join();
  if (cutter.joinable()) cutter.join();
  std::cout << "bitgrad serve: stopped" << std::endl;
  return drained ? 0 : 1;
}

}  // namespace

int run_command(int argc, char** argv);

int main(int argc, char** argv) {
  // past `ulimit -f` a write fails with EFBIG, which the writers report, instead of the default
  // SIGXFSZ killing the process without a word
  std::signal(SIGXFSZ, SIG_IGN);
  return checked_stdout(run_command(argc, argv));
}

int run_command(int argc, char** argv) {
  CLI::App app{"bitgrad: bitwise reproducible automatic differentiation and training", "bitgrad"};
  app.set_version_flag("--version", version_line());
  app.require_subcommand(1);

  int threads = 0;
  std::string isa;
  CLI::App* env = app.add_subcommand("env", "Print the manifest of this machine and build (JSON)");
  CLI::App* selftest = app.add_subcommand("selftest", "Forward and backward of a fixed MLP; prints the gradient fingerprint");
  selftest->add_option("--threads", threads, "kernel threads (default: BITGRAD_THREADS or all CPUs)")->check(CLI::Range(1, 4096));
  selftest->add_option("--isa", isa, "code path: scalar, avx2 or avx512 (default: BITGRAD_ISA or the best available)");

  std::string config;
  bitgrad::instruments::TrainOptions run;
  std::string trace = "steps", shadow;
  std::string seed;
  CLI::App* train = app.add_subcommand("train", "Train the model a TOML configuration describes");
  train->add_option("config", config, "configuration file (see docs/cli.md)")->required()->check(CLI::ExistingFile);
  train->add_option("--threads", run.threads, "kernel threads")->check(CLI::Range(1, 4096));
  train->add_option("--workers", run.workers, "data loader worker threads (0: load on the training thread)")->check(CLI::Range(0, 256));
  auto* steps = train->add_option("--steps", run.steps, "stop after this many optimizer steps in total")->check(CLI::Range(0L, 1L << 50));
  auto* epochs = train->add_option("--epochs", run.epochs, "stop after this many epochs in total")->check(CLI::Range(0L, 1L << 30));
  steps->excludes(epochs);
  auto* seed_opt = train->add_option("--seed", seed, "root seed (replaces the configuration's)");
  train->add_option("--accumulate", run.accumulate, "micro-batches per optimizer step")->check(CLI::Range(1L, 1L << 20));
  auto* out_opt = train->add_option("--out", run.out, "run directory (default: runs/<config name>)");
  auto* resume_opt = train->add_option("--resume", run.resume, "continue the run in this directory from its latest checkpoint")
                         ->check(CLI::ExistingDirectory);
  out_opt->excludes(resume_opt);
  train->add_option("--checkpoint-every", run.checkpoint_every, "also checkpoint every N steps")->check(CLI::Range(1L, 1L << 50));
  bool no_epoch_checkpoints = false;
  train->add_flag("--no-epoch-checkpoints", no_epoch_checkpoints, "do not checkpoint at each epoch's end (the default does)");
  auto* trace_opt = train->add_option("--trace", trace, "fingerprint trace: none, steps (trace.jsonl, default) or ops (also ops.jsonl); a resumed run keeps its own")
      ->check(CLI::IsMember({"none", "steps", "ops"}));
  train->add_flag("--detect-anomaly", run.detect_anomaly, "stop at the first non-finite op output or gradient, naming the op");
  train->add_option("--shadow", shadow, "f64: train a float64 twin in lockstep and record its distance to this run per step (metrics \"shadow\")")
      ->check(CLI::IsMember({"f64"}));
  std::string perturb;
  auto* perturb_opt = train->add_option("--perturb-order", perturb, "evaluate every reduction in an order drawn from this seed (analysis)");
  train->add_option("--dist-timeout", run.dist_timeout, "data parallel: seconds a rank waits for the others before it fails (default 300)")
      ->check(CLI::Range(0.1, 1e7));
  train->add_option("--replica-check", run.replica_check_every, "data parallel: compare the ranks' parameters every N steps (default 100; 0: at start and end only)")
      ->check(CLI::Range(0L, 1L << 50));
  train->add_option("--grad-stats", run.grad_stats_every, "every N steps, per-parameter gradient norm, mean and max |g| into the metrics")
      ->check(CLI::Range(1L, 1L << 50));
  bool progress = false;
  auto* bar = train->add_flag("--progress,!--no-progress", progress, "progress bar (default: when stdout is a terminal)");

  std::string run_a, run_b;
  bool no_replay = false;
  CLI::App* diffc = app.add_subcommand("diff", "Where two runs part: manifests, first step, tensor and op, size of the difference");
  diffc->add_option("run_a", run_a, "run directory")->required()->check(CLI::ExistingDirectory);
  diffc->add_option("run_b", run_b, "run directory")->required()->check(CLI::ExistingDirectory);
  diffc->add_flag("--no-replay", no_replay, "do not replay the first differing step to measure the difference");
  diffc->footer("Runs recorded from PyTorch scripts (python3 -m bitgrad.torch.record, docs/torch.md) are read as bitgrad's own;\n"
                "their step is replayed by running each script again up to it with every op traced (python3 -m bitgrad.torch.replay).");

  std::string audit_cfg, audit_torch;
  bitgrad::instruments::AuditOptions aud;
  CLI::App* auditc = app.add_subcommand("audit", "Repeat a training across settings; pairwise error matrices (all zero is the promise)");
  CLI::Option* audit_cfg_opt = auditc->add_option("config", audit_cfg, "configuration file")->check(CLI::ExistingFile);
  auditc->add_option("--torch", audit_torch, "a PyTorch script instead: \"python3 train.py ARGS\", run unmodified under each setting")
      ->excludes(audit_cfg_opt);
  auditc->add_option("--runs", aud.runs, "number of runs (default: one per combination); with --torch: runs of each setting "
                                         "(default 1, 2 with one setting)")->check(CLI::Range(1, 1000));
  auditc->add_option("--threads", aud.threads, "thread counts, e.g. 1,2,3")->delimiter(',')->check(CLI::Range(1, 4096));
  auditc->add_option("--workers", aud.workers, "loader worker counts, e.g. 0,2")->delimiter(',')->check(CLI::Range(0, 256));
  auditc->add_option("--accumulate", aud.accumulate, "micro-batch counts, e.g. 1,2,4")->delimiter(',')->check(CLI::Range(1L, 1L << 20));
  auditc->add_option("--ranks", aud.ranks, "MPI rank counts, e.g. 1,2,4 (runs with more than one rank are launched with mpirun)")
      ->delimiter(',')->check(CLI::Range(1, 1024));
  auditc->add_option("--steps", aud.steps, "steps per run (default: the configuration's plan)")->check(CLI::Range(1L, 1L << 50));
  auditc->add_option("--out", aud.out, "directory for audit.json (default: runs/audit-<config or script name>)");
  auditc->footer("With --torch, each run is python3 -m bitgrad.torch.record with the thread count and DataLoader's num_workers set\n"
                 "from outside (a value the script sets itself is reported, not silently overridden); the matrices are of the\n"
                 "last step's loss, parameters and gradients in ULPs, and each run that differs is traced to its first\n"
                 "divergent step and op, with the cause and the fix (docs/torch.md).");

  std::string sens_cfg;
  bitgrad::instruments::SensitivityOptions sens;
  CLI::App* sensc = app.add_subcommand("sensitivity", "Train perturbed-order members beside the canonical run; divergence and spread");
  sensc->add_option("config", sens_cfg, "configuration file")->required()->check(CLI::ExistingFile);
  sensc->add_option("--members", sens.members, "perturbed runs beside the canonical one")->check(CLI::Range(1, 64));
  sensc->add_option("--steps", sens.steps, "steps (default: the configuration's plan)")->check(CLI::Range(1L, 1L << 50));
  sensc->add_option("--threads", sens.threads, "kernel threads")->check(CLI::Range(1, 4096));
  sensc->add_option("--out", sens.out, "directory for sensitivity.json (default: runs/sensitivity-<config name>)");

  std::vector<std::string> report_runs;
  std::string report_out;
  CLI::App* reportc = app.add_subcommand("report", "One self-contained HTML page of runs, audits and sensitivity studies");
  reportc->add_option("runs", report_runs, "run directories")->required();
  reportc->add_option("-o,--out", report_out, "the HTML file to write")->required();
  bool report_force = false;
  reportc->add_flag("--force", report_force, "replace -o even when it is not a bitgrad report");

  std::string sample_dir, sample_seed = "0";
  bitgrad::infer::SampleOptions smp;
  CLI::App* samplec = app.add_subcommand("sample", "Text from a trained text model (a run directory's latest checkpoint)");
  samplec->add_option("run_dir", sample_dir, "run directory of a text model")->required()->check(CLI::ExistingDirectory);
  samplec->add_option("--prompt", smp.prompt, "text to continue (default: a newline)");
  samplec->add_option("--tokens", smp.tokens, "tokens to generate (default 200)")->check(CLI::Range(0L, 1L << 24));
  samplec->add_option("--temperature", smp.temperature, "divides the logits; 0: always the most likely token (default 1)")
      ->check(CLI::Range(0.0, 1e6));
  samplec->add_option("--top-k", smp.top_k, "draw from the k most likely tokens only (default 0: all)")->check(CLI::Range(0L, 1L << 24));
  samplec->add_option("--seed", sample_seed, "seed of the draws (default 0)");
  samplec->add_option("--threads", smp.threads, "kernel threads")->check(CLI::Range(1, 4096));
  samplec->add_option("--logprobs", smp.logprobs,
                      "after the text, one JSON line: each generated token's log-probability and the K most likely (as `bitgrad serve`)")
      ->check(CLI::Range(0L, 1L << 24));

  std::string serve_dir;
  bitgrad::serve::ServeOptions srv;
  CLI::App* servec = app.add_subcommand("serve", "Answer HTTP requests with a trained run: completions (text) or predictions (docs/serving.md)");
  servec->add_option("run_dir", serve_dir, "run directory (its latest checkpoint)")->required()->check(CLI::ExistingDirectory);
  servec->add_option("--host", srv.host, "address to listen on (default 127.0.0.1)");
  servec->add_option("--port", srv.port, "port (default 8000; 0: a free port, printed)")->check(CLI::Range(0, 65535));
  servec->add_option("--threads", srv.threads, "kernel threads of the batches (default 1)")->check(CLI::Range(1, 4096));
  servec->add_option("--max-batch", srv.max_batch, "requests computed together (default 16)")->check(CLI::Range(1, 4096));
  servec->add_option("--max-queue", srv.max_queue, "requests waiting beyond those; more are answered 503 (default 64)")->check(CLI::Range(0, 1 << 20));
  servec->add_option("--drain-timeout", srv.drain_seconds, "seconds the requests in flight may take after SIGTERM (default 60)")
      ->check(CLI::Range(0.0, 86400.0));
  servec->add_option("--max-tokens", srv.max_tokens, "largest max_tokens of a completion (default 1024)")->check(CLI::Range(0L, 1L << 24));
  servec->add_option("--max-prompt", srv.max_prompt, "largest prompt in bytes (default 65536)")->check(CLI::Range(1L, 1L << 30));
  servec->add_option("--max-connections", srv.http.max_connections, "connections open at once; more are answered 503 (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  std::int64_t max_body_mib = 64;
  servec->add_option("--max-body", max_body_mib, "largest request body in MiB, refused with 413 before it is read (default 64)")
      ->check(CLI::Range(1L, 1L << 14));
  std::int64_t prefix_cache_mib = 64;
  servec->add_option("--prefix-cache-mib", prefix_cache_mib,
                     "MiB of prompt prefixes' key/value rows kept for later requests, the least recently used evicted (default 64; 0: none)")
      ->check(CLI::Range(0L, 1L << 20));
  // a run's weights for other tools
  std::string export_dir;
  bitgrad::infer::ExportOptions exo;
  CLI::App* exportc = app.add_subcommand("export", "A run's latest weights as safetensors (PyTorch's names for an ONNX model) or as ONNX");
  exportc->add_option("run_dir", export_dir, "run directory")->required()->check(CLI::ExistingDirectory);
  exportc->add_option("--safetensors", exo.safetensors, "write the parameters and buffers here (load_state_dict(..., strict=True) takes them)");
  exportc->add_option("--onnx", exo.onnx, "write the run's ONNX model with the trained initializers here ([model] onnx runs)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // under mpirun every rank parses the same command line: rank 0 says what is wrong
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (!rank || std::string(rank) == "0") std::fprintf(stderr, "bitgrad: error: %s (see bitgrad --help)\n", e.what());
    return 2;
  }
  try {
    if (selftest->parsed()) return cmd_selftest(threads, isa);
    std::string command;
    for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
    if (diffc->parsed()) {
      bitgrad::instruments::DiffOptions o;
      o.replay = !no_replay;
      return bitgrad::instruments::diff(run_a, run_b, o, std::cout);
    }
    if (auditc->parsed()) {
      aud.command = command;
      if (!audit_torch.empty()) return bitgrad::instruments::audit_torch(audit_torch, aud, std::cout);
      if (audit_cfg.empty()) throw bitgrad::Error("audit: name a configuration file, or a PyTorch script with --torch \"python3 train.py ARGS\"");
      if (aud.runs == 1) throw bitgrad::Error("audit: --runs 1 leaves nothing to compare; ask for 2 or more");
      return bitgrad::instruments::audit(bitgrad::train::load_config(audit_cfg), aud, std::cout);
    }
    if (sensc->parsed()) {
      sens.command = command;
      bitgrad::instruments::sensitivity(bitgrad::train::load_config(sens_cfg), sens, std::cout);
      return 0;
    }
    if (reportc->parsed()) {
      const bitgrad::instruments::ReportSummary r = bitgrad::instruments::write_report(report_runs, report_out, report_force);
      std::cout << "report of " << r.runs << " run" << (r.runs == 1 ? "" : "s") << " with " << r.plots << " plots written to " << report_out << "\n";
      return 0;
    }
    if (exportc->parsed()) {
      const bitgrad::infer::ExportResult r = bitgrad::infer::export_run(export_dir, exo);
      if (!exo.safetensors.empty()) std::cout << "wrote " << r.tensors << " tensors of step " << r.step << " to " << exo.safetensors << "\n";
      if (!exo.onnx.empty()) std::cout << "wrote the ONNX model of step " << r.step << " to " << exo.onnx << "\n";
      return 0;
    }
    if (samplec->parsed()) {
      smp.seed = parse_seed("--seed", sample_seed, UINT64_MAX);
      const bitgrad::infer::SampleResult res = bitgrad::infer::sample(sample_dir, smp);
      std::cout << res.text << "\n";
      if (smp.logprobs >= 0) std::cout << "{\"logprobs\":" << res.logprobs_json << "}\n";
      return 0;
    }
    if (servec->parsed()) {
      srv.http.max_body = max_body_mib << 20;
      srv.prefix_cache_bytes = prefix_cache_mib << 20;
      srv.http.body_budget = 4 * srv.http.max_body;  // four bodies of the largest size at once
      return cmd_serve(serve_dir, srv);
    }
    if (env->parsed()) {
      std::cout << bitgrad::instruments::machine_manifest_json();
      return 0;
    }
    if (train->parsed()) {
      // the configuration file's seed range: a TOML integer
      if (seed_opt->count()) run.seed = parse_seed("--seed", seed, static_cast<std::uint64_t>(INT64_MAX));
      if (perturb_opt->count()) run.perturb_order = parse_seed("--perturb-order", perturb, UINT64_MAX);
      run.command = command;
      if (trace_opt->count()) run.trace = bitgrad::instruments::parse_trace_level(trace);
      run.shadow = bitgrad::instruments::parse_shadow(shadow);
      if (bar->count()) run.progress = progress ? 1 : 0;
      run.checkpoint_epochs = !no_epoch_checkpoints;
      return cmd_train(config, run);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bitgrad: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
