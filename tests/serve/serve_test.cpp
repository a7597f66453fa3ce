// `bitgrad serve` on a free loopback port (docs/serving.md): a completion is `bitgrad sample`'s
// text; 16 concurrent clients get the bytes they get one at a time, at 1 and 2 threads; bad
// requests are 4xx naming the field; a full queue is 503 with Retry-After; a client that goes
// away frees its slot; SIGTERM answers the requests in flight and exits 0. A tiny GPT (and a
// tiny classifier) are trained in the test.
#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "bitgrad/infer.hpp"
#include "serve/serve.hpp"
#include "infer/run_model.hpp"
#include "serve/request.hpp"
#include "support/onnx_protos.hpp"
#include "support/op_harness.hpp"
#include "support/runs.hpp"
#include "support/serving.hpp"
#include "support/sockets.hpp"
#include "support/test_util.hpp"
#include "support/text_corpus.hpp"

namespace bitgrad::test {
namespace {
using json = nlohmann::json;

// The text of a completion's body, or of a stream's events.
std::string text_of(const std::string& body) {
  if (body.rfind("data: ", 0) != 0) return json::parse(body)["choices"][0]["text"].get<std::string>();
  std::string t;
  for (std::size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    const std::size_t end = body.find("\n\n", at);
    const std::string ev = body.substr(at + 6, end - at - 6);
    at = end;
    if (ev != "[DONE]") t += json::parse(ev)["choices"][0]["text"].get<std::string>();
  }
  return t;
}

// 16 requests of different prompts, lengths, temperatures, k and seeds; some streamed
std::vector<std::string> sixteen() {
  const char* prompts[] = {"A", "Do not ", "Keep it simple", "He who laughs last thinks slowest.\n", "e"};
  std::vector<std::string> v;
  for (int i = 0; i < 16; ++i) {
    v.push_back(completion(prompts[i % 5], 3 + (i * 7) % 23, i % 4 == 0 ? 0.0 : 0.5 + 0.25 * (i % 3), i % 3 == 0 ? 5 : 0,
                           static_cast<std::uint64_t>(1000 + i), i % 5 == 2));
    if (i % 4 == 1) {  // with log-probabilities (numbers batched beside others are those alone)
      json q = json::parse(v.back());
      q["logprobs"] = i % 8 == 1 ? 0 : 5;
      v.back() = q.dump();
    }
  }
  return v;
}

TEST(Serve, CompletionEqualsSample) {
  const std::string dir = gpt_run();
  const infer::RunModel m = infer::load_run_model(dir, "serve", false);
  EXPECT_TRUE(infer::Decoder(m).cached()) << "a gpt is decoded with a KV cache";
  Running r(dir);
  struct Case {
    std::string prompt;
    std::int64_t tokens;
    double temperature;
    std::int64_t top_k;
    std::uint64_t seed;
  };
  for (const Case& c : {Case{"A", 20, 1.0, 0, 3}, Case{"Good news ", 12, 0.0, 0, 0}, Case{"It is a poor judge", 15, 0.7, 5, 99},
                        Case{"\n", 30, 1.5, 0, 18446744073709551615ull}}) {
    infer::SampleOptions s;
    s.prompt = c.prompt;
    s.tokens = c.tokens;
    s.temperature = c.temperature;
    s.top_k = c.top_k;
    s.seed = c.seed;
    s.threads = 1;
    const std::string want = infer::sample(dir, s).text;
    for (bool stream : {false, true}) {
      const Reply got = post(r, "/v1/completions", completion(c.prompt, c.tokens, c.temperature, c.top_k, c.seed, stream));
      ASSERT_EQ(got.status, 200) << got.body;
      EXPECT_EQ(c.prompt + text_of(got.body), want) << "prompt '" << c.prompt << "' seed " << c.seed << (stream ? " streamed" : "");
    }
  }
  // a stop string cuts the text before it
  infer::SampleOptions s;
  s.prompt = "A";
  s.tokens = 40;
  s.seed = 3;
  const std::string full = infer::sample(dir, s).text.substr(1);
  const std::string stop = full.substr(10, 2);
  const Reply got = post(r, "/v1/completions", json{{"prompt", "A"}, {"max_tokens", 40}, {"seed", 3}, {"stop", stop}}.dump());
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(json::parse(got.body)["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(json::parse(got.body)["choices"][0]["finish_reason"], "stop");
}

// The log_softmax a training forward of the window computes for the row of each generated
// position (the window: the text's last block_size tokens), as Python's `log_softmax(model(x))`.
std::vector<std::vector<float>> window_logprobs(const infer::RunModel& m, std::vector<std::int64_t> text, const std::vector<std::int64_t>& generated) {
  const std::int64_t block = m.cfg.data.block_size;
  std::vector<std::vector<float>> rows;
  NoGradGuard ng;
  for (const std::int64_t t : generated) {
    const std::int64_t len = std::min<std::int64_t>(block, static_cast<std::int64_t>(text.size()));
    std::vector<float> ctx;
    for (std::size_t i = text.size() - static_cast<std::size_t>(len); i < text.size(); ++i) ctx.push_back(static_cast<float>(text[i]));
    const Tensor lp = contiguous(log_softmax(m.model->forward(Tensor::from(ctx, Shape{1, len}), nn::Context{}), -1));  // [1, len, V]
    const std::int64_t V = lp.shape()[2];
    const float* last = lp.data<float>() + (len - 1) * V;
    rows.emplace_back(last, last + V);
    text.push_back(t);
  }
  return rows;
}

TEST(Serve, LogprobsAreTheTrainingForwardsBitsInsideAndPastTheWindow) {
  const std::string dir = gpt_run();
  const infer::RunModel m = infer::load_run_model(dir, "serve", false);
  const std::string prompt = "It is a poor judge";  // longer than the window (8) already
  const std::int64_t tokens = 20, k = 3;
  infer::SampleOptions so;
  so.prompt = prompt;
  so.tokens = tokens;
  so.temperature = 0.8;
  so.seed = 7;
  so.logprobs = k;
  for (const std::string& short_prompt : {std::string("A"), prompt}) {
    so.prompt = short_prompt;  // "A": positions inside the window first, then past it
    so.threads = 1;
    const infer::SampleResult sampled = infer::sample(dir, so);
    ASSERT_EQ(sampled.logprobs.size(), static_cast<std::size_t>(tokens));
    const std::vector<std::vector<float>> want = window_logprobs(m, m.corpus->encode(short_prompt, "prompt"), sampled.tokens);
    for (std::size_t i = 0; i < want.size(); ++i) {
      const infer::TokenLogprobs& got = sampled.logprobs[i];
      EXPECT_EQ(bits(got.logprob), bits(want[i][static_cast<std::size_t>(got.token)])) << "sample, position " << i;
      ASSERT_EQ(got.top.size(), static_cast<std::size_t>(k));
      for (const auto& [id, lp] : got.top) EXPECT_EQ(bits(lp), bits(want[i][static_cast<std::size_t>(id)])) << "sample, position " << i;
      EXPECT_TRUE(want[i][static_cast<std::size_t>(got.top[0].first)] == *std::max_element(want[i].begin(), want[i].end()));
    }
    const json sample_lp = json::parse(sampled.logprobs_json);
    for (int threads : {1, 2}) {
      serve::ServeOptions o;
      o.threads = threads;
      Running r(dir, o);
      json req{{"prompt", short_prompt}, {"max_tokens", tokens}, {"temperature", 0.8}, {"seed", 7}, {"logprobs", k}};
      const Reply plain = post(r, "/v1/completions", req.dump());
      ASSERT_EQ(plain.status, 200) << plain.body;
      const json lp = json::parse(plain.body)["choices"][0]["logprobs"];
      EXPECT_EQ(lp, sample_lp) << "the server's logprobs are bitgrad sample's, at " << threads << " threads";
      for (std::size_t i = 0; i < want.size(); ++i) {
        const float v = static_cast<float>(lp["token_logprobs"][i].get<double>());
        EXPECT_EQ(bits(v), bits(want[i][static_cast<std::size_t>(sampled.tokens[i])])) << "server, position " << i;
        EXPECT_EQ(lp["tokens"][i].get<std::string>(), infer::token_text(*m.corpus, sampled.tokens[i]));
      }
      // streamed: the same entries, spread over the events
      req["stream"] = true;
      const Reply streamed = post(r, "/v1/completions", req.dump());
      ASSERT_EQ(streamed.status, 200) << streamed.body;
      json joined{{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}, {"text_offset", json::array()}};
      for (std::size_t at = 0; (at = streamed.body.find("data: ", at)) != std::string::npos;) {
        const std::size_t end = streamed.body.find("\n\n", at);
        const std::string ev = streamed.body.substr(at + 6, end - at - 6);
        at = end;
        if (ev == "[DONE]") continue;
        const json e = json::parse(ev)["choices"][0]["logprobs"];
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (const json& x : e[key]) joined[key].push_back(x);
      }
      EXPECT_EQ(joined, sample_lp) << "streamed, at " << threads << " threads";
    }
  }
}

// The log-probability of prompt token p from the window before it (the block_size tokens
// `bitgrad sample` would draw it from): log_softmax of the window forward's last row.
float window_logprob(const infer::RunModel& m, const std::vector<std::int64_t>& ids, std::size_t p) {
  NoGradGuard ng;
  const std::int64_t b = std::max<std::int64_t>(0, static_cast<std::int64_t>(p) - m.cfg.data.block_size), len = static_cast<std::int64_t>(p) - b;
  std::vector<float> w;
  for (std::int64_t i = b; i < static_cast<std::int64_t>(p); ++i) w.push_back(static_cast<float>(ids[static_cast<std::size_t>(i)]));
  const Tensor l = contiguous(log_softmax(m.model->forward(Tensor::from(w, Shape{1, len}), nn::Context{}), -1));
  return l.data<float>()[(len - 1) * m.classes + ids[p]];
}

// `echo` puts the prompt before the completion, and with logprobs each prompt token's
// log-probability from the window `bitgrad sample` would draw it from: bit for bit the window
// forward's log_softmax, inside the first window and past it.
TEST(Serve, EchoGivesThePromptsLogprobsFromItsWindows) {
  const std::string dir = gpt_run();
  const infer::RunModel m = infer::load_run_model(dir, "serve", false);
  Running r(dir);
  for (const std::string prompt : {"A", "Good ne", "It is a poor judge"}) {
    json req{{"prompt", prompt}, {"max_tokens", 3}, {"temperature", 0.8}, {"seed", 9}, {"logprobs", 2}};
    const json plain = json::parse(post(r, "/v1/completions", req.dump()).body)["choices"][0];
    req["echo"] = true;
    const Reply a = post(r, "/v1/completions", req.dump());
    ASSERT_EQ(a.status, 200) << a.body;
    const json c = json::parse(a.body)["choices"][0];
    EXPECT_EQ(c["text"], prompt + plain["text"].get<std::string>());
    const json& lp = c["logprobs"];
    const std::vector<std::int64_t> ids = m.corpus->encode(prompt, "prompt");
    const std::size_t P = ids.size();
    ASSERT_EQ(lp["tokens"].size(), P + 3);
    EXPECT_TRUE(lp["token_logprobs"][0].is_null() && lp["top_logprobs"][0].is_null());
    for (std::size_t p = 1; p < P; ++p) {
      EXPECT_EQ(bits(static_cast<float>(lp["token_logprobs"][p].get<double>())), bits(window_logprob(m, ids, p))) << "'" << prompt << "' position " << p;
      EXPECT_EQ(lp["tokens"][p], infer::token_text(*m.corpus, ids[p]));
      EXPECT_EQ(lp["text_offset"][p], p);  // one byte per character here
    }
    for (std::size_t i = 0; i < 3; ++i) {  // then the completion's, as without echo
      EXPECT_EQ(lp["token_logprobs"][P + i], plain["logprobs"]["token_logprobs"][i]);
      EXPECT_EQ(lp["top_logprobs"][P + i], plain["logprobs"]["top_logprobs"][i]);
      EXPECT_EQ(lp["text_offset"][P + i].get<std::size_t>(), P + plain["logprobs"]["text_offset"][i].get<std::size_t>());
    }
    // no token asked: the prompt scored alone
    req["max_tokens"] = 0;
    const json scored = json::parse(post(r, "/v1/completions", req.dump()).body)["choices"][0];
    EXPECT_EQ(scored["text"], prompt);
    EXPECT_EQ(scored["logprobs"]["token_logprobs"].size(), P);
    for (std::size_t p = 0; p < P; ++p) EXPECT_EQ(scored["logprobs"]["token_logprobs"][p], lp["token_logprobs"][p]);
  }
  const Reply streamed = post(r, "/v1/completions", R"({"prompt": "A", "echo": true, "stream": true})");
  EXPECT_EQ(streamed.status, 400);
  EXPECT_EQ(json::parse(streamed.body)["error"]["param"], "echo");
  const Reply long_prompt = post(r, "/v1/completions", json{{"prompt", std::string(1100, 'A')}, {"echo", true}, {"logprobs", 0}}.dump());
  EXPECT_EQ(long_prompt.status, 413) << long_prompt.body;
  EXPECT_EQ(json::parse(long_prompt.body)["error"]["param"], "echo");
  EXPECT_EQ(post(r, "/v1/completions", json{{"prompt", std::string(1100, 'A')}, {"echo", true}, {"max_tokens", 1}}.dump()).status, 200);
}

// bf16 and fp16 runs are sampled and served with their evaluation forward's rounding (the
// matmul-like ops to nearest in the run's precision, numerics §24), the cache's rows included:
// completions and log-probabilities equal `sample`'s and that forward's, batched equal alone.
TEST(Serve, Bf16AndFp16RunsAreServedWithTheirTrainingForwardsRounding) {
  for (const std::string precision : {"bf16", "fp16"}) {
    std::string cfg = tiny_gpt("precision = \"" + precision + "\"\n");
    cfg.replace(cfg.find("dropout = 0.1"), 13, "dropout = 0.0");
    const std::string dir = train_into(cfg, "serve_" + precision, options(4, 1, 0));
    const infer::RunModel m = infer::load_run_model(dir, "serve", false);
    ASSERT_NE(m.context().precision, Precision::fp32);
    EXPECT_TRUE(infer::Decoder(m).keeps_rows());
    infer::SampleOptions so;
    so.prompt = "A";
    so.tokens = 14;  // past the window of 8
    so.temperature = 0.8;
    so.seed = 5;
    so.logprobs = 2;
    so.threads = 1;
    const infer::SampleResult sr = infer::sample(dir, so);
    // the window forward in the run's precision, and in f32: the rounding shows in the numbers
    std::vector<std::int64_t> text = m.corpus->encode("A", "prompt");
    int differ_from_f32 = 0;
    NoGradGuard ng;
    for (std::size_t i = 0; i < sr.tokens.size(); ++i) {
      const std::int64_t len = std::min<std::int64_t>(m.cfg.data.block_size, static_cast<std::int64_t>(text.size()));
      std::vector<float> w(text.end() - len, text.end());
      const Tensor x = Tensor::from(w, Shape{1, len});
      const Tensor lp = contiguous(log_softmax(m.model->forward(x, m.context()), -1));
      const Tensor lp32 = contiguous(log_softmax(m.model->forward(x, nn::Context{}), -1));
      const std::int64_t at = (len - 1) * m.classes + sr.tokens[i];
      EXPECT_EQ(bits(sr.logprobs[i].logprob), bits(lp.data<float>()[at])) << precision << " position " << i;
      differ_from_f32 += bits(lp.data<float>()[at]) != bits(lp32.data<float>()[at]);
      text.push_back(sr.tokens[i]);
    }
    EXPECT_GT(differ_from_f32, 0) << precision << ": the run's rounding changes no log-probability; the test would not see it ignored";
    const std::vector<std::string> reqs = {
        json{{"prompt", "A"}, {"max_tokens", 14}, {"temperature", 0.8}, {"seed", 5}, {"logprobs", 2}}.dump(),
        json{{"prompt", "Good ne"}, {"max_tokens", 9}, {"temperature", 0.0}, {"seed", 1}}.dump(),
        json{{"prompt", "It is a poor judge"}, {"max_tokens", 5}, {"temperature", 1.0}, {"seed", 2}, {"logprobs", 0}}.dump()};
    for (int threads : {1, 2}) {
      serve::ServeOptions o;
      o.threads = threads;
      Running r(dir, o);
      std::vector<std::string> alone;
      for (const std::string& q : reqs) {
        const Reply a = post(r, "/v1/completions", q);
        ASSERT_EQ(a.status, 200) << a.body;
        alone.push_back(a.body);
      }
      const json first = json::parse(alone[0])["choices"][0];
      EXPECT_EQ("A" + first["text"].get<std::string>(), sr.text) << precision << " at " << threads << " threads";
      EXPECT_EQ(first["logprobs"], json::parse(sr.logprobs_json)) << precision << " at " << threads << " threads";
      std::vector<Reply> together(reqs.size());
      std::vector<std::thread> clients;
      for (std::size_t i = 0; i < reqs.size(); ++i) clients.emplace_back([&, i] { together[i] = post(r, "/v1/completions", reqs[i]); });
      for (auto& t : clients) t.join();
      for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].body, alone[i]) << precision << " request " << i;
    }
  }
}

// A metric's value in /metrics' text.
double metric(const std::string& text, const std::string& name) {
  const std::size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

TEST(Serve, APrefixCacheHitAPartialHitAndAMissAnswerAlike) {
  const std::string dir = gpt_run();  // block_size 8: blocks of 2 tokens, prefixes up to 7
  // purpose-built overlaps: the same prefix cut at and between blocks, a whole prompt again, a
  // prompt one block longer, a prompt past the window, and the completions' own continuations
  const std::vector<std::string> prompts = {"Good ne", "Good news", "Good n", "Go", "Good ne", "Good", "Good new", "Goo",
                                            "It is a poor judge", "Good ne", "G", "Good nd"};
  std::vector<std::string> reqs;
  for (std::size_t i = 0; i < prompts.size(); ++i)
    reqs.push_back(json{{"prompt", prompts[i]}, {"max_tokens", 6 + static_cast<int>(i % 4)}, {"temperature", i % 3 == 0 ? 0.0 : 0.9},
                        {"seed", 40 + i}, {"logprobs", 2}}.dump());
  serve::ServeOptions none;
  none.prefix_cache_bytes = 0;
  std::vector<std::string> want;
  {
    Running r(dir, none);
    for (const std::string& q : reqs) {
      const Reply a = post(r, "/v1/completions", q);
      ASSERT_EQ(a.status, 200) << a.body;
      want.push_back(a.body);
    }
    EXPECT_EQ(metric(r.client().Get("/metrics")->body, "bitgrad_prefix_cache_lookups_total"), 0);
  }
  for (const std::int64_t bytes : {std::int64_t{64} << 20, std::int64_t{1200}}) {  // ample, and two blocks of 512 bytes (evicting)
    for (int threads : {1, 2}) {
      serve::ServeOptions o;
      o.prefix_block = 2;
      o.prefix_cache_bytes = bytes;
      o.threads = threads;
      Running r(dir, o);
      for (int round = 0; round < 2; ++round)  // the second round finds every prefix the first left
        for (std::size_t i = 0; i < reqs.size(); ++i) {
          const Reply a = post(r, "/v1/completions", reqs[i]);
          ASSERT_EQ(a.status, 200) << a.body;
          EXPECT_EQ(a.body, want[i]) << "prompt '" << prompts[i] << "', round " << round << ", cache " << bytes << " bytes, " << threads << " threads";
        }
      // and all at once, sharing batches and the cache
      std::vector<Reply> together(reqs.size());
      std::vector<std::thread> clients;
      for (std::size_t i = 0; i < reqs.size(); ++i) clients.emplace_back([&, i] { together[i] = post(r, "/v1/completions", reqs[i]); });
      for (auto& t : clients) t.join();
      for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].body, want[i]) << "together, prompt '" << prompts[i] << "'";
      const std::string m = r.client().Get("/metrics")->body;
      EXPECT_EQ(metric(m, "bitgrad_prefix_cache_lookups_total"), 3.0 * static_cast<double>(reqs.size())) << m;
      EXPECT_LE(metric(m, "bitgrad_prefix_cache_bytes"), static_cast<double>(bytes)) << m;
      if (bytes > 1200) {
        EXPECT_GT(metric(m, "bitgrad_prefix_cache_hits_total"), 0) << m;
        EXPECT_GT(metric(m, "bitgrad_prefix_cache_reused_tokens_total"), 0) << m;
      } else {
        EXPECT_GT(metric(m, "bitgrad_prefix_cache_evicted_total"), 0) << m;
      }
    }
  }
}

TEST(Serve, ConcurrentClientsGetTheBytesOfOneAtATime) {
  const std::vector<std::string> reqs = sixteen();
  std::vector<std::string> first;
  for (int threads : {1, 2}) {
    serve::ServeOptions o;
    o.threads = threads;
    o.max_batch = 16;
    Running r(gpt_run(), o);
    std::vector<std::string> alone;
    for (const std::string& q : reqs) {
      const Reply a = post(r, "/v1/completions", q);
      ASSERT_EQ(a.status, 200) << a.body;
      alone.push_back(a.body);
    }
    std::vector<Reply> together(reqs.size());
    std::vector<std::thread> clients;
    for (std::size_t i = 0; i < reqs.size(); ++i) clients.emplace_back([&, i] { together[i] = post(r, "/v1/completions", reqs[i]); });
    for (auto& t : clients) t.join();
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(together[i].status, 200);
      EXPECT_EQ(together[i].body, alone[i]) << "request " << i << " at " << threads << " threads";
    }
    if (first.empty()) first = alone;
    EXPECT_EQ(alone, first) << "threads " << threads;
    const std::string metrics = r.client().Get("/metrics")->body;
    EXPECT_NE(metrics.find("bitgrad_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 32"), std::string::npos) << metrics;
  }
}

TEST(Serve, BadRequestsAreRefusedNamingTheField) {
  serve::ServeOptions o;
  o.max_tokens = 100;
  o.max_prompt = 64;
  Running r(gpt_run(), o);
  struct Case {
    std::string body;
    int status;
    json param;
  };
  for (const Case& c : std::vector<Case>{{"{", 400, nullptr},
                                         {"[1]", 400, nullptr},
                                         {R"({"max_tokens": 3})", 400, "prompt"},
                                         {R"({"prompt": 5})", 400, "prompt"},
                                         {R"({"prompt": ""})", 400, "prompt"},
                                         {R"({"prompt": "A", "n": 2})", 400, "n"},
                                         {R"({"prompt": "A", "max_tokens": "many"})", 400, "max_tokens"},
                                         {R"({"prompt": "A", "max_tokens": 101})", 400, "max_tokens"},
                                         {R"({"prompt": "A", "max_tokens": -1})", 400, "max_tokens"},
                                         {R"({"prompt": "A", "temperature": -0.5})", 400, "temperature"},
                                         {R"({"prompt": "A", "seed": 1.5})", 400, "seed"},
                                         {R"({"prompt": "A", "stop": [1]})", 400, "stop[0]"},
                                         {R"({"prompt": "A", "stream": "yes"})", 400, "stream"},
                                         {R"({"prompt": "Zebra"})", 400, "prompt"},
                                         {json{{"prompt", std::string(65, 'A')}}.dump(), 413, "prompt"},
                                         {R"({"prompt": "A", "model": "another"})", 404, "model"}}) {
    const Reply got = post(r, "/v1/completions", c.body);
    EXPECT_EQ(got.status, c.status) << c.body << " -> " << got.body;
    const json e = json::parse(got.body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << got.body;
    EXPECT_EQ(e["error"]["param"], c.param) << c.body << " -> " << got.body;
  }
  EXPECT_EQ(post(r, "/v1/predict", R"({"inputs": [1]})").status, 404) << "a text model has no predictions";
  EXPECT_EQ(post(r, "/v1/completions", completion("A", 2, 1, 0, 1)).status, 200) << "still serving";
}

TEST(Serve, AFullQueueIsAnswered503WithRetryAfter) {
  serve::ServeOptions o;
  o.max_batch = 1;
  o.max_queue = 1;
  o.max_tokens = 1000;
  Running r(gpt_run(), o);
  std::vector<Reply> got(6);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < got.size(); ++i)
    clients.emplace_back([&, i] { got[i] = post(r, "/v1/completions", completion("A", 1000, 1, 0, i)); });
  for (auto& t : clients) t.join();
  int ok = 0, busy = 0;
  for (const Reply& g : got) {
    if (g.status == 200) ++ok;
    if (g.status == 503) {
      ++busy;
      EXPECT_EQ(g.retry_after, "1");
      EXPECT_EQ(json::parse(g.body)["error"]["type"], "overloaded") << g.body;
    }
  }
  EXPECT_EQ(ok + busy, 6);
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1) << "one running and one waiting: the rest are turned away";
}

// The threads of the process.
int threads_now() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') ++n;
    ::closedir(d);
  }
  return n;
}

// A waiting request is data, not a thread: a queue of 20000 costs no thread, and 200 requests
// held at once (a full batch, the rest waiting) run on the same few.
TEST(Serve, TheQueueIsDataNotThreads) {
  const int before = threads_now();
  serve::ServeOptions o;
  o.max_batch = 2;
  o.max_queue = 20000;
  o.max_tokens = 100000;
  Running r(gpt_run(), o);
  const int serving = threads_now() - before;
  EXPECT_LE(serving, o.http.workers + 4) << "the front's workers, its loop, the engine and its kernel threads";
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) {
    held.push_back(connect_to(r.server->port()));
    const std::string body = completion("A", 100000, 1, 0, static_cast<std::uint64_t>(i), true);
    send_all(held.back(), "POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(threads_now() - before, serving) << "200 requests inside, no thread more";
  auto health = r.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (int fd : held) ::close(fd);
}

TEST(Serve, AClientThatGoesAwayFreesItsSlot) {
  serve::ServeOptions o;
  o.max_batch = 1;
  o.max_queue = 0;
  o.max_tokens = 100000;
  Running r(gpt_run(), o);
  const int fd = connect_to(r.server->port());
  ASSERT_GE(fd, 0);
  const std::string body = completion("A", 100000, 1, 0, 7, true);
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  char buf[512];
  ASSERT_GT(::read(fd, buf, sizeof buf), 0) << "the stream started";
  EXPECT_EQ(post(r, "/v1/completions", completion("A", 1, 1, 0, 1)).status, 503) << "the one slot is taken";
  ::close(fd);
  Reply after;
  for (int i = 0; i < 100; ++i) {  // the slot is freed at the stream's next write
    after = post(r, "/v1/completions", completion("A", 1, 1, 0, 1));
    if (after.status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(after.status, 200) << after.body;
  const std::string metrics = r.client().Get("/metrics")->body;
  EXPECT_NE(metrics.find("code=\"499\"} 1"), std::string::npos) << metrics;
}

// A classifier of [6] samples into 3 classes: a linear layer of 16, `middle`, a linear layer of 3.
std::string classifier(const std::string& middle) {
  return "seed = 17\n[data]\ndataset = \"synthetic\"\nshape = [6]\nclasses = 3\nsamples = 256\n[model]\nlayers = [ { type = \"linear\", "
         "out = 16 }, " + middle + "{ type = \"linear\", out = 3 } ]\n[train]\nbatch_size = 64\nepochs = 1\n[optimizer]\ntype = \"adam\"\n"
         "lr = 0.01\n";
}

TEST(Serve, PredictionsOfAClassifierDoNotDependOnTheirBatch) {
  const std::string cfg = classifier("{ type = \"tanh\" }, ");
  instruments::TrainOptions t = options(2, 1, 0);
  const std::string dir = train_into(cfg, "serve_classifier", t);
  Running r(dir);
  std::vector<std::vector<float>> xs;
  for (int i = 0; i < 5; ++i) {
    std::vector<float> x;
    for (int k = 0; k < 6; ++k) x.push_back(static_cast<float>(0.37 * i - 0.11 * k * k + 0.5));
    xs.push_back(x);
  }
  const Reply all = post(r, "/v1/predict", json{{"inputs", xs}}.dump());
  ASSERT_EQ(all.status, 200) << all.body;
  const json a = json::parse(all.body);
  ASSERT_EQ(a["logits"].size(), 5u);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const json one = json::parse(post(r, "/v1/predict", json{{"inputs", xs[i]}}.dump()).body);  // one sample, unbatched
    EXPECT_EQ(one["logits"][0], a["logits"][i]) << "sample " << i;
    EXPECT_EQ(one["probabilities"][0], a["probabilities"][i]);
    EXPECT_EQ(one["argmax"][0], a["argmax"][i]);
  }
  // the same samples as base64 little-endian f32
  std::string bytes;
  for (const auto& x : xs)
    for (float f : x) bytes.append(reinterpret_cast<const char*>(&f), 4);
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t w = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) w |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) w |= static_cast<std::uint8_t>(bytes[i + 2]);
    b64 += abc[(w >> 18) & 63];
    b64 += abc[(w >> 12) & 63];
    b64 += i + 1 < bytes.size() ? abc[(w >> 6) & 63] : '=';
    b64 += i + 2 < bytes.size() ? abc[w & 63] : '=';
  }
  EXPECT_EQ(post(r, "/v1/predict", json{{"inputs_base64", b64}}.dump()).body, all.body);
  const Reply wrong = post(r, "/v1/predict", R"({"inputs": [[1, 2, 3]]})");
  EXPECT_EQ(wrong.status, 422) << wrong.body;
  EXPECT_EQ(json::parse(wrong.body)["error"]["param"], "inputs[0]");
  EXPECT_EQ(post(r, "/v1/completions", R"({"prompt": "A"})").status, 404);
}

// A character LSTM (a layer list: embedding, lstm, tied head) is served: each completion is
// `bitgrad sample`'s text and log-probabilities, inside the window and past it, and requests
// batched together get the bytes they get alone, at 1 and 2 threads.
TEST(Serve, ACharacterLstmIsServedAsSampleAndBatchedAsAlone) {
  const std::string cfg = R"(
seed = 5
[data]
dataset = "text"
path = ")" + tiny_corpus() + R"("
val_fraction = 0.2
block_size = 8
[model]
layers = [ { type = "embedding", dim = 12 }, { type = "lstm", hidden = 12 }, { type = "tied_head" } ]
[train]
batch_size = 32
steps = 4
[optimizer]
type = "adam"
lr = 0.01
)";
  const std::string dir = train_into(cfg, "serve_lstm", options(4, 1, 0));
  const infer::RunModel m = infer::load_run_model(dir, "serve", false);
  const infer::Decoder dec(m);
  EXPECT_TRUE(dec.cached() && !dec.keeps_rows()) << "the lstm's state is the cache";
  const std::vector<std::string> prompts = {"A", "Good news ", "It is a poor judge", "\n"};
  std::vector<std::string> reqs, want;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    infer::SampleOptions so;
    so.prompt = prompts[i];
    so.tokens = 6 + 5 * static_cast<std::int64_t>(i);  // past the window of 8 for the longer ones
    so.temperature = i % 2 == 0 ? 0.8 : 0.0;
    so.seed = 70 + i;
    so.logprobs = 2;
    so.threads = 1;
    const infer::SampleResult sr = infer::sample(dir, so);
    want.push_back(sr.text);
    reqs.push_back(json{{"prompt", so.prompt}, {"max_tokens", so.tokens}, {"temperature", so.temperature}, {"seed", so.seed}, {"logprobs", 2}}.dump());
    want.push_back(sr.logprobs_json);
  }
  std::vector<std::string> first;
  for (int threads : {1, 2}) {
    serve::ServeOptions o;
    o.threads = threads;
    Running r(dir, o);
    std::vector<std::string> alone;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const Reply a = post(r, "/v1/completions", reqs[i]);
      ASSERT_EQ(a.status, 200) << a.body;
      const json body = json::parse(a.body);
      EXPECT_EQ(prompts[i] + body["choices"][0]["text"].get<std::string>(), want[2 * i]) << "prompt '" << prompts[i] << "'";
      EXPECT_EQ(body["choices"][0]["logprobs"], json::parse(want[2 * i + 1])) << "prompt '" << prompts[i] << "'";
      alone.push_back(a.body);
    }
    std::vector<Reply> together(reqs.size());
    std::vector<std::thread> clients;
    for (std::size_t i = 0; i < reqs.size(); ++i) clients.emplace_back([&, i] { together[i] = post(r, "/v1/completions", reqs[i]); });
    for (auto& t : clients) t.join();
    for (std::size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].body, alone[i]) << "request " << i << " at " << threads << " threads";
    if (first.empty()) first = alone;
    EXPECT_EQ(alone, first) << "threads " << threads;
    // echo: the prompt's log-probabilities from its windows (the first one from one forward)
    const std::string prompt = "It is a poor judge";
    const json e = json::parse(post(r, "/v1/completions", json{{"prompt", prompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 1}}.dump()).body);
    const std::vector<std::int64_t> ids = m.corpus->encode(prompt, "prompt");
    for (std::size_t p = 1; p < ids.size(); ++p)
      EXPECT_EQ(bits(static_cast<float>(e["choices"][0]["logprobs"]["token_logprobs"][p].get<double>())), bits(window_logprob(m, ids, p))) << p;
  }
}

// An imported ONNX graph trained as a run is served as the classifier it is: x [N, 6] times W1,
// plus b1, tanh, times W2, plus b2 (torch's Linear layers as an exporter writes them).
TEST(Serve, AnImportedOnnxClassifierIsServedBatchedAsAlone) {
  const std::string d = fresh_dir("onnx_classifier");
  ASSERT_EQ(std::system(("mkdir -p '" + d + "'").c_str()), 0);
  std::vector<float> w1(6 * 16), w2(16 * 3), b1(16, 0.01f), b2(3, 0.0f);
  // weights in [-0.3, 0.3) from the index alone (no libm: the same values on every platform)
  for (std::size_t i = 0; i < w1.size(); ++i) w1[i] = 0.3f * (static_cast<float>((i * 37) % 64) / 32.0f - 1.0f);
  for (std::size_t i = 0; i < w2.size(); ++i) w2[i] = 0.25f * (static_cast<float>((i * 29) % 64) / 32.0f - 1.0f);
  onnx::ValueInfoProto x = info("x", {-1, 6});
  x.dim_params[0] = "N";
  const onnx::ModelProto m = model_of({node("MatMul", "fc1", {"x", "W1"}, {"h"}), node("Add", "fc1_bias", {"h", "b1"}, {"hb"}),
                                       node("Tanh", "act", {"hb"}, {"a"}), node("MatMul", "fc2", {"a", "W2"}, {"o"}),
                                       node("Add", "fc2_bias", {"o", "b2"}, {"y"})},
                                      {floats("W1", {6, 16}, w1), floats("b1", {16}, b1), floats("W2", {16, 3}, w2), floats("b2", {3}, b2)}, {x});
  {
    std::ofstream f(d + "/classifier.onnx", std::ios::binary);
    f << onnx::serialize_model(m);
  }
  const std::string cfg = "seed = 17\n[data]\ndataset = \"synthetic\"\nshape = [6]\nclasses = 3\nsamples = 256\n[model]\nonnx = \"" + d +
                          "/classifier.onnx\"\n[train]\nbatch_size = 64\nepochs = 1\n[optimizer]\ntype = \"adam\"\nlr = 0.01\n";
  const std::string dir = train_into(cfg, "serve_onnx", options(3, 1, 0));
  const infer::RunModel rm = infer::load_run_model(dir, "serve", false);
  std::vector<std::vector<float>> xs;
  for (int i = 0; i < 7; ++i) {
    std::vector<float> v;
    for (int k = 0; k < 6; ++k) v.push_back(static_cast<float>(0.41 * i - 0.13 * k * k + 0.2));
    xs.push_back(v);
  }
  for (int threads : {1, 2}) {
    serve::ServeOptions o;
    o.threads = threads;
    Running r(dir, o);
    const Reply all = post(r, "/v1/predict", json{{"inputs", xs}}.dump());
    ASSERT_EQ(all.status, 200) << all.body;
    const json a = json::parse(all.body);
    ASSERT_EQ(a["logits"].size(), xs.size());
    NoGradGuard ng;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const json one = json::parse(post(r, "/v1/predict", json{{"inputs", xs[i]}}.dump()).body);
      EXPECT_EQ(one["logits"][0], a["logits"][i]) << "sample " << i << " at " << threads << " threads";
      EXPECT_EQ(one["probabilities"][0], a["probabilities"][i]);
      // the run's model alone, as `bitgrad serve` computes it: the same f32 bits
      const Tensor y = contiguous(rm.model->forward(Tensor::from(xs[i], Shape{1, 6}), nn::Context{}));
      for (std::int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(bits(static_cast<float>(a["logits"][i][static_cast<std::size_t>(c)].get<double>())), bits(y.data<float>()[c])) << "sample " << i;
    }
  }
}

// a byte vocabulary draws a multi-byte character one byte per token step; a stream
// released its first bytes alone (40 of 40 streams garbled 'é' into U+FFFD U+FFFD). The stream's
// text is now the completion's, whatever the seed.
TEST(Serve, AStreamNeverCutsACharacterOfAByteVocabulary) {
  const std::string d = fresh_dir("utf8_corpus");
  ASSERT_EQ(std::system(("mkdir -p '" + d + "'").c_str()), 0);
  {
    std::ofstream o(d + "/fortunes.txt", std::ios::binary);
    for (int rep = 0; rep < 20; ++rep) o << "Café crème, naïve façade: ß, ü, 日本語, ✓ déjà vu.\n%\n";
  }
  std::string cfg = tiny_gpt();
  cfg.replace(cfg.find("dropout = 0.1"), 13, "dropout = 0.0");
  cfg.replace(cfg.find(tiny_corpus()), tiny_corpus().size(), d + "/fortunes.txt");
  cfg.replace(cfg.find("val_fraction"), 0, "vocabulary = \"bytes\"\n");
  const std::string dir = train_into(cfg, "serve_bytes", options(6, 1, 0));
  Running r(dir);
  int multibyte = 0;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const Reply whole = post(r, "/v1/completions", completion("Caf", 24, 1.0, 0, seed));
    const Reply streamed = post(r, "/v1/completions", completion("Caf", 24, 1.0, 0, seed, true));
    ASSERT_EQ(whole.status, 200) << whole.body;
    ASSERT_EQ(streamed.status, 200) << streamed.body;
    const std::string text = text_of(whole.body);
    EXPECT_EQ(text_of(streamed.body), text) << "seed " << seed;
    for (unsigned char ch : text) multibyte += ch >= 0xC0;
  }
  EXPECT_GT(multibyte, 0) << "the model drew no multi-byte character: the test shows nothing";
}

TEST(Serve, OutputsThatAreNotFiniteAreNoAnswer) {
  // inputs near float's largest overflowed the classifier to NaN, served as 200 with
  // null logits and argmax 0; a temperature of 1e-308 overflowed logit / T and drew the last token
  const std::string cfg = classifier("");
  const std::string dir = train_into(cfg, "serve_overflow", options(2, 1, 0));
  Running r(dir);
  const float big = 3.4e38f;
  const Reply over = post(r, "/v1/predict", json{{"inputs", std::vector<float>{big, -big, big, -big, big, -big}}}.dump());
  EXPECT_EQ(over.status, 422) << over.body;
  EXPECT_NE(over.body.find("is not finite: the inputs overflow its arithmetic"), std::string::npos) << over.body;
  EXPECT_EQ(post(r, "/v1/predict", json{{"inputs", std::vector<float>{1, 2, 3, 4, 5, 6}}}.dump()).status, 200);

  // the HTTP library's own refusals have the documented JSON body; a wrong method is 405
  auto c = r.client();
  auto nope = c.Get("/v1/nothing");
  ASSERT_TRUE(nope);
  EXPECT_EQ(nope->status, 404);
  EXPECT_EQ(json::parse(nope->body)["error"]["code"], 404) << nope->body;
  EXPECT_NE(nope->body.find("no endpoint GET /v1/nothing"), std::string::npos) << nope->body;
  auto get_predict = c.Get("/v1/predict");
  ASSERT_TRUE(get_predict);
  EXPECT_EQ(get_predict->status, 405);
  EXPECT_EQ(get_predict->get_header_value("Allow"), "POST");
  EXPECT_EQ(json::parse(get_predict->body)["error"]["code"], 405) << get_predict->body;
  auto post_health = c.Post("/health", "{}", "application/json");
  ASSERT_TRUE(post_health);
  EXPECT_EQ(post_health->status, 405);
  EXPECT_EQ(post_health->get_header_value("Allow"), "GET");

  std::vector<float> logits{0.5f, 2.0f, -1.0f, 2.0f, 1.5f};
  EXPECT_EQ(infer::draw_token(logits.data(), 5, 1e-308, 0, 0.999), 3);  // the maxima alone: 1 or 3 (here the second)
  EXPECT_EQ(infer::draw_token(logits.data(), 5, 1e-308, 0, 0.1), 1);
  logits[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW_MSG(infer::draw_token(logits.data(), 5, 1.0, 0, 0.5), "logit for token 2 is nan");
}

// The command: SIGTERM while requests are in flight (two streamed, two not); they are answered
// whole — the streams to their finish event and [DONE], which the first server cut —
// then exit 0. With a drain timeout they cannot meet, the streams end with an error event and
// [DONE], and the exit is 1.
struct Sigtermed {
  int exit_status = -1;
  std::string stderr_text;
  std::vector<int> status;
  std::vector<std::string> bodies;
  int refused_while_draining = 0;
};

Sigtermed sigterm_with_four_in_flight(const char* drain_timeout, bool twice = false) {
  Sigtermed r;
  const std::string dir = gpt_run();
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) return r;
  const pid_t pid = ::fork();
  if (pid < 0) return r;
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    const std::string bin = std::string(BITGRAD_BINARY_DIR) + "/bin/bitgrad";
    ::execl(bin.c_str(), bin.c_str(), "serve", dir.c_str(), "--port", "0", "--max-tokens", "2000", "--drain-timeout", drain_timeout,
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  const auto colon = line.rfind(':');
  if (colon == std::string::npos) return r;
  const int port = std::stoi(line.substr(colon + 1));
  r.status.assign(4, 0);
  r.bodies.assign(4, "");
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i)
    clients.emplace_back([&, i] {
      httplib::Client cl("127.0.0.1", port);
      cl.set_read_timeout(120);
      auto res = cl.Post("/v1/completions", completion("A", 2000, 1, 0, static_cast<std::uint64_t>(i), i % 2 == 1), "application/json");
      r.status[static_cast<std::size_t>(i)] = res ? res->status : -1;
      if (res) r.bodies[static_cast<std::size_t>(i)] = res->body;
    });
  bool running = false;
  for (int i = 0; i < 500 && !running; ++i) {
    httplib::Client cl("127.0.0.1", port);
    auto m = cl.Get("/metrics");
    running = m && m->body.find("bitgrad_active_requests 4") != std::string::npos;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(running) << "the four requests were in flight when the signal came";
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {  // a new request while draining: 503
    httplib::Client cl("127.0.0.1", port);
    auto res = cl.Post("/v1/completions", completion("A", 3, 0, 0, 1), "application/json");
    r.refused_while_draining = res ? res->status : -1;
  }
  if (twice) ::kill(pid, SIGTERM);  // a second signal: the drain ends now
  for (auto& t : clients) t.join();
  int ws = 0;
  if (::waitpid(pid, &ws, 0) == pid && WIFEXITED(ws)) r.exit_status = WEXITSTATUS(ws);
  while (::read(err[0], &c, 1) == 1) r.stderr_text += c;
  ::close(out[0]);
  ::close(err[0]);
  EXPECT_LT(connect_to(port), 0) << "no connections once stopped";
  return r;
}

TEST(ServeCli, SigtermAnswersTheRequestsInFlightAndExitsZero) {
  const Sigtermed r = sigterm_with_four_in_flight("120");
  EXPECT_EQ(r.exit_status, 0) << r.stderr_text;
  EXPECT_EQ(r.refused_while_draining, 503) << "a new request while draining";
  for (int i = 0; i < 4; ++i) {
    const std::string& body = r.bodies[static_cast<std::size_t>(i)];
    ASSERT_EQ(r.status[static_cast<std::size_t>(i)], 200) << "request " << i;
    if (i % 2 == 0) {
      EXPECT_EQ(json::parse(body)["usage"]["completion_tokens"], 2000) << "answered whole";
    } else {  // the stream ran to its finish event and [DONE]
      EXPECT_NE(body.find("\"finish_reason\":\"length\""), std::string::npos) << body.substr(body.size() > 300 ? body.size() - 300 : 0);
      EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
      EXPECT_EQ(std::count(body.begin(), body.end(), '\n') / 2, 2000 + 2) << "an event per token, the finish, [DONE]";
    }
  }
}

TEST(ServeCli, ASecondSignalEndsTheDrainAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const Sigtermed r = sigterm_with_four_in_flight("120", true);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60)) << "not the 120 s drain";
  EXPECT_EQ(r.exit_status, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("again: ending the requests in flight now"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("the drain was ended by the second signal"), std::string::npos) << r.stderr_text;
  for (int i = 1; i < 4; i += 2) {
    const std::string& body = r.bodies[static_cast<std::size_t>(i)];
    EXPECT_NE(body.find("\"finish_reason\":\"error\""), std::string::npos) << body.substr(body.size() > 300 ? body.size() - 300 : 0);
    EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  }
}

TEST(ServeCli, ADrainThatRunsOutOfTimeEndsTheStreamsWithAnError) {
  const Sigtermed r = sigterm_with_four_in_flight("0.05");
  EXPECT_EQ(r.exit_status, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("the drain ran out of time"), std::string::npos) << r.stderr_text;
  for (int i = 1; i < 4; i += 2) {
    const std::string& body = r.bodies[static_cast<std::size_t>(i)];
    EXPECT_NE(body.find("\"finish_reason\":\"error\""), std::string::npos) << body.substr(body.size() > 300 ? body.size() - 300 : 0);
    EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  }
}

TEST(ServeDecoder, SequencesSteppedTogetherGetTheLogitsOfEachAlone) {
  const infer::RunModel m = infer::load_run_model(gpt_run(), "serve", false);
  const std::vector<std::string> prompts = {"A", "Do not read", "Keep it simple, make it work", "e", "He who laughs last"};
  auto run = [&](bool together) {
    infer::Decoder d(m);
    std::vector<infer::Decoder::Sequence> seqs(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) seqs[i].tokens = m.corpus->encode(prompts[i], "prompt");
    std::vector<std::vector<float>> trace;
    for (int step = 0; step < 12; ++step) {
      std::vector<infer::Decoder::Sequence*> ptrs;
      for (std::size_t i = 0; i < seqs.size(); ++i)
        if (i != 2 || step >= 5) ptrs.push_back(&seqs[i]);  // the third joins at step 5
      std::vector<std::vector<float>> logits;
      if (together) {
        logits = d.next_logits(ptrs);
      } else {
        for (auto* p : ptrs) logits.push_back(d.next_logits({p})[0]);
      }
      for (std::size_t k = 0; k < ptrs.size(); ++k) {
        ptrs[k]->tokens.push_back(infer::draw_token(logits[k].data(), m.classes, 0.0, 0, 0.0));
        trace.push_back(logits[k]);
      }
    }
    return trace;
  };
  const auto together = run(true), alone = run(false);
  ASSERT_EQ(together.size(), alone.size());
  for (std::size_t i = 0; i < together.size(); ++i)
    ASSERT_EQ(std::memcmp(together[i].data(), alone[i].data(), together[i].size() * sizeof(float)), 0) << "row " << i;
}

TEST(ServeRequest, ParsesTheOpenAISubset) {
  serve::Limits l;
  const serve::CompletionRequest r =
      serve::parse_completion(R"({"prompt":"hi","max_tokens":7,"temperature":0,"top_k":3,"seed":18446744073709551615,"stop":["a","b"],"stream":true})", l);
  EXPECT_EQ(r.prompt, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0.0);
  EXPECT_EQ(r.top_k, 3);
  EXPECT_EQ(r.seed, 18446744073709551615ull);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  const serve::PredictRequest p = serve::parse_predict(R"({"inputs":[[1,2],[3,4.5]]})", Shape{2}, l);
  EXPECT_EQ(p.samples, 2);
  EXPECT_EQ(p.inputs, (std::vector<float>{1, 2, 3, 4.5f}));
  const serve::PredictRequest b = serve::parse_predict(R"({"inputs_base64":"AACAPwAAAEA="})", Shape{2}, l);  // 1.0f, 2.0f
  EXPECT_EQ(b.samples, 1);
  EXPECT_EQ(b.inputs, (std::vector<float>{1, 2}));
  EXPECT_THROW_MSG(serve::parse_predict(R"({"inputs_base64":"AACAPw=A"})", Shape{2}, l), "'inputs_base64' is not base64");
  // flat samples of a shape of several axes, and a whole number past 2^64 named as such
  const serve::PredictRequest flat = serve::parse_predict(R"({"inputs":[1,2,3,4,5,6]})", Shape{1, 2, 3}, l);
  EXPECT_EQ(flat.samples, 1);
  EXPECT_EQ(flat.inputs, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const serve::PredictRequest flats = serve::parse_predict(R"({"inputs":[[1,2,3,4,5,6],[6,5,4,3,2,1]]})", Shape{1, 2, 3}, l);
  EXPECT_EQ(flats.samples, 2);
  EXPECT_EQ(flats.inputs.size(), 12u);
  EXPECT_THROW_MSG(serve::parse_predict(R"({"inputs":[1,2,3,4,5]})", Shape{1, 2, 3}, l), "must hold 1 elements");
  EXPECT_THROW_MSG(serve::parse_completion(R"({"prompt":"A","seed":18446744073709551616})", l),
                   "got a whole number too large for 64 bits");
  // logprobs: absent or null is none, 0 the chosen token's alone, at most the limit
  EXPECT_EQ(serve::parse_completion(R"({"prompt":"A"})", l).logprobs, -1);
  EXPECT_EQ(serve::parse_completion(R"({"prompt":"A","logprobs":null})", l).logprobs, -1);
  EXPECT_EQ(serve::parse_completion(R"({"prompt":"A","logprobs":0})", l).logprobs, 0);
  EXPECT_EQ(serve::parse_completion(R"({"prompt":"A","logprobs":20})", l).logprobs, 20);
  EXPECT_THROW_MSG(serve::parse_completion(R"({"prompt":"A","logprobs":21})", l), "logprobs");
  EXPECT_THROW_MSG(serve::parse_completion(R"({"prompt":"A","logprobs":true})", l), "logprobs");
  EXPECT_TRUE(serve::parse_completion(R"({"prompt":"A","echo":true})", l).echo);
  EXPECT_THROW_MSG(serve::parse_completion(R"({"prompt":"A","echo":true,"stream":true})", l), "echo");
  EXPECT_THROW_MSG(serve::parse_completion(R"({"prompt":"A","echo":1})", l), "echo");
}

}  // namespace
}  // namespace bitgrad::test
