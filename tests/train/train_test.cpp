// The training loop: contracts T2/T3 (threads, loader workers), T5 (micro-batches), T7
// (stop and resume mid-epoch), damaged checkpoints, configuration errors.
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "bitgrad/io.hpp"
#include "bitgrad/runtime.hpp"
#include "bitgrad/train.hpp"
#include "support/fashion.hpp"
#include "support/runs.hpp"
#include "support/test_util.hpp"
#include "train/trainer.hpp"

namespace bitgrad::test {
namespace {

train::RunResult run(const char* text, instruments::TrainOptions o, std::string* log = nullptr) { return run_text(text, std::move(o), log); }

TEST(Train, AdderLearnsTheSum) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  train::RunResult r = run(kAdder, o);
  EXPECT_EQ(r.steps, 120);
  ASSERT_EQ(r.test_loss.size(), 3u);
  EXPECT_LT(r.test_loss[1], r.test_loss[0]);
  EXPECT_LT(r.test_loss[2], r.test_loss[1]);
  EXPECT_LT(r.test_loss.back(), 0.1) << "the weights approach 1 (the target variance is 10/12)";
}

TEST(Train, ThreadsAndWorkersChangeNoBit) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  instruments::TrainOptions o = options(25, 1, 0);
  const std::string want = run(kMlp, o).fingerprint.hex();
  for (auto [t, w] : {std::pair{2, 3}, std::pair{3, 1}, std::pair{4, 2}}) {
    o.threads = t;
    o.workers = w;
    EXPECT_EQ(run(kMlp, o).fingerprint.hex(), want) << "threads=" << t << " workers=" << w;
  }
}

TEST(Train, MicroBatchesOfWholeBlocksGiveTheSameBits) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  instruments::TrainOptions o = options(20);
  std::string log;
  const train::RunResult whole = run(kMlp, o, &log);
  EXPECT_EQ(log.find("T5 does not hold"), std::string::npos);
  for (std::int64_t k : {2, 4}) {  // 2 x 64 and 4 x 32: 2 and 1 canonical blocks each
    o.accumulate = k;
    const train::RunResult split = run(kMlp, o, &log);
    EXPECT_EQ(split.fingerprint.hex(), whole.fingerprint.hex()) << "accumulate=" << k;
    EXPECT_EQ(split.last_loss, whole.last_loss) << "accumulate=" << k;
    EXPECT_EQ(log.find("T5 does not hold"), std::string::npos);
  }
  o.accumulate = 8;  // micro-batches of 16 samples: half a block
  run(kMlp, o, &log);
  EXPECT_NE(log.find("contract T5 does not hold for this configuration"), std::string::npos) << log;
}

TEST(Train, TheShortLastBatchKeepsT5) {
  // the audit's reproduction: 4000 samples, batch 128, drop_last = false: the last batch of
  // each epoch has 32 samples; accumulate 2 and 4 split it into micro-batches of 64 and 32
  RuntimeGuard g;
  const std::string text = std::string(kAdder) + "\n";
  std::string cfg = text;
  cfg.replace(cfg.find("batch_size = 100"), 16, "batch_size = 128\ndrop_last = false");
  cfg.replace(cfg.find("epochs = 3"), 10, "epochs = 2");
  instruments::TrainOptions o;
  std::string log;
  const std::string want = run(cfg.c_str(), o, &log).fingerprint.hex();
  for (std::int64_t k : {2, 4}) {
    o.accumulate = k;
    EXPECT_EQ(run(cfg.c_str(), o, &log).fingerprint.hex(), want) << "accumulate=" << k;
    EXPECT_EQ(log.find("T5 does not hold"), std::string::npos) << log;
  }
}

TEST(Train, ResumeWithAnotherAccumulateOnlyWhereT5Holds) {
  RuntimeGuard g;
  std::string cfg = kAdder;
  cfg.replace(cfg.find("batch_size = 100"), 16, "batch_size = 128");
  instruments::TrainOptions o;
  const std::string straight = run(cfg.c_str(), o).fingerprint.hex();
  o.steps = 40;
  o.out = fresh_dir("acc_resume");
  run(cfg.c_str(), o);
  instruments::TrainOptions r;
  r.resume = o.out;
  r.accumulate = 3;  // 128 / 3 does not divide: refused by the configuration check
  EXPECT_THROW(run(cfg.c_str(), r), Error);
  cfg.replace(cfg.find("batch_size = 128"), 16, "batch_size = 96");
  o.out = fresh_dir("acc_resume_96");
  run(cfg.c_str(), o);
  r.resume = o.out;
  r.accumulate = 2;  // micro-batches of 48: other bits than accumulate 1
  EXPECT_THROW_MSG(run(cfg.c_str(), r), "was trained with accumulate 1; accumulate 2 gives other bits");
  cfg.replace(cfg.find("batch_size = 96"), 15, "batch_size = 128");
  o.out = fresh_dir("acc_resume_128");
  run(cfg.c_str(), o);
  r.resume = o.out;
  r.accumulate = 4;  // 4 x 32: T5 holds, the same run
  EXPECT_EQ(run(cfg.c_str(), r).fingerprint.hex(), straight);
}

TEST(Train, ResumingToNoNewStepIsAnError) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(10);
  const std::string dir = train_into(kAdder, "resume_none", o);
  EXPECT_THROW_MSG(run(kAdder, resume_options(dir, 6)), "has trained 10 steps already; stopping at step 6 would train none");
  EXPECT_THROW_MSG(run(kAdder, resume_options(dir, 10)), "the run is complete");
  EXPECT_EQ(run(kAdder, resume_options(dir, 12)).steps, 12);
}

TEST(Train, ResumeMidEpochEqualsTrainingStraight) {
  BITGRAD_NEED_FASHION_MNIST();
  RuntimeGuard g;
  instruments::TrainOptions o = options(30, 0, 2);
  const std::string straight = run(kMlp, o).fingerprint.hex();
  // 13 steps, stop, resume to 30 (a checkpoint every 5 steps along the way)
  o.steps = 13;
  o.checkpoint_every = 5;
  const std::string dir = train_into(kMlp, "resume", o);
  instruments::TrainOptions r = resume_options(dir, 30);
  std::string log;
  EXPECT_EQ(run(kMlp, r, &log).fingerprint.hex(), straight);
  EXPECT_NE(log.find("resumed at step 13"), std::string::npos) << log;
  // the metrics hold each step once
  std::istringstream m(io::read_file(dir + "/metrics.jsonl"));
  std::string line;
  int lines = 0;
  while (std::getline(m, line)) ++lines;
  EXPECT_EQ(lines, 30);
}

TEST(Train, ARunKilledBeforeItsFirstCheckpointResumesFromStepZero) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  o.out = fresh_dir("born");
  o.steps = 6;
  const std::string straight = run(kAdder, o).fingerprint.hex();
  // what a kill between config.toml and the first `latest` leaves
  const std::string d = fresh_dir("unborn-run");
  io::make_dirs(d);
  io::write_file_atomic(d + "/config.toml", io::read_file(o.out + "/config.toml"));
  io::write_file_atomic(d + "/trace.jsonl", "{\"step\": 1, \"par");
  instruments::TrainOptions again;
  again.out = d;
  EXPECT_THROW_MSG(run(kAdder, again), "stopped before its first checkpoint; start it again with --resume");
  std::string log;
  EXPECT_EQ(run(kAdder, resume_options(d, 6), &log).fingerprint.hex(), straight);
  EXPECT_NE(log.find("starting it again from step 0"), std::string::npos) << log;
  EXPECT_EQ(io::read_file(d + "/trace.jsonl"), io::read_file(o.out + "/trace.jsonl"));
  // only with the configuration it was started with
  const std::string d2 = fresh_dir("unborn-other");
  io::make_dirs(d2);
  io::write_file_atomic(d2 + "/config.toml", io::read_file(o.out + "/config.toml"));
  std::string changed = kAdder;
  changed.replace(changed.find("lr = 0.05"), 9, "lr = 0.06");
  EXPECT_THROW_MSG(run(changed.c_str(), resume_options(d2, 6)), "differs from the one it was started with");
}

TEST(Train, ResumeRefusesRecordsCutShortOrChangedAfterTheCheckpoint) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  o.out = fresh_dir("records");
  o.steps = 6;
  o.checkpoint_every = 3;
  run(kAdder, o);
  // a power loss can leave the checkpoint on disk but not the last lines of a trace: cut at a
  // line boundary, so that every line is still whole JSON
  const std::string trace = io::read_file(o.out + "/trace.jsonl");
  const std::size_t cut = trace.rfind('\n', trace.size() - 2) + 1;
  io::write_file_atomic(o.out + "/trace.jsonl", trace.substr(0, cut));
  EXPECT_THROW_MSG(run(kAdder, resume_options(o.out, 9)), "trace.jsonl was cut short after the checkpoint at step 6");
  io::write_file_atomic(o.out + "/trace.jsonl", trace);
  const std::string metrics = io::read_file(o.out + "/metrics.jsonl");
  std::string edited = metrics;
  edited.replace(edited.find("\"step\": 2"), 9, "\"step\":  2");
  io::write_file_atomic(o.out + "/metrics.jsonl", edited);
  EXPECT_THROW_MSG(run(kAdder, resume_options(o.out, 9)), "metrics.jsonl was changed after the checkpoint at step 6");
  EXPECT_EQ(io::read_file(o.out + "/metrics.jsonl"), edited) << "nothing is cut when resume refuses";
  // an edit of the same length (a digit of a hash in the trace) passed the size check;
  // the checkpoint's digest of the records refuses it
  std::string same_length = trace;
  const std::size_t h = same_length.find("\"input\": \"") + 10;
  same_length[h] = same_length[h] == '0' ? '1' : '0';
  io::write_file_atomic(o.out + "/metrics.jsonl", metrics);
  io::write_file_atomic(o.out + "/trace.jsonl", same_length);
  EXPECT_THROW_MSG(run(kAdder, resume_options(o.out, 9)), "trace.jsonl was changed after the checkpoint at step 6");
  io::write_file_atomic(o.out + "/trace.jsonl", trace);
  ::unlink((o.out + "/metrics.jsonl").c_str());
  EXPECT_THROW_MSG(run(kAdder, resume_options(o.out, 9)), "metrics.jsonl is missing");
  io::write_file_atomic(o.out + "/metrics.jsonl", metrics);
  EXPECT_EQ(run(kAdder, resume_options(o.out, 9)).steps, 9) << "intact records resume";
}

TEST(Train, ResumeRefusesADataFileChangedSinceTheRun) {
  RuntimeGuard g;
  const std::string dir = fresh_dir("csv-data");
  io::make_dirs(dir);
  std::string rows;
  for (int i = 0; i < 64; ++i) rows += std::to_string(i % 7) + "," + std::to_string(i % 3) + "," + std::to_string(i % 2) + "\n";
  io::write_file_atomic(dir + "/train.csv", rows);
  const std::string cfg = "seed = 1\n[data]\ndataset = \"csv\"\ntrain = \"" + dir + "/train.csv\"\nlabel_column = 2\n"
                          "[model]\nlayers = [ { type = \"linear\", out = 2 } ]\n[train]\nbatch_size = 16\nepochs = 2\n[optimizer]\ntype = \"sgd\"\nlr = 0.1\n";
  instruments::TrainOptions o;
  o.out = dir + "/run";
  o.steps = 2;
  run(cfg.c_str(), o);
  rows[0] = rows[0] == '0' ? '1' : '0';  // one value of one row
  io::write_file_atomic(dir + "/train.csv", rows);
  EXPECT_THROW_MSG(run(cfg.c_str(), resume_options(o.out, 4)), "the data file " + dir + "/train.csv has changed since");
}

// Asks for a stop at the end of step `at`, as bitgrad's SIGINT/SIGTERM handler does.
struct StopAt final : train::RunObserver {
  explicit StopAt(std::int64_t s) : at(s) {}
  void begin(const store::RunDir*, train::Session&, std::int64_t) override {}
  void end_step(std::int64_t step, const train::Session&, const train::Session::StepOut&) override {
    if (step == at) train::request_stop(15);
  }
  std::int64_t at;
};

TEST(Train, AStopRequestCheckpointsAfterItsStepAndTheRunResumesBitExact) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  o.out = fresh_dir("stop-straight");
  o.steps = 10;
  const std::string straight = run(kAdder, o).fingerprint.hex();
  const std::string dir = fresh_dir("stopped");
  train::RunOptions ro;
  ro.out = dir;
  ro.steps = 10;
  ro.progress = 0;
  StopAt stop(4);
  std::ostringstream log;
  try {
    train::run(train::parse_config(kAdder, "adder.toml"), ro, log, {&stop});
    ADD_FAILURE() << "a stop request must stop the run";
  } catch (const train::Interrupted& e) {
    EXPECT_EQ(e.signal, 15);
    EXPECT_NE(std::string(e.what()).find("interrupted at step 4; continue with: bitgrad train adder.toml --resume " + dir), std::string::npos)
        << e.what();
  }
  train::clear_stop_request();
  EXPECT_NE(log.str().find("stopped at step 4 of 10 (signal 15); checkpoint written"), std::string::npos) << log.str();
  EXPECT_EQ(store::load_latest_checkpoint(dir).info.step, 4);
  EXPECT_EQ(run(kAdder, resume_options(dir, 10)).fingerprint.hex(), straight);
}

TEST(Train, EveryEpochEndIsACheckpointByDefault) {
  RuntimeGuard g;
  instruments::TrainOptions o;
  o.out = fresh_dir("epoch-checkpoints");
  o.steps = 85;  // 40 steps an epoch
  run(kAdder, o);
  EXPECT_EQ(store::list_checkpoints(o.out), (std::vector<std::int64_t>{0, 40, 80, 85}));
  o.out = fresh_dir("no-epoch-checkpoints");
  o.checkpoint_epochs = false;
  run(kAdder, o);
  EXPECT_EQ(store::list_checkpoints(o.out), (std::vector<std::int64_t>{0, 85}));
}

TEST(Train, DamagedCheckpointsAndChangedConfigsAreRefused) {
  RuntimeGuard g;
  const std::string dir = fresh_dir("damage");
  instruments::TrainOptions o;
  o.out = dir;
  o.steps = 12;
  run(kAdder, o);
  const std::string ck = dir + "/checkpoints/step-000000012/optimizer.safetensors";
  const std::string good = io::read_file(ck);
  instruments::TrainOptions r = resume_options(dir, 20);
  std::string bad = good;
  bad[bad.size() - 3] ^= 1;
  io::write_file_atomic(ck, bad);
  try {
    run(kAdder, r);
    FAIL() << "a flipped byte must be detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  // one bit of the header: the data index "12" -> "13" parses, and resumed elsewhere before
  for (const char* field : {"\"index\":\"", "\"optimizer_steps\":\"", "\"epoch\":\""}) {
    std::string meta = good;
    const std::size_t at = meta.find(field);
    ASSERT_NE(at, std::string::npos) << field;
    meta[at + std::strlen(field)] ^= 1;
    io::write_file_atomic(ck, meta);
    try {
      run(kAdder, r);
      FAIL() << "a flipped bit of " << field << " must be detected";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
  }
  io::write_file_atomic(ck, good.substr(0, good.size() / 2));
  try {
    run(kAdder, r);
    FAIL() << "a truncated file must be detected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  io::write_file_atomic(ck, good);
  std::string changed = kAdder;
  changed.replace(changed.find("lr = 0.05"), 9, "lr = 0.06");
  try {
    run(changed.c_str(), r);
    FAIL() << "a different configuration must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the configuration differs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(run(kAdder, r).steps, 20) << "the intact checkpoint resumes";
  instruments::TrainOptions again;
  again.out = dir;
  EXPECT_THROW(run(kAdder, again), Error) << "an existing run is not written over";
}

void expect_config_error(const std::string& text, const std::string& message) {
  try {
    train::Config c = train::parse_config(text, "cfg.toml");
    auto ds = train::train_dataset(c);
    train::build_model(c, *ds);
    FAIL() << "expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(Train, SizesAreBoundedBeforeAnythingIsAllocatedOrWritten) {
  // a configuration that is not a regular file, or not a configuration's size
  EXPECT_THROW_MSG(train::load_config("/dev/zero"), "/dev/zero: cannot read the configuration file (io: /dev/zero is a character device");
  const std::string big = fresh_dir("big") + ".toml";
  io::write_file_atomic(big, std::string(2 << 20, '#'));
  EXPECT_THROW_MSG(train::load_config(big), "more than the 1048576 such a file may have");
  EXPECT_THROW_MSG(train::parse_config(std::string(2 << 20, '#'), "text.toml"), "a configuration file has at most 1048576");
  // a trillion samples: the memory a run needs is estimated and refused up front
  std::string huge = kAdder;
  huge.replace(huge.find("samples = 4000"), 14, "samples = 1000000000000");
  instruments::TrainOptions o;
  o.out = fresh_dir("huge");
  o.steps = 1;
  EXPECT_THROW_MSG(run(huge.c_str(), o), "of memory (sample order of 1000000000000 samples");
  EXPECT_FALSE(io::exists(o.out)) << "nothing written";
}

TEST(Train, ANonUtf8NameDoesNotBreakTheJsonFiles) {
  RuntimeGuard g;
  instruments::TrainOptions o = options(2);
  o.out = fresh_dir("utf8");
  std::ostringstream log;
  const train::RunResult r = instruments::train(train::parse_config(kAdder, "caf\xe9.toml"), o, log);
  EXPECT_EQ(r.steps, 2);
  const std::string m = io::read_file(o.out + "/manifest.json");
  EXPECT_NE(m.find("caf\xef\xbf\xbd.toml"), std::string::npos) << "U+FFFD where the byte was not UTF-8";
}

TEST(Train, ConfigurationErrorsNameFileLineAndKey) {
  const std::string base = kAdder;
  // characters TOML does not allow where they stand (toml++ would reach undefined behaviour)
  expect_config_error("seed = 1\nb\xce\xb2ta = 2\n", "cfg.toml:2: malformed TOML: ");
  expect_config_error("seed = 1\nb\xce\xb2ta = 2\n", "(characters beyond ASCII shown as `; TOML allows them only in strings and comments)");
  expect_config_error("seed = 4:<<'<<8hd\xef\xbb\xbb\"<<ty", "cfg.toml:1: malformed TOML: ");
  expect_config_error("seed = 1\nx = \"\xc3\x28\"\n", "cfg.toml:2: malformed TOML: not UTF-8 (\\xc3(\"\\x0a)");
  expect_config_error(std::string("seed = 1\n[\0x]\n", 13), "cfg.toml:2: malformed TOML: the control character \\x00 is not allowed");
  expect_config_error(base + "# caf\xc3\xa9 \"\n[extra]\nname = \"\xce\xb2 \\\" \xce\xb2\"\n", "unknown key 'extra'");  // fine in comments and strings
  expect_config_error(base + "\n[extra]\nx = 1\n", "cfg.toml:17: unknown key 'extra' in top level");
  std::string typo = base;
  typo.replace(typo.find("lr = 0.05"), 9, "lrr = 0.05");
  expect_config_error(typo, "cfg.toml:15: unknown key 'lrr' in [optimizer]");
  std::string wrong = base;
  wrong.replace(wrong.find("batch_size = 100"), 16, "batch_size = \"100\"");
  expect_config_error(wrong, "cfg.toml:10: [train] batch_size must be an integer, got a string");
  std::string layer = base;
  layer.replace(layer.find("type = \"linear\""), 15, "type = \"capsule\"");  // (lstm is a layer now)
  expect_config_error(layer, "cfg.toml:8: model.layers[0] type is 'capsule'; expected one of linear");
  std::string hidden = base;
  hidden.replace(hidden.find("type = \"linear\", out = 1"), 24, "type = \"lstm\"");
  expect_config_error(hidden, "cfg.toml:8: model.layers[0] (lstm) needs 'hidden'");
  std::string chain = base;
  chain.replace(chain.find("{ type = \"linear\", out = 1 }"), 28, "{ type = \"linear\", out = 3 }");
  expect_config_error(chain, "the model gives 3 values per sample but the targets have 1");
  expect_config_error("[data\n", "cfg.toml:1: malformed TOML");
  expect_config_error("seed = 1\n[data]\ndataset = \"fashion-mnist\"\npath = \"/nope\"\n[model]\nlayers = [ { type = \"flatten\" } ]\n",
                      "dataset-fashion-mnist");
  std::string big = base;
  big.replace(big.find("batch_size = 100"), 16, "batch_size = 5000");
  try {
    run(big.c_str(), instruments::TrainOptions{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch size 5000 is larger than the dataset"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bitgrad::test
