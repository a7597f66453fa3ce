// A small text corpus and a tiny GPT on it, for the text, transformer and training tests.
#pragma once

#include <fstream>
#include <string>

#include "support/runs.hpp"

namespace bitgrad::test {

// A few fortunes' worth of text (about 2 KB, 40-odd characters), written once per process.
inline std::string tiny_corpus() {
  static const std::string path = [] {
    const std::string d = fresh_dir("corpus");
    if (std::system(("mkdir -p '" + d + "'").c_str()) != 0) ADD_FAILURE() << "cannot create " << d;
    const std::string f = d + "/fortunes.txt";
    std::ofstream o(f, std::ios::binary);
    const char* lines[] = {
        "A day without sunshine is like night.\n%\n",
        "Anything worth doing is worth doing slowly.\n%\n",
        "Beware of a tall dark man with a cup of tea.\n%\n",
        "Do not read this fortune under penalty of law.\n%\n",
        "Every cloud has a silver lining, except the one over you.\n%\n",
        "Good news will come to you by mail.\n%\n",
        "He who laughs last thinks slowest.\n%\n",
        "It is a poor judge who cannot award a prize.\n%\n",
        "Keep it simple, make it work, then make it fast.\n%\n",
    };
    for (int rep = 0; rep < 5; ++rep)
      for (const char* l : lines) o << l;
    return f;
  }();
  return path;
}

// A 2-layer GPT with dropout over the tiny corpus: batch 128 (4 blocks of 32
// windows) so that accumulate 2 and 4 keep T5.
inline std::string tiny_gpt(const std::string& extra_train = "") {
  return R"(
seed = 11
[data]
dataset = "text"
path = ")" + tiny_corpus() + R"("
val_fraction = 0.2
[model]
type = "gpt"
n_layer = 2
n_head = 2
n_embd = 16
block_size = 8
dropout = 0.1
bias = true
tie_weights = false
[train]
batch_size = 128
steps = 6
clip_grad_norm = 1.0
)" + extra_train + R"(
[optimizer]
type = "adamw"
lr = 3e-3
weight_decay = 0.1
[schedule]
type = "cosine"
warmup_steps = 2
[eval]
every = 3
windows = 16
batch_size = 8
)";
}

}  // namespace bitgrad::test
