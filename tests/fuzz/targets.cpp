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
#include "bitgrad/ops.hpp"
#include "bitgrad/optim.hpp"
#include "bitgrad/storage.hpp"
#include "bitgrad/train.hpp"
#include "onnx/proto.hpp"
#include "serve/http.hpp"
#include "serve/request.hpp"
#include "support/onnx_protos.hpp"
#include "store/run_dir.hpp"

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
  const store::RunDir run = store::RunDir::open(dir, "fuzz");
  expect_errors_only([&] { (void)run.manifest(); });
  expect_errors_only([&] {
    for (const auto& r : run.read_lines("metrics.jsonl"))
      for (const auto& [k, v] : r.items()) (void)store::json_number(v);
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

// the head of an HTTP request (serve/http.hpp), under the server's limits and small ones: a
// refusal is one of the documented statuses with a reason; a complete head lies inside the bytes
void http_head(const std::uint8_t* data, std::size_t size) {
  const std::string b = bytes(data, size);
  serve::HttpLimits small;
  small.max_target = 64, small.max_head = 256, small.max_headers = 4, small.max_body = 1000;
  for (const serve::HttpLimits& l : {serve::HttpLimits{}, small}) {
    const serve::HttpHead h = serve::parse_head(b, l);
    if (h.state == serve::HttpHead::State::refused) {
      const int st = h.status;
      if (h.why.empty() || !(st == 400 || st == 411 || st == 413 || st == 414 || st == 417 || st == 431 || st == 505)) std::abort();
    } else if (h.state == serve::HttpHead::State::complete) {
      if (h.bytes > b.size() || h.content_length < 0 || h.content_length > l.max_body || h.request.path.empty() || h.request.path[0] != '/')
        std::abort();
    }
  }
}

// Structure-aware: the bytes choose a valid-looking ONNX model (an input of 1 to 4 dims, a chain
// of up to 12 nodes with the parameters, attributes and axes the bytes pick, now and then an op
// with arguments it may refuse), which is loaded under a 256 MiB budget and trained one step
// (forward, the sum of squares, backward, SGD). Errors are answers; anything else is a finding.
void onnx_model(const std::uint8_t* data, std::size_t size) {
  using namespace bitgrad::test;
  std::size_t at = 0;
  auto next = [&](int mod) { const int v = at < size ? data[at] : 0; ++at; return mod > 0 ? v % mod : v; };
  std::vector<std::int64_t> shape;
  const int rank = 1 + next(4);
  for (int i = 0; i < rank; ++i) shape.push_back(1 + next(6));
  const std::vector<std::int64_t> in_shape = shape;
  std::vector<onnx::NodeProto> nodes;
  std::vector<onnx::TensorProto> inits;
  auto values = [&](std::int64_t n) {
    std::vector<float> v;
    for (std::int64_t k = 0; k < n; ++k) v.push_back(static_cast<float>(next(256) - 128) / 64.0f);
    return v;
  };
  auto param = [&](const std::string& name, const std::vector<std::int64_t>& dims) {
    std::int64_t n = 1;
    for (std::int64_t d : dims) n *= d;
    inits.push_back(floats(name, dims, values(n)));
    return name;
  };
  auto ints_attr = [](onnx::NodeProto& n, const char* name, std::vector<std::int64_t> v) {
    onnx::AttributeProto a;
    a.name = name;
    a.type = onnx::kAttrInts;
    a.ints = std::move(v);
    n.attribute.push_back(a);
  };
  auto int_attr = [](onnx::NodeProto& n, const char* name, std::int64_t v) {
    onnx::AttributeProto a;
    a.name = name;
    a.type = onnx::kAttrInt;
    a.i = v;
    n.attribute.push_back(a);
  };
  std::string cur = "x";
  const int count = 1 + next(12);
  for (int k = 0; k < count; ++k) {
    const std::string out = "v" + std::to_string(k), id = std::to_string(k);
    const auto r = static_cast<std::int64_t>(shape.size());
    const std::int64_t axis = next(static_cast<int>(r));
    switch (next(16)) {
      case 0: nodes.push_back(node("Relu", "relu" + id, {cur}, {out})); break;
      case 1: nodes.push_back(node("Tanh", "tanh" + id, {cur}, {out})); break;
      case 2: nodes.push_back(node("Sigmoid", "sigmoid" + id, {cur}, {out})); break;
      case 3: nodes.push_back(node("Add", "add" + id, {cur, param("b" + id, {shape.back()})}, {out})); break;
      case 4: nodes.push_back(node("Mul", "mul" + id, {cur, param("m" + id, shape)}, {out})); break;
      case 5: {
        const std::int64_t n = 1 + next(8);
        nodes.push_back(node("MatMul", "matmul" + id, {cur, param("w" + id, {shape.back(), n})}, {out}));
        shape.back() = n;
        break;
      }
      case 6: {
        std::vector<std::int64_t> perm, moved;
        for (std::int64_t d = 0; d < r; ++d) perm.push_back((d + axis) % r);
        for (std::int64_t p : perm) moved.push_back(shape[static_cast<std::size_t>(p)]);
        onnx::NodeProto n = node("Transpose", "transpose" + id, {cur}, {out});
        ints_attr(n, "perm", perm);
        nodes.push_back(n);
        shape = moved;
        break;
      }
      case 7: {
        std::int64_t rest = 1;
        for (std::size_t d = 1; d < shape.size(); ++d) rest *= shape[d];
        inits.push_back(int64s("shape" + id, {2}, {shape[0], -1}));
        nodes.push_back(node("Reshape", "reshape" + id, {cur, "shape" + id}, {out}));
        shape = {shape[0], rest};
        break;
      }
      case 8: {
        onnx::NodeProto n = node("Softmax", "softmax" + id, {cur}, {out});
        int_attr(n, "axis", axis - (next(2) ? r : 0));
        nodes.push_back(n);
        break;
      }
      case 9: {
        const bool keep = next(2);
        inits.push_back(int64s("axes" + id, {1}, {axis}));
        onnx::NodeProto n = node(next(2) ? "ReduceSum" : "ReduceMean", "reduce" + id, {cur, "axes" + id}, {out});
        if (n.op_type == "ReduceMean") {  // opset 17: ReduceMean takes axes as an attribute
          n.input.pop_back();
          ints_attr(n, "axes", {axis});
        }
        int_attr(n, "keepdims", keep);
        nodes.push_back(n);
        if (keep) shape[static_cast<std::size_t>(axis)] = 1;
        else if (shape.size() > 1) shape.erase(shape.begin() + axis);
        else shape = {};
        break;
      }
      case 10: {
        onnx::NodeProto n = node("LayerNormalization", "norm" + id, {cur, param("g" + id, {shape.back()}), param("beta" + id, {shape.back()})}, {out});
        int_attr(n, "axis", -1);
        nodes.push_back(n);
        break;
      }
      case 11: {
        onnx::NodeProto n = node("Concat", "concat" + id, {cur, cur}, {out});
        int_attr(n, "axis", axis);
        nodes.push_back(n);
        shape[static_cast<std::size_t>(axis)] *= 2;
        break;
      }
      case 12: {
        const std::int64_t start = next(static_cast<int>(shape[static_cast<std::size_t>(axis)]));
        inits.push_back(int64s("starts" + id, {1}, {start}));
        inits.push_back(int64s("ends" + id, {1}, {std::numeric_limits<std::int64_t>::max()}));
        inits.push_back(int64s("sl_axes" + id, {1}, {axis}));
        nodes.push_back(node("Slice", "slice" + id, {cur, "starts" + id, "ends" + id, "sl_axes" + id}, {out}));
        shape[static_cast<std::size_t>(axis)] -= start;
        break;
      }
      case 13: {
        inits.push_back(int64s("unsq" + id, {1}, {axis}));
        nodes.push_back(node("Unsqueeze", "unsqueeze" + id, {cur, "unsq" + id}, {out}));
        shape.insert(shape.begin() + axis, 1);
        break;
      }
      case 14: {  // an op of the table with this one input and no attributes: its own checks answer
        const std::vector<std::string> ops = onnx::op_types();
        nodes.push_back(node(ops[static_cast<std::size_t>(next(0) * 256 + next(0)) % ops.size()], "any" + id, {cur}, {out}));
        k = count;  // the shape is the op's: the chain ends here
        break;
      }
      default: {
        if (shape.size() != 2) {
          nodes.push_back(node("Neg", "neg" + id, {cur}, {out}));
          break;
        }
        const std::int64_t n = 1 + next(8);
        const bool trans = next(2);
        onnx::NodeProto g = node("Gemm", "gemm" + id, {cur, param("gw" + id, trans ? std::vector<std::int64_t>{n, shape[1]} : std::vector<std::int64_t>{shape[1], n}), param("gc" + id, {n})}, {out});
        int_attr(g, "transB", trans);
        nodes.push_back(g);
        shape[1] = n;
        break;
      }
    }
    cur = out;
    if (shape.empty()) break;
  }
  nodes.back().output = {"y"};
  const std::string model = onnx::serialize_model(model_of(nodes, inits, {info("x", in_shape)}));
  onnx::LoadOptions o;
  o.memory_bytes = 256.0 * 1024 * 1024;
  expect_errors_only([&] {
    auto g = onnx::load_bytes(model, "fuzz.onnx", o);
    std::int64_t n = 1;
    for (std::int64_t d : in_shape) n *= d;
    std::vector<float> xs(static_cast<std::size_t>(n));
    for (std::size_t k = 0; k < xs.size(); ++k) xs[k] = static_cast<float>(k % 7) * 0.25f - 0.75f;
    const Tensor y = g->forward(Tensor::from<float>(xs, Shape(in_shape)), nn::Context{});
    if (!is_floating(y.dtype())) return;
    const Tensor loss = sum(mul(y, y));
    if (g->named_parameters().empty()) return;
    loss.backward();
    optim::Sgd sgd(g->named_parameters(), optim::SgdOptions{});
    sgd.step(0.01);
  });
}

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"safetensors", &safetensors}, {"idx", &idx}, {"config", &config}, {"csv", &csv}, {"records", &records}, {"serve_request", &serve_request},
      {"onnx", &onnx}, {"http_head", &http_head}, {"onnx_model", &onnx_model}};
  return t;
}

}  // namespace bitgrad::fuzz
