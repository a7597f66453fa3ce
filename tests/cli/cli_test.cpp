// The bitgrad command, run as a user would.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "bitgrad/io.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/version.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

struct CmdResult {
  int code;
  std::string out;
};

CmdResult run_cmd(const std::string& args) {
  const std::string cmd = std::string(BITGRAD_BINARY_DIR) + "/bin/bitgrad " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  CmdResult r{-1, ""};
  if (!p) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) r.out += buf;
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(Cli, Version) {
  CmdResult r = run_cmd("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(std::string("bitgrad ") + kVersion + " (numerics " + std::to_string(kNumericsVersion)), std::string::npos) << r.out;
}

TEST(Cli, SelftestEndsWithTheFingerprint) {
  CmdResult r = run_cmd("selftest --threads 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("numerics " + std::to_string(kNumericsVersion) + "\n"), std::string::npos) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("fingerprint ([0-9a-f]{32})\n$"))) << "last line: " << r.out;
  CmdResult r1 = run_cmd("selftest --threads 1 --isa scalar");
  ASSERT_EQ(r1.code, 0) << r1.out;
  EXPECT_NE(r1.out.find("fingerprint " + m[1].str()), std::string::npos) << "same fingerprint on 1 thread, scalar";
}

TEST(Cli, ErrorsAreOneLineAndExitTwo) {
  for (const char* bad : {"selftest --threads 0", "selftest --isa sse9", "frobnicate", "selftest --threads"}) {
    CmdResult r = run_cmd(bad);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << bad << ": " << r.out;
    EXPECT_EQ(r.out.rfind("bitgrad: error: ", 0), 0u) << bad << ": " << r.out;
  }
}

TEST(Cli, TrainEndsWithTheFingerprintAndRefusesBadInput) {
  const std::string dir = ::testing::TempDir() + "/bitgrad_cli_train_" + std::to_string(::getpid());
  std::system(("rm -rf " + dir).c_str());
  const std::string cfg = std::string(BITGRAD_SOURCE_DIR) + "/examples/adder.toml";
  CmdResult r = run_cmd("train " + cfg + " --steps 3 --threads 2 --out " + dir + " --no-progress");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nfingerprint [0-9a-f]{32}\n$"))) << r.out;
  EXPECT_NE(r.out.find("trained 3 steps"), std::string::npos) << r.out;
  // an existing run is not written over; a bad option or a bad file is one line and exit 2
  const std::string bad_cfg = ::testing::TempDir() + "/bitgrad_cli_bad.toml";
  std::FILE* f = std::fopen(bad_cfg.c_str(), "w");
  std::fputs("seed = 1\n[train]\nbatch_sise = 3\n[model]\nlayers = [ { type = \"relu\" } ]\n", f);
  std::fclose(f);
  for (const std::string& args : std::vector<std::string>{"train " + cfg + " --steps 3 --out " + dir, "train " + cfg + " --threads 0", std::string("train /nonexistent.toml"),
                                  "train " + bad_cfg, "train " + cfg + " --resume /nonexistent", "train " + cfg + " --seed -1",
                                  "train " + cfg + " --seed 18446744073709551616", "train " + cfg + " --seed 9223372036854775808",
                                  "train " + cfg + " --perturb-order 18446744073709551616", "train " + cfg + " --seed 7x"}) {
    CmdResult b = run_cmd(args);
    EXPECT_EQ(b.code, 2) << args << ": " << b.out;
    EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << args << ": " << b.out;
    EXPECT_EQ(b.out.rfind("bitgrad: error: ", 0), 0u) << args << ": " << b.out;
  }
  EXPECT_NE(run_cmd("train " + cfg + " --seed -1").out.find("--seed must be a whole number in [0, 9223372036854775807], got '-1'"),
            std::string::npos);
  CmdResult typo = run_cmd("train " + bad_cfg);
  EXPECT_NE(typo.out.find(bad_cfg + ":3: unknown key 'batch_sise' in [train]"), std::string::npos) << typo.out;
}

// What `bash -c SCRIPT` prints on stdout (the script redirects as it likes).
std::string bash_output(const std::string& script) {
  std::string got;
  if (FILE* p = popen(("bash -c '" + script + "'").c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) got += buf;
    pclose(p);
  }
  return got;
}

TEST(Cli, OutputThatCannotBeWrittenIsAnError) {
  const std::string bin = std::string(BITGRAD_BINARY_DIR) + "/bin/bitgrad";
  // stdout on a full device: not exit 0 with the results lost
  std::string got = bash_output(bin + " selftest --threads 1 > /dev/full 2>&1; echo \"exit $?\"");
  EXPECT_NE(got.find("exit 2"), std::string::npos) << got;
  // a training's output on a full device: the cause named (it said "No such file or directory")
  const std::string train_dir = ::testing::TempDir() + "/bitgrad_cli_full_" + std::to_string(::getpid());
  got = bash_output(bin + " train " + std::string(BITGRAD_SOURCE_DIR) + "/examples/adder.toml --steps 2 --out " + train_dir +
                    " 2>&1 >/dev/full; echo \"exit $?\"");
  EXPECT_NE(got.find("cannot write to standard output (No space left on device)"), std::string::npos) << got;
  EXPECT_NE(got.find("exit 2"), std::string::npos) << got;
  // past `ulimit -f` (SIGXFSZ would kill without a word): a write error naming the file
  const std::string dir = ::testing::TempDir() + "/bitgrad_cli_fsize_" + std::to_string(::getpid());
  const std::string cfg = std::string(BITGRAD_SOURCE_DIR) + "/examples/adder.toml";
  got = bash_output("ulimit -f 64; " + bin + " train " + cfg + " --steps 400 --trace ops --out " + dir +
                    " --no-progress 2>&1 >/dev/null; echo \"exit $?\"");
  EXPECT_NE(got.find("File too large"), std::string::npos) << got;
  EXPECT_NE(got.find("exit 2"), std::string::npos) << got;
}

TEST(Cli, EnvPrintsTheMachineManifest) {
  CmdResult r = run_cmd("env");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bitgrad"]["numerics"], kNumericsVersion);
  for (const char* k : {"compiler", "flags", "build_type"}) EXPECT_TRUE(j["build"].contains(k)) << k;
  EXPECT_NE(j["build"]["flags"].get<std::string>().find("-ffp-contract=off"), std::string::npos);
  for (const char* k : {"cpu", "code_path", "os", "kernel", "threads"}) EXPECT_TRUE(j["machine"].contains(k)) << k;
  const std::string cmd = std::string("BITGRAD_THREADS=3 OMP_NUM_THREADS=5 ") + BITGRAD_BINARY_DIR + "/bin/bitgrad env";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  ASSERT_EQ(WEXITSTATUS(pclose(p)), 0);
  const nlohmann::json e = nlohmann::json::parse(out);
  EXPECT_EQ(e["environment"]["BITGRAD_THREADS"], "3");
  EXPECT_EQ(e["environment"]["OMP_NUM_THREADS"], "5");
  EXPECT_EQ(e["machine"]["threads"], 3);
}

// diff, audit, report: exit 0 for the same bits, 1 for a difference, 2 for what cannot be read
TEST(Cli, InstrumentsExitCodes) {
  const std::string base = ::testing::TempDir() + "/bitgrad_cli_instr_" + std::to_string(::getpid());
  std::system(("rm -rf " + base).c_str());
  const std::string cfg = std::string(BITGRAD_SOURCE_DIR) + "/examples/adder.toml";
  for (const char* t : {"1", "2"}) {
    CmdResult r = run_cmd("train " + cfg + " --steps 4 --no-progress --threads " + t + " --out " + base + "/t" + t);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  CmdResult p = run_cmd("train " + cfg + " --steps 4 --no-progress --perturb-order 5 --out " + base + "/p");
  ASSERT_EQ(p.code, 0) << p.out;
  CmdResult same = run_cmd("diff " + base + "/t1 " + base + "/t2");
  EXPECT_EQ(same.code, 0) << same.out;
  EXPECT_NE(same.out.find("identical: 4 steps"), std::string::npos) << same.out;
  CmdResult differ = run_cmd("diff " + base + "/t1 " + base + "/p");
  EXPECT_EQ(differ.code, 1) << differ.out;
  EXPECT_NE(differ.out.find("first difference: step 1, "), std::string::npos) << differ.out;
  CmdResult rep = run_cmd("report " + base + "/t1 " + base + "/p -o " + base + "/report.html");
  EXPECT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("report of 2 runs with 1 plots written to"), std::string::npos) << rep.out;
  for (const std::string& args : {"diff " + base + "/t1 " + base, "report " + base + " -o " + base + "/r2.html", "report " + base + "/t1",
                                  "audit " + cfg + " --threads 1 --steps 2 --out " + base + "/aud"}) {
    CmdResult b = run_cmd(args);
    EXPECT_EQ(b.code, 2) << args << ": " << b.out;
    EXPECT_EQ(std::count(b.out.begin(), b.out.end(), '\n'), 1) << args << ": " << b.out;
    EXPECT_EQ(b.out.rfind("bitgrad: error: ", 0), 0u) << args << ": " << b.out;
  }
  EXPECT_FALSE(bitgrad::io::exists(base + "/r2.html"));
}

TEST(Cli, EnvironmentSettingsChangeNoResult) {
  std::string first;
  for (const char* env : {"BITGRAD_THREADS=1 BITGRAD_ISA=scalar", "BITGRAD_THREADS=3", "BITGRAD_THREADS=2 BITGRAD_ISA=avx2"}) {
    if (std::string(env).find("avx2") != std::string::npos && !cpu_supports(Isa::avx2)) continue;
    const std::string cmd = std::string("env ") + env + " " + BITGRAD_BINARY_DIR + "/bin/quickstart";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[256] = {};
    ASSERT_NE(std::fgets(buf, sizeof buf, p), nullptr) << env;
    pclose(p);
    if (first.empty()) first = buf;
    EXPECT_EQ(first, std::string(buf)) << env;
  }
  const std::string cmd = std::string("BITGRAD_ISA=sse9 ") + BITGRAD_BINARY_DIR + "/bin/bitgrad selftest 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512] = {};
  ASSERT_NE(std::fgets(buf, sizeof buf, p), nullptr);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(std::string(buf).find("unknown code path 'sse9'"), std::string::npos) << buf;
}

}  // namespace
}  // namespace bitgrad::test
