// Fault injection: `bitgrad train` killed at random moments (SIGKILL, and SIGTERM, which asks
// for a checkpoint first) and continued with --resume ends with the bytes of a run that was
// never interrupted: the same metrics, the same step trace, the same final checkpoint.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bitgrad/io.hpp"
#include "bitgrad/rng.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

const std::string kFaultsBin = std::string(BITGRAD_BINARY_DIR) + "/bin/bitgrad";

// 600 steps in 2 epochs (0.3 s on this 2-core machine), a checkpoint every 9 steps besides the epoch ends
const char* kConfig = R"(seed = 3
[data]
dataset = "adder"
samples = 19200
test_samples = 200
[model]
layers = [ { type = "linear", out = 128 }, { type = "relu" }, { type = "linear", out = 128 }, { type = "relu" }, { type = "linear", out = 1 } ]
[train]
batch_size = 64
epochs = 2
loss = "mse"
[optimizer]
type = "adam"
lr = 0.003
)";

pid_t spawn(const std::vector<std::string>& args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::FILE* null = std::fopen("/dev/null", "w");
    if (null) {
      ::dup2(fileno(null), 1);
      ::dup2(fileno(null), 2);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kFaultsBin.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kFaultsBin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// exit code, or 128 + the signal that killed it
int wait_for(pid_t pid) {
  int st = 0;
  if (::waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int run_to_end(const std::vector<std::string>& args) { return wait_for(spawn(args)); }

std::string final_checkpoint(const std::string& run) {
  std::string name = io::read_file(run + "/checkpoints/latest");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return run + "/checkpoints/" + name;
}

TEST(Faults, KilledRunsResumeToTheBytesOfAStraightRun) {
  const std::string root = ::testing::TempDir() + "/bitgrad_faults_" + std::to_string(::getpid());
  io::make_dirs(root);
  const std::string cfg = root + "/faults.toml";
  io::write_file_atomic(cfg, kConfig);
  const std::string straight = root + "/straight";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_to_end({"train", cfg, "--out", straight, "--checkpoint-every", "9", "--threads", "2", "--workers", "1"}), 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string want_metrics = io::read_file(straight + "/metrics.jsonl"), want_trace = io::read_file(straight + "/trace.jsonl");
  const std::string ck = final_checkpoint(straight);
  const std::string want_model = io::read_file(ck + "/model.safetensors"), want_opt = io::read_file(ck + "/optimizer.safetensors");

  rng::Stream draw(20261122, "faults");
  const int kTrials = 16;  // bounded: each costs about two runs' time
  int graceful = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    const int sig = trial % 3 == 2 ? SIGTERM : SIGKILL;
    const double at = seconds * (0.02 + 1.0 * draw.uniform_f64(static_cast<std::uint64_t>(trial)));
    const std::string run = root + "/trial" + std::to_string(trial);
    const pid_t pid = spawn({"train", cfg, "--out", run, "--checkpoint-every", "9", "--threads", "2", "--workers", "1"});
    std::this_thread::sleep_for(std::chrono::duration<double>(at));
    ::kill(pid, sig);
    const int code = wait_for(pid);
    if (sig == SIGTERM && code == 128 + SIGTERM && io::exists(run + "/checkpoints/latest")) ++graceful;
    // continue it until it is complete (a kill before the run directory existed: start it)
    const bool started = io::exists(run + "/config.toml") || io::exists(run + "/metrics.jsonl") || io::exists(run + "/checkpoints");
    int rc = started ? run_to_end({"train", cfg, "--resume", run, "--threads", "1"}) : run_to_end({"train", cfg, "--out", run});
    if (rc == 2 && io::exists(run + "/checkpoints/latest") && final_checkpoint(run) == run + "/checkpoints/" + ck.substr(ck.rfind('/') + 1))
      rc = 0;  // it had finished before the signal: resume says the run is complete
    ASSERT_EQ(rc, 0) << "trial " << trial << " (signal " << sig << " after " << at << " s, exit " << code << ")";
    EXPECT_EQ(io::read_file(run + "/metrics.jsonl"), want_metrics) << "trial " << trial;
    EXPECT_EQ(io::read_file(run + "/trace.jsonl"), want_trace) << "trial " << trial;
    const std::string got = final_checkpoint(run);
    EXPECT_EQ(io::read_file(got + "/model.safetensors"), want_model) << "trial " << trial;
    EXPECT_EQ(io::read_file(got + "/optimizer.safetensors"), want_opt) << "trial " << trial;
  }
  RecordProperty("graceful_sigterm_stops", graceful);
  std::printf("faults: %d trials in a run of %.2f s, %d SIGTERM stops wrote their checkpoint\n", kTrials, seconds, graceful);
}

}  // namespace
}  // namespace bitgrad::test
