// `bitgrad report`: a self-contained page of training runs, a sensitivity study and an audit,
// rendered in headless Chromium (Debian's chromium package): it must load without console
// errors with every plot drawn; a screenshot goes to the build directory. And the directories
// it must refuse.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <regex>

#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "support/fashion.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

std::string chromium_binary() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

int shell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

TEST(Report, RendersInHeadlessChromiumWithEveryPlotDrawn) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  // two training runs with test accuracy per epoch (one with gradient statistics) and an
  // order-perturbed one; a sensitivity study; an audit
  std::string text = kMlp;
  text.replace(text.find("each_epoch = false"), 18, "each_epoch = true");
  std::vector<std::string> runs;
  instruments::TrainOptions o;
  o.epochs = 1;
  o.threads = 1;
  o.grad_stats_every = 50;
  o.out = fresh_dir("report_t1");
  run_text(text, o);
  runs.push_back(o.out);
  o.threads = 2;
  o.grad_stats_every = 0;
  o.shadow = instruments::Shadow::f64;  // a float64 twin beside it: the trace must still be the first run's
  o.out = fresh_dir("report_t2");
  run_text(text, o);
  runs.push_back(o.out);
  o.shadow = instruments::Shadow::none;
  o.perturb_order = 1;
  o.out = fresh_dir("report_p1");
  run_text(text, o);
  runs.push_back(o.out);
  instruments::SensitivityOptions step_out;
  step_out.members = 2;
  step_out.steps = 40;
  step_out.out = fresh_dir("report_sens");
  std::ostringstream log;
  instruments::sensitivity(train::parse_config(text, "mlp.toml"), step_out, log);
  runs.push_back(step_out.out);
  instruments::AuditOptions ao;
  ao.threads = {1, 2, 3};
  ao.steps = 10;
  ao.out = fresh_dir("report_audit");
  instruments::audit(train::parse_config(kAdder, "adder.toml"), ao, log);
  runs.push_back(ao.out);

  const std::string html_path = fresh_dir("report") + ".html";
  const instruments::ReportSummary sum = instruments::write_report(runs, html_path);
  // training: loss, accuracy, test loss, one gradient-norm plot; sensitivity: 3; the shadow: 2
  // (beside the sensitivity's divergence, and per parameter); audit: 5 (with the optimizer state)
  EXPECT_EQ(sum.runs, 5);
  EXPECT_EQ(sum.plots, 14);
  const std::string html = io::read_file(html_path);
  EXPECT_EQ(count(html, "<svg class=\"plot"), 14);
  EXPECT_NE(html.find("Rounding noise: the float64 shadow"), std::string::npos);
  EXPECT_NE(html.find("order perturbation: "), std::string::npos) << "the sensitivity's divergence is in the shadow's plot";
  // self-contained: no external resource of any kind
  EXPECT_EQ(count(html, "http"), count(html, "xmlns=\"http://www.w3.org/2000/svg\"")) << "the only URL is the SVG namespace";
  EXPECT_EQ(count(html, " src="), 0);
  EXPECT_EQ(count(html, "<link"), 0);
  EXPECT_NE(html.find("identical (468 steps)"), std::string::npos) << "the two canonical runs' traces agree";
  EXPECT_NE(html.find("differ from step 1"), std::string::npos) << "the perturbed run's does not";
  EXPECT_NE(html.find("all bitwise equal"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"differ\"><td>run.threads</td>"), std::string::npos) << "manifest differences are highlighted";

  const std::string chromium = chromium_binary();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  const std::string profile = fresh_dir("chromium_profile");
  const std::string flags = " --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update "
                            "--disable-sync --no-first-run --disable-crash-reporter --user-data-dir=" +
                            profile + " --enable-logging=stderr --v=0 ";
  const std::string dom = profile + ".dom", err = profile + ".err";
  ASSERT_EQ(shell("timeout 120 " + chromium + flags + "--dump-dom file://" + html_path + " > " + dom + " 2> " + err), 0) << io::read_file(err);
  const std::string d = io::read_file(dom), e = io::read_file(err);
  EXPECT_NE(d.find("data-plots=\"14\""), std::string::npos) << "the page's script ran to its end";
  EXPECT_NE(d.find("data-drawn=\"14\""), std::string::npos) << "every plot has its lines, points or cells";
  // the console holds the page's one line and nothing else (no error, no warning)
  std::vector<std::string> console;
  std::istringstream es(e);
  for (std::string l; std::getline(es, l);)
    if (l.find(":CONSOLE") != std::string::npos) console.push_back(l);
  ASSERT_EQ(console.size(), 1u) << e;
  EXPECT_NE(console[0].find("\"bitgrad report: 14 of 14 plots drawn\""), std::string::npos) << console[0];
  EXPECT_EQ(e.find("Uncaught"), std::string::npos) << e;

  const std::string shot = std::string(BITGRAD_BINARY_DIR) + "/report_screenshot.png";
  std::remove(shot.c_str());
  ASSERT_EQ(shell("timeout 120 " + chromium + flags + "--window-size=1280,3200 --screenshot=" + shot + " file://" + html_path + " > /dev/null 2>&1"),
            0);
  const std::string png = io::read_file(shot);
  ASSERT_GT(png.size(), 20000u) << "a page of plots is not a blank image";
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(Report, RefusesWhatIsNotARun) {
  RuntimeGuard g;
  auto expect_error = [](const std::vector<std::string>& runs, const std::string& what) {
    const std::string out = fresh_dir("report_bad") + ".html";
    try {
      instruments::write_report(runs, out);
      ADD_FAILURE() << "expected an error: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(io::exists(out)) << "nothing written";
  };
  expect_error({::testing::TempDir()}, "is not a bitgrad run directory (it has no manifest.json)");
  expect_error({}, "name at least one run directory");
  instruments::TrainOptions o = options(4);
  o.out = fresh_dir("report_run");
  run_text(kAdder, o);
  const std::string metrics = io::read_file(o.out + "/metrics.jsonl");
  io::write_file_atomic(o.out + "/metrics.jsonl", metrics.substr(0, metrics.size() - 5));
  expect_error({o.out}, "metrics.jsonl:4: the last line is incomplete");
  io::write_file_atomic(o.out + "/metrics.jsonl", metrics);
  const std::string manifest = io::read_file(o.out + "/manifest.json");
  io::write_file_atomic(o.out + "/manifest.json", "{\"run\": {\"kind\": \"party\"}}");
  expect_error({o.out}, "unknown run kind 'party'");
  io::write_file_atomic(o.out + "/manifest.json", manifest.substr(0, 100));
  expect_error({o.out}, "manifest.json is not valid JSON");
  io::write_file_atomic(o.out + "/manifest.json", manifest);
  const std::string out = fresh_dir("report_ok") + ".html";
  EXPECT_EQ(instruments::write_report({o.out}, out).plots, 1) << "the intact run reports its loss";
  EXPECT_EQ(instruments::write_report({o.out}, out).plots, 1) << "a report replaces a report";
  // but nothing else: not a run's manifest, not someone's page
  EXPECT_THROW_MSG(instruments::write_report({o.out}, o.out + "/manifest.json"), "exists and is not a bitgrad report; choose another -o");
  EXPECT_EQ(io::read_file(o.out + "/manifest.json"), manifest);
  const std::string page = fresh_dir("report_page") + ".html";
  io::write_file_atomic(page, "<html><title>my notes</title></html>");
  EXPECT_THROW_MSG(instruments::write_report({o.out}, page), "is not a bitgrad report");
  EXPECT_EQ(instruments::write_report({o.out}, page, true).plots, 1) << "--force replaces it";
  EXPECT_THROW_MSG(instruments::write_report({o.out}, o.out), "is not a regular file");
}

TEST(Report, DrawsABenchmarkScalingSweep) {
  // the run directory bench/report_peer.py writes for `make bench`'s scaling sweep
  const std::string dir = fresh_dir("report_scaling");
  io::make_dirs(dir);
  io::write_file_atomic(dir + "/manifest.json", R"({"run": {"kind": "scaling", "config": "examples/fashion_mlp.toml"}})");
  io::write_file_atomic(dir + "/scaling.json", R"({"pytorch_setups": {"1": "torch-openblas"}, "points": [
    {"framework": "bitgrad", "threads": 1, "batch": 32, "width": 512, "ms_per_step": 0.9},
    {"framework": "bitgrad", "threads": 1, "batch": 128, "width": 512, "ms_per_step": 2.5},
    {"framework": "pytorch", "threads": 1, "batch": 128, "width": 512, "ms_per_step": 4.5},
    {"framework": "bitgrad", "threads": 1, "batch": 128, "width": 1024, "ms_per_step": 6.25}]})");
  const std::string out = fresh_dir("report_scaling_page") + ".html";
  EXPECT_EQ(instruments::write_report({dir}, out).plots, 2) << "time per sample against batch, step time against width";
  const std::string html = io::read_file(out);
  EXPECT_NE(html.find("<td>6.25</td>"), std::string::npos) << "the table of points";
  io::write_file_atomic(dir + "/scaling.json", R"({"points": [{"threads": 1}]})");
  try {
    instruments::write_report({dir}, out);
    ADD_FAILURE() << "a point without a framework must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scaling.json: a point has no 'framework'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bitgrad::test
