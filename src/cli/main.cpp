// The bitgrad command: argument parsing and output only. Errors are one line on stderr and
// exit code 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "bitgrad/bitgrad.hpp"
#include "bitgrad/train.hpp"

namespace {

std::string version_line() {
  return std::string("bitgrad ") + bitgrad::kVersion + " (numerics " + std::to_string(bitgrad::kNumericsVersion) + ", commit " +
         bitgrad::git_commit() + ")";
}

int cmd_selftest(int threads, const std::string& isa) {
  using namespace bitgrad;
  check_fp_environment();
  if (threads > 0) set_num_threads(threads);
  if (!isa.empty()) set_isa(parse_isa(isa));
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

int cmd_train(const std::string& config, const bitgrad::train::RunOptions& o) {
  bitgrad::train::Config cfg = bitgrad::train::load_config(config);
  bitgrad::train::run(cfg, o, std::cout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bitgrad: bitwise reproducible automatic differentiation and training", "bitgrad"};
  app.set_version_flag("--version", version_line());
  app.require_subcommand(1);

  int threads = 0;
  std::string isa;
  CLI::App* selftest = app.add_subcommand("selftest", "Forward and backward of a fixed MLP; prints the gradient fingerprint");
  selftest->add_option("--threads", threads, "kernel threads (default: BITGRAD_THREADS or all CPUs)")->check(CLI::Range(1, 4096));
  selftest->add_option("--isa", isa, "code path: scalar, avx2 or avx512 (default: BITGRAD_ISA or the best available)");

  std::string config;
  bitgrad::train::RunOptions run;
  std::uint64_t seed = 0;
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
  bool progress = false;
  auto* bar = train->add_flag("--progress,!--no-progress", progress, "progress bar (default: when stdout is a terminal)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "bitgrad: error: %s (see bitgrad --help)\n", e.what());
    return 2;
  }
  try {
    if (selftest->parsed()) return cmd_selftest(threads, isa);
    if (train->parsed()) {
      if (seed_opt->count()) run.seed = seed;
      if (bar->count()) run.progress = progress ? 1 : 0;
      return cmd_train(config, run);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bitgrad: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
