// Cost of the step-level fingerprint trace (trace.jsonl) on training steps. Two sessions of one
// configuration (default examples/fashion_mlp.toml) train side by side in one process, one
// without a trace and one with the trace exactly as `bitgrad train` writes it (StepTracer), in
// alternating blocks of 10 steps so that drift on a shared machine hits both alike. Prints the
// median time per step of each (over blocks) and the ratio.
//   build/bin/trace_bench [--config FILE] [--steps N] [--threads N]      (bench/run.sh)
// BITGRAD_TRACE_MODE=thread|idle|inline forces a tracer mode (for comparisons).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

#include "bench_util.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/step_tracer.hpp"

int main(int argc, char** argv) {
  using namespace bitgrad;
  using Clock = std::chrono::steady_clock;
  std::string config = std::string(BITGRAD_SOURCE_DIR) + "/examples/fashion_mlp.toml";
  long steps = 1000;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--config")) config = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atol(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  try {
    set_num_threads(threads);
    const train::Config cfg = train::load_config(config);
    auto data = train::train_dataset(cfg);
    train::Session plain(cfg, data, nullptr, 0), traced(cfg, data, nullptr, 0);
    const std::string path = "/tmp/bitgrad_trace_bench_" + std::to_string(::getpid()) + ".jsonl";
    const char* forced = std::getenv("BITGRAD_TRACE_MODE");  // thread | idle | inline (for comparisons)
    using Tracer = instruments::StepTracer;
    Tracer tracer = forced ? Tracer(store::JsonLinesWriter(path), !std::strcmp(forced, "thread") ? Tracer::Mode::thread
                                                                  : !std::strcmp(forced, "idle")  ? Tracer::Mode::idle
                                                                                                  : Tracer::Mode::inline_)
                           : Tracer(store::JsonLinesWriter(path));
    traced.set_before_update([&tracer] { tracer.wait(); });
    const long block = 10, warmup = 2;
    std::vector<double> ms_plain, ms_traced;
    std::int64_t sp = 0, st = 0;
    for (long b = 0; b < warmup + steps / block; ++b) {
      for (int k = 0; k < 2; ++k) {
        const bool trace = (b + k) % 2 == 1;  // alternate which goes first
        const auto t0 = Clock::now();
        for (long i = 0; i < block; ++i) {
          if (trace) {
            train::Session::StepOut step_out = traced.step(st);
            tracer.submit(st++, traced, step_out);
          } else {
            plain.step(sp++);
          }
        }
        if (trace) tracer.wait();  // the block's last record is part of its cost
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / block;
        if (b >= warmup) (trace ? ms_traced : ms_plain).push_back(ms);
      }
    }
    std::remove(path.c_str());
    const double a = bench::median(ms_plain), t = bench::median(ms_traced);
    std::printf("%s  threads %d  isa %s  tracer %s  %ld steps each: ms/step untraced %.3f, traced %.3f, overhead %+.2f%%\n",
                cfg.file.substr(cfg.file.find_last_of('/') + 1).c_str(), threads, isa_name(active_isa()),
                Tracer::mode_name(tracer.mode()), steps, a, t, 100 * (t / a - 1));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "trace_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
