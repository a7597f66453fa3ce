// The bitgrad side of the peer benchmark (bench/peer.sh): trains a configuration as `bitgrad
// train` does (the session's canonical step, the step trace on unless --trace none) for one
// epoch or N steps after a short warm-up, and prints one JSON line: median ms per step,
// samples/s over the measured steps, peak RSS, and the peak of tensor memory a step adds (activations
// kept for the backward, gradients) over what it starts with.
//   build/bin/step_bench --config FILE --threads N [--workers N] [--steps N] [--batch B]
//                        [--width W] [--trace steps|none] [--label NAME] [--recompute none|blocks|all]
// --batch and --width override the configuration (batch size; the hidden width of an MLP whose
// hidden linear layers all have the same width), for the scaling tables.
// The line also gives the step's multiply-adds in matrix products (`multiply_adds`: every GEMM
// call of one more step, counted through a substitute kernel table after the timing), from which
// the reports derive the step's FMA-bound limit (bench/benchlib.py: fma_limit_ms).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/step_tracer.hpp"
#include "kernels/kernels.hpp"

namespace {
// The canonical table the counting one forwards to, and the count: GEMM calls can come from the
// pool's threads (a convolution's blocks of samples), hence a relaxed atomic. A statistic, never
// part of a result.
const bitgrad::kern::Table<float>* g_canonical = nullptr;
std::atomic<std::uint64_t> g_multiply_adds{0};

void counting_gemm(const bitgrad::kern::GemmArgs<float>& g) {
  g_multiply_adds.fetch_add(static_cast<std::uint64_t>(g.M) * static_cast<std::uint64_t>(g.N) * static_cast<std::uint64_t>(g.K),
                            std::memory_order_relaxed);
  g_canonical->gemm(g);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace bitgrad;
  using Clock = std::chrono::steady_clock;
  std::string config, trace = "steps", label = "bitgrad", recompute;
  long steps = 0, batch = 0, width = 0;
  int threads = 1, workers = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--config") config = v;
    else if (k == "--threads") threads = std::atoi(v);
    else if (k == "--workers") workers = std::atoi(v);
    else if (k == "--steps") steps = std::atol(v);
    else if (k == "--batch") batch = std::atol(v);
    else if (k == "--width") width = std::atol(v);
    else if (k == "--trace") trace = v;
    else if (k == "--label") label = v;
    else if (k == "--recompute") recompute = v;
    else {
      std::fprintf(stderr, "step_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    if (config.empty()) throw Error("step_bench: --config is required");
    set_num_threads(threads);
    train::Config cfg = train::load_config(config);
    if (batch > 0) cfg.train.batch_size = batch;
    if (width > 0) {
      // every linear layer but the last gets the new width
      int last = -1;
      for (int i = 0; i < static_cast<int>(cfg.model.layers.size()); ++i)
        if (cfg.model.layers[static_cast<std::size_t>(i)].type == train::LayerKind::linear) last = i;
      for (int i = 0; i < last; ++i)
        if (cfg.model.layers[static_cast<std::size_t>(i)].type == train::LayerKind::linear) cfg.model.layers[static_cast<std::size_t>(i)].out = width;
    }
    cfg.run.workers = workers;
    if (!recompute.empty()) cfg.model.recompute = nn::parse_recompute(recompute);
    train::Session session(cfg, train::train_dataset(cfg), nullptr, workers);
    const std::int64_t measured = steps > 0 ? steps : session.batches_per_epoch();
    const std::int64_t warmup = std::min<std::int64_t>(10, measured / 10);
    std::unique_ptr<instruments::StepTracer> tracer;
    const std::string path = "/tmp/bitgrad_step_bench_" + std::to_string(::getpid()) + ".jsonl";
    if (trace != "none") {
      tracer = std::make_unique<instruments::StepTracer>(store::JsonLinesWriter(path));
      session.set_before_update([t = tracer.get()] { t->wait(); });
    }
    std::vector<double> ms;
    Clock::time_point start;
    std::size_t base_bytes = 0;
    for (std::int64_t s = 0; s < warmup + measured; ++s) {
      if (s == warmup) {
        start = Clock::now();
        base_bytes = memory::bytes_in_use();  // parameters, optimizer state, the loader's batches
        memory::reset_peak();
      }
      const auto t0 = Clock::now();
      train::Session::StepOut step_out = session.step(s);
      if (tracer) tracer->submit(s, session, step_out);
      if (s >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    if (tracer) tracer->wait();
    // what a step adds on top at its peak: activations kept for the backward, gradients
    const double step_peak_mb = static_cast<double>(memory::peak_bytes_in_use() - std::min(base_bytes, memory::peak_bytes_in_use())) / 1048576.0;
    const double total = std::chrono::duration<double>(Clock::now() - start).count();
    tracer.reset();
    std::remove(path.c_str());
    // one more step on a table that counts the multiply-adds of every GEMM call (after the
    // timing and the memory peak; the tracer is gone, so nothing else runs meanwhile)
    g_canonical = &kern::context_table_f32();
    kern::Table<float> counting = *g_canonical;
    counting.gemm = &counting_gemm;
    // the samples' weight gradients counted as their per-sample GEMMs
    counting.gemm_samples = [](const kern::GemmSamplesArgs<float>& a) { kern::gemm_samples_stored(a, &counting_gemm, g_canonical->sum_cols); };
    kern::set_substitute_f32(&counting);
    session.step(warmup + measured);
    kern::set_substitute_f32(nullptr);
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    std::string stem = config.substr(config.find_last_of('/') + 1);  // the file name without ".toml"
    stem = stem.substr(0, stem.rfind(".toml"));
    std::printf(
        "{\"framework\": \"%s\", \"config\": \"%s\", \"threads\": %d, \"workers\": %d, \"batch\": %lld, \"width\": %ld, \"trace\": \"%s\", "
        "\"isa\": \"%s\", \"steps\": %lld, \"ms_per_step\": %.4f, \"samples_per_s\": %.1f, \"peak_rss_mb\": %.1f, \"recompute\": \"%s\", \"step_peak_mb\": %.2f, \"multiply_adds\": %llu}\n",
        label.c_str(), stem.c_str(), threads, workers, static_cast<long long>(cfg.train.batch_size), width, trace.c_str(),
        isa_name(active_isa()), static_cast<long long>(measured), bench::median(ms), static_cast<double>(measured * cfg.train.batch_size) / total,
        static_cast<double>(ru.ru_maxrss) / 1024.0, nn::recompute_name(cfg.model.recompute), step_peak_mb,
        static_cast<unsigned long long>(g_multiply_adds.load()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
