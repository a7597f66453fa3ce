#include "fuzz/targets.hpp"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>

#include "bitgrad/data.hpp"
#include "bitgrad/instruments.hpp"
#include "bitgrad/io.hpp"
#include "bitgrad/onnx.hpp"
#include "bitgrad/train.hpp"
#include "serve/request.hpp"
#include "train/run_dir.hpp"

namespace bitgrad::fuzz {
namespace {

// A scratch directory of this process (tmpfs when there is one: the file targets write an
// input per run).
const std::string& scratch() {
  static const std::string dir = [] {
    struct stat st {};
    const std::string base = ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    std::string d = base + "/bitgrad-fuzz-" + std::to_string(::getpid());
    io::make_dirs(d);
    return d;
  }();
  return dir;
}

std::string bytes(const std::uint8_t* data, std::size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// bad input must be answered with bitgrad::Error; anything else escapes to libFuzzer
template <class F>
void expect_errors_only(F f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace

void safetensors(const std::uint8_t* data, std::size_t size) {
  const std::string b = bytes(data, size);
  expect_errors_only([&] { io::parse_safetensors(b, "fuzz.safetensors", io::Checksum::if_present); });
  expect_errors_only([&] { io::parse_safetensors(b, "fuzz.safetensors", io::Checksum::required); });
}

void idx(const std::uint8_t* data, std::size_t size) {
  const std::string dir = scratch() + "/idx";
  static const bool labels = [&] {  // two valid labels beside the fuzzed images
    io::make_dirs(dir);
    const std::string raw("\x00\x00\x08\x01\x00\x00\x00\x02\x03\x07", 10);
    std::FILE* f = std::fopen((dir + "/t10k-labels-idx1-ubyte").c_str(), "wb");
    std::fwrite(raw.data(), 1, raw.size(), f);
    std::fclose(f);
    return std::system(("gzip -nf '" + dir + "/t10k-labels-idx1-ubyte'").c_str()) == 0;
  }();
  (void)labels;
  // gzip bytes as they are; anything else is taken as a raw IDX file and gzipped here, so that
  // mutations reach the IDX header checks and not only gzip's own
  const std::string images = dir + "/t10k-images-idx3-ubyte.gz";
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    io::write_file_atomic(images, bytes(data, size));
  } else {
    gzFile w = gzopen(images.c_str(), "wb1");
    if (!w) return;
    if (size > 0) gzwrite(w, data, static_cast<unsigned>(size));
    gzclose(w);
  }
  expect_errors_only([&] {
    auto ds = data::fashion_mnist(dir, false);
    std::vector<float> x(784);
    std::int64_t label = 0;
    for (std::int64_t i = 0; i < ds->size(); ++i) ds->get(i, x.data(), &label, nullptr);
  });
}

void config(const std::uint8_t* data, std::size_t size) {
  const std::string text = bytes(data, size);
  expect_errors_only([&] {
    const train::Config c = train::parse_config(text, "fuzz.toml");
    (void)train::resolved_toml(c);
    (void)train::config_hash(c);
    // the model against a dataset that reads no file (the configuration names any path)
    if (c.data.dataset == train::DatasetKind::adder || c.data.dataset == train::DatasetKind::synthetic) {
      auto ds = train::train_dataset(c);
      (void)train::build_model(c, *ds);
    }
  });
}

void csv(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return;
  const std::string path = scratch() + "/data.csv";
  io::write_file_atomic(path, bytes(data + 1, size - 1));
  // the first byte picks the options: header, label column or targets, non-finite values
  const int label = data[0] & 4 ? (data[0] >> 4) - 1 : -1;
  expect_errors_only([&] {
    auto ds = data::csv_dataset(path, data[0] & 1, label, (data[0] >> 4) % 3 + 1, data[0] & 2);
    std::vector<float> x(static_cast<std::size_t>(ds->sample_shape().numel())), y(static_cast<std::size_t>(ds->target_shape().numel()) + 1);
    std::int64_t l = 0;
    for (std::int64_t i = 0; i < ds->size(); ++i) ds->get(i, x.data(), &l, y.data());
  });
}

void records(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return;
  // the first byte picks the file; the others are a valid run's (written once)
  const std::string dir = scratch() + "/run";
  static const std::string manifest = R"({"bitgrad": {"version": "0.1.0", "numerics": 3}, "run": {"kind": "train", "config": "a.toml", "threads": 1, "workers": 0, "accumulate": 1, "seed": 1}})" "\n";
  static const std::string metrics = "{\"step\": 1, \"epoch\": 0, \"batch\": 0, \"loss\": 2.5, \"lr\": 0.1}\n{\"step\": 1, \"epoch\": 0, \"test_loss\": \"NaN\"}\n";
  static const std::string trace = "{\"step\": 1, \"epoch\": 0, \"batch\": 0, \"input\": \"00\", \"loss\": \"0x3f800000\"}\n";
  io::make_dirs(dir);
  const char* names[] = {"manifest.json", "metrics.jsonl", "trace.jsonl"};
  const std::string* texts[] = {&manifest, &metrics, &trace};
  const int pick = data[0] % 3;
  for (int k = 0; k < 3; ++k) io::write_file_atomic(dir + "/" + names[k], k == pick ? bytes(data + 1, size - 1) : *texts[k]);
  const train::RunDir run = train::RunDir::open(dir, "fuzz");
  expect_errors_only([&] { (void)run.manifest(); });
  expect_errors_only([&] {
    for (const auto& r : run.read_lines("metrics.jsonl"))
      for (const auto& [k, v] : r.items()) (void)train::json_number(v);
  });
  expect_errors_only([&] { (void)instruments::write_report({dir}, scratch() + "/report.html", true); });
  expect_errors_only([&] { run.truncate_after(1, {{"metrics.jsonl", static_cast<std::int64_t>(data[0] >> 2) * 8}}); });
}

// a request body of `bitgrad serve`: as a completion, and as a prediction of samples [3] and [2, 2]
void serve_request(const std::uint8_t* data, std::size_t size) {
  const std::string b = bytes(data, size);
  serve::Limits limits;
  limits.max_tokens = 100, limits.max_prompt = 256, limits.max_samples = 16;
  expect_errors_only([&] { serve::parse_completion(b, limits); });
  expect_errors_only([&] { serve::parse_predict(b, Shape{3}, limits); });
  expect_errors_only([&] { serve::parse_predict(b, Shape{2, 2}, limits); });
}

void onnx(const std::uint8_t* data, std::size_t size) {
  const std::string b = bytes(data, size);
  expect_errors_only([&] { bitgrad::onnx::check_bytes(b, "fuzz.onnx"); });
}

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"safetensors", &safetensors}, {"idx", &idx}, {"config", &config}, {"csv", &csv}, {"records", &records}, {"serve_request", &serve_request},
      {"onnx", &onnx}};
  return t;
}

}  // namespace bitgrad::fuzz
