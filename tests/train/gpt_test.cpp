// The contract on a transformer: a tiny GPT (dropout, tied weights, clipping, AdamW decay on
// matrices) keeps its bits across threads and loader workers (T2/T3), micro-batches (T5), code
// paths, and stop-and-resume mid-epoch (T7); sampling is the same text everywhere.
#include <cstdio>

#include "bitgrad/infer.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/runtime.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {
namespace {

TEST(Gpt, ThreadsWorkersMicroBatchesAndCodePathsChangeNoBit) {
  RuntimeGuard g;
  const std::string cfg = tiny_gpt();
  instruments::TrainOptions o = options(6, 1, 0);
  std::string log;
  const train::RunResult base = run_text(cfg, o, &log);
  EXPECT_NE(log.find("validation loss"), std::string::npos) << log;
  ASSERT_EQ(base.test_loss.size(), 2u) << "evaluated every 3 steps";
  const std::string want = base.fingerprint.hex();
  for (auto [t, w] : {std::pair{2, 2}, std::pair{3, 0}, std::pair{7, 2}}) {
    o.threads = t;
    o.workers = w;
    const train::RunResult r = run_text(cfg, o);
    EXPECT_EQ(r.fingerprint.hex(), want) << "threads=" << t << " workers=" << w;
    EXPECT_EQ(r.test_loss, base.test_loss) << "threads=" << t;
  }
  o.threads = 2;
  o.workers = 0;
  for (std::int64_t k : {2, 4}) {  // micro-batches of 64 and 32 windows
    o.accumulate = k;
    const train::RunResult r = run_text(cfg, o, &log);
    EXPECT_EQ(r.fingerprint.hex(), want) << "accumulate=" << k;
    EXPECT_EQ(r.last_loss, base.last_loss) << "accumulate=" << k;
    EXPECT_EQ(log.find("T5 does not hold"), std::string::npos) << log;
  }
  // tied weights: the embedding's two uses (the lookup, the head) each combined over the
  // micro-batches on their own, then added: the bits of one batch, with no note
  std::string tied = cfg;
  tied.replace(tied.find("tie_weights = false"), 19, "tie_weights = true");
  o.accumulate = 1;
  const std::string tied_want = run_text(tied, o).fingerprint.hex();
  EXPECT_NE(tied_want, want);
  for (std::int64_t k : {2, 4}) {
    o.accumulate = k;
    EXPECT_EQ(run_text(tied, o, &log).fingerprint.hex(), tied_want) << "tied, accumulate=" << k;
    EXPECT_EQ(log.find("does not hold"), std::string::npos) << log;
  }
  o.accumulate = 1;
  for (Isa isa : isas()) {
    set_isa(isa);
    EXPECT_EQ(run_text(cfg, o).fingerprint.hex(), want) << "isa=" << isa_name(isa);
  }
}

TEST(Gpt, ResumeMidEpochEqualsTrainingStraight) {
  RuntimeGuard g;
  std::string tied = tiny_gpt();
  tied.replace(tied.find("tie_weights = false"), 19, "tie_weights = true");
  for (const std::string& cfg : {tiny_gpt(), tied}) {
    instruments::TrainOptions o = options(6, 2, 0);
    const std::string straight = run_text(cfg, o).fingerprint.hex();
    o.steps = 4;
    o.checkpoint_every = 2;
    o.threads = 3;
    const std::string dir = train_into(cfg, "gpt_resume", o);
    std::string log;
    EXPECT_EQ(run_text(cfg, resume_options(dir, 6), &log).fingerprint.hex(), straight);
    EXPECT_NE(log.find("resumed at step 4"), std::string::npos) << log;
  }
}

TEST(Gpt, LearnsTheTinyCorpus) {
  RuntimeGuard g;
  std::string cfg = tiny_gpt();
  cfg.replace(cfg.find("steps = 6"), 9, "steps = 120");
  cfg.replace(cfg.find("every = 3"), 9, "every = 40");
  cfg.replace(cfg.find("dropout = 0.1"), 13, "dropout = 0.0");
  cfg.replace(cfg.find("lr = 3e-3"), 9, "lr = 1e-2");
  instruments::TrainOptions o = options(120, 2, 0);
  const train::RunResult r = run_text(cfg, o);
  ASSERT_EQ(r.test_loss.size(), 3u);
  // 38 characters: a uniform guess is ln 38 = 3.64 nats; the corpus repeats, so it is learnt
  EXPECT_LT(r.test_loss.back(), 2.0) << r.test_loss[0] << " " << r.test_loss[1];
  EXPECT_LT(r.test_loss[1], r.test_loss[0]);
  EXPECT_LT(r.test_loss[2], r.test_loss[0]);
}

TEST(Gpt, SamplingGivesTheSameTextOnEveryThreadCountAndCodePath) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(6, 2, 0);
  const std::string dir = train_into(tiny_gpt(), "gpt_sample", o);
  infer::SampleOptions s;
  s.prompt = "Good ";
  s.tokens = 40;
  s.temperature = 0.8;
  s.top_k = 10;
  s.seed = 3;
  s.threads = 1;
  set_isa(Isa::scalar);
  const infer::SampleResult want = infer::sample(dir, s);
  EXPECT_EQ(want.text.substr(0, 5), "Good ");
  EXPECT_EQ(want.tokens.size(), 40u);
  for (Isa isa : isas()) {
    set_isa(isa);
    for (int t : {1, 2, 3, 7}) {
      s.threads = t;
      EXPECT_EQ(infer::sample(dir, s).text, want.text) << "isa=" << isa_name(isa) << " threads=" << t;
    }
  }
  s.seed = 4;
  EXPECT_NE(infer::sample(dir, s).text, want.text) << "another seed, other draws";
  s.temperature = 0;  // greedy: no draw at all
  const std::string greedy = infer::sample(dir, s).text;
  s.seed = 5;
  EXPECT_EQ(infer::sample(dir, s).text, greedy);
}

TEST(Gpt, SamplingReadsTheRunNotTheCorpus) {
  // the run keeps its vocabulary (vocabulary.json): the corpus gone, the same text
  RuntimeGuard g;
  const std::string corpus = fresh_dir("gpt_own_corpus") + ".txt";
  io::write_file_atomic(corpus, io::read_file(tiny_corpus()));
  std::string cfg = tiny_gpt();
  cfg.replace(cfg.find(tiny_corpus()), tiny_corpus().size(), corpus);
  const std::string dir = train_into(cfg, "gpt_no_corpus", options(3, 1, 0));
  infer::SampleOptions s;
  s.prompt = "Good ";
  s.tokens = 20;
  const std::string want = infer::sample(dir, s).text;
  ASSERT_EQ(std::remove(corpus.c_str()), 0);
  EXPECT_EQ(infer::sample(dir, s).text, want);
  // the vocabulary gone: refused, naming the file and the checkpoint that recorded it (a run from
  // before runs kept it, whose checkpoints record none, is told what writes it)
  ASSERT_EQ(std::remove((dir + "/vocabulary.json").c_str()), 0);
  EXPECT_THROW_MSG(infer::sample(dir, s), dir + "/vocabulary.json is missing; checkpoint step-000000003 was written with it");
}

TEST(Gpt, AChangedVocabularyIsRefusedByName) {
  // one flipped bit in vocabulary.json would decode every token to other text: each checkpoint
  // records its digest, and sampling and resuming refuse a changed file, naming it
  RuntimeGuard g;
  const std::string dir = train_into(tiny_gpt(), "gpt_vocab_digest", options(2, 1, 0));
  infer::SampleOptions s;
  s.prompt = "Good ";
  s.tokens = 10;
  const std::string want = infer::sample(dir, s).text;
  const std::string file = dir + "/vocabulary.json", bytes = io::read_file(file);
  std::string flipped = bytes;
  const std::size_t at = flipped.rfind(']');  // the last symbol's last digit, one bit flipped: another symbol
  ASSERT_TRUE(at != std::string::npos && at > 0);
  flipped[at - 1] = static_cast<char>(flipped[at - 1] ^ 1);
  io::write_file_atomic(file, flipped);
  EXPECT_THROW_MSG(infer::sample(dir, s), file + " changed since checkpoint step-000000002 was written");
  EXPECT_THROW_MSG(run_text(tiny_gpt(), resume_options(dir, 3)), file + " changed since checkpoint step-000000002 was written");
  io::write_file_atomic(file, bytes);
  EXPECT_EQ(infer::sample(dir, s).text, want);
}

TEST(Gpt, BadInputIsAOneLineError) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(2, 1, 0);
  std::string cfg = tiny_gpt();
  cfg.replace(cfg.find("n_embd = 16"), 11, "n_embd = 15");
  EXPECT_THROW_MSG(run_text(cfg, o), "n_embd 15 is not divisible by n_head 2");
  cfg = tiny_gpt();
  cfg.replace(cfg.find("block_size = 8"), 14, "block_size = 5000");
  EXPECT_THROW_MSG(run_text(cfg, o), "is shorter than one window of block_size + 1 = 5001 tokens");
  cfg.replace(cfg.find("val_fraction = 0.2"), 18, "val_fraction = 0.0");
  EXPECT_THROW_MSG(run_text(cfg, o), "block_size 5000 is larger than the training part of the corpus");
  cfg = tiny_gpt();
  cfg.replace(cfg.find(tiny_corpus()), tiny_corpus().size(), "/nonexistent/corpus");
  EXPECT_THROW_MSG(run_text(cfg, o), "/nonexistent/corpus does not exist");
  const std::string dir = train_into(tiny_gpt(), "gpt_bad_prompt", o);
  infer::SampleOptions s;
  s.prompt = "Zebra";
  EXPECT_THROW_MSG(infer::sample(dir, s), "character 1 ('Z') is not in the vocabulary");
  s.prompt = "\xff";
  EXPECT_THROW_MSG(infer::sample(dir, s), "0xff is not UTF-8");
}

}  // namespace
}  // namespace bitgrad::test
