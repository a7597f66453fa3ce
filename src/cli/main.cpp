// The bitgrad command: argument parsing and output only. Errors are one line on stderr and
// exit code 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "bitgrad/bitgrad.hpp"

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
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bitgrad: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
