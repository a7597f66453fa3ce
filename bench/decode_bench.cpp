// A batch-1 decode step of a trained GPT (`bitgrad serve`'s cached decoder with one request):
// the ms per generated token at a thread count, the median over the tokens after a warm-up. For
// split-K (numerics §5): a step's GEMMs have one row, so only k (or the output's columns) can
// feed a second thread. Prints one JSON line.
//   build/bin/decode_bench --run DIR --threads N [--tokens 200] [--prompt 32]
// DIR is a run directory of a GPT (e.g. `bitgrad train examples/fortunes_gpt.toml --steps 1`).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "bitgrad/runtime.hpp"
#include "infer/run_model.hpp"

int main(int argc, char** argv) {
  using namespace bitgrad;
  using Clock = std::chrono::steady_clock;
  std::string run;
  int threads = 1;
  long tokens = 200, prompt = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--run") run = argv[i + 1];
    else if (k == "--threads") threads = std::atoi(argv[i + 1]);
    else if (k == "--tokens") tokens = std::atol(argv[i + 1]);
    else if (k == "--prompt") prompt = std::atol(argv[i + 1]);
    else {
      std::fprintf(stderr, "decode_bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    if (run.empty()) throw Error("decode_bench: --run is required");
    set_num_threads(threads);
    const infer::RunModel rm = infer::load_run_model(run, "decode_bench", true);
    infer::Decoder dec(rm);
    infer::Decoder::Sequence seq;
    for (long i = 0; i < prompt; ++i) seq.tokens.push_back(i % rm.classes);
    const long warmup = std::min<long>(10, tokens / 10);
    std::vector<double> ms;
    for (long t = 0; t < warmup + tokens; ++t) {
      const auto t0 = Clock::now();
      const auto logits = dec.next_logits({&seq});
      if (t >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      // the most likely token: no draw, so every thread count decodes the same text
      const auto& l = logits[0];
      seq.tokens.push_back(std::max_element(l.begin(), l.end()) - l.begin());
    }
    std::printf("{\"run\": \"%s\", \"threads\": %d, \"cached\": %s, \"tokens\": %ld, \"ms_per_token\": %.4f, \"last_token\": %lld}\n", run.c_str(),
                threads, dec.cached() ? "true" : "false", tokens, bench::median(ms), static_cast<long long>(seq.tokens.back()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_bench: %s\n", e.what());
    return 2;
  }
  return 0;
}
