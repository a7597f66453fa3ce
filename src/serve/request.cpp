// Parsing and checking the request bodies (request.hpp). Every refusal names the field.
#include "serve/request.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

namespace bitgrad::serve {
namespace {
using json = nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& message, int status = 400) {
  throw RequestError(status, field, field.empty() ? message : "'" + field + "' " + message);
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: {  // a whole number past 2^64 is parsed as a float: not "a fraction"
      const double x = v.get<double>();
      return std::isfinite(x) && std::floor(x) == x && std::fabs(x) >= 9223372036854775808.0 ? "a whole number too large for 64 bits"
                                                                                              : "a number with a fraction";
    }
    default: return "a number";
  }
}

json parse_object(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) bad("", "the body is not JSON");
  if (!j.is_object()) bad("", std::string("the body must be a JSON object, got ") + type_name(j));
  return j;
}

void only(const json& j, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : j.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) bad(key, "is not a field of this request (known: " + [&] {
      std::string s;
      for (const char* k : known) s += (s.empty() ? "" : ", ") + std::string(k);
      return s;
    }() + ")");
  }
}

std::string get_string(const json& v, const std::string& field, std::int64_t max_bytes) {
  if (!v.is_string()) bad(field, std::string("must be a string, got ") + type_name(v));
  const auto& s = v.get_ref<const std::string&>();
  if (static_cast<std::int64_t>(s.size()) > max_bytes)
    bad(field, "is " + std::to_string(s.size()) + " bytes long, more than the server's limit of " + std::to_string(max_bytes), 413);
  return s;
}

std::int64_t get_int(const json& v, const std::string& field, std::int64_t lo, std::int64_t hi) {
  if (!v.is_number_integer()) bad(field, std::string("must be an integer, got ") + type_name(v));
  const bool neg = v.is_number_integer() && !v.is_number_unsigned() && v.get<std::int64_t>() < 0;
  if (!neg && v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
  const std::int64_t x = neg ? v.get<std::int64_t>() : static_cast<std::int64_t>(v.get<std::uint64_t>());
  if (x < lo || x > hi) bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
  return x;
}

int b64(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string base64_decode(const std::string& s, const std::string& field) {
  if (s.size() % 4 != 0) bad(field, "is not base64: its length " + std::to_string(s.size()) + " is not a multiple of 4");
  std::string out;
  out.reserve(s.size() / 4 * 3);
  for (std::size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s[i + static_cast<std::size_t>(k)];
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else if (pad > 0 || (v[k] = b64(c)) < 0) {
        bad(field, "is not base64: character " + std::to_string(i + static_cast<std::size_t>(k)) + " is not of its alphabet");
      }
    }
    const std::uint32_t w = (static_cast<std::uint32_t>(v[0]) << 18) | (static_cast<std::uint32_t>(v[1]) << 12) |
                            (static_cast<std::uint32_t>(v[2]) << 6) | static_cast<std::uint32_t>(v[3]);
    out.push_back(static_cast<char>((w >> 16) & 0xff));
    if (pad < 2) out.push_back(static_cast<char>((w >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(w & 0xff));
  }
  return out;
}

// The numbers of v, which must have the shape dims[d..] (nested arrays), appended to out.
void flatten(const json& v, const std::vector<std::int64_t>& dims, std::size_t d, const std::string& path, std::vector<float>& out) {
  if (d == dims.size()) {
    if (!v.is_number()) bad(path, std::string("must be a number, got ") + type_name(v));
    const double x = v.get<double>();
    const auto f = static_cast<float>(x);
    if (!std::isfinite(f)) bad(path, "is not a finite f32: " + v.dump());
    out.push_back(f);
    return;
  }
  if (!v.is_array()) bad(path, std::string("must be an array of ") + std::to_string(dims[d]) + ", got " + type_name(v));
  if (static_cast<std::int64_t>(v.size()) != dims[d])
    bad(path, "must hold " + std::to_string(dims[d]) + " elements (the model's input shape), got " + std::to_string(v.size()), 422);
  for (std::size_t i = 0; i < v.size(); ++i) flatten(v[i], dims, d + 1, path + "[" + std::to_string(i) + "]", out);
}

}  // namespace

CompletionRequest parse_completion(std::string_view body, const Limits& limits) {
  const json j = parse_object(body);
  only(j, {"model", "prompt", "max_tokens", "temperature", "top_k", "seed", "stop", "stream", "logprobs", "echo"});
  CompletionRequest r;
  if (j.contains("model")) r.model = get_string(j["model"], "model", 1024);
  if (!j.contains("prompt")) bad("prompt", "is missing: give the text to continue");
  r.prompt = get_string(j["prompt"], "prompt", limits.max_prompt);
  if (r.prompt.empty()) bad("prompt", "is empty; give at least one character");
  if (j.contains("max_tokens")) r.max_tokens = get_int(j["max_tokens"], "max_tokens", 0, limits.max_tokens);
  if (j.contains("temperature")) {
    const json& t = j["temperature"];
    if (!t.is_number()) bad("temperature", std::string("must be a number, got ") + type_name(t));
    r.temperature = t.get<double>();
    if (!(r.temperature >= 0 && r.temperature <= 1e6)) bad("temperature", "must be in [0, 1e6], got " + t.dump());
  }
  if (j.contains("top_k")) r.top_k = get_int(j["top_k"], "top_k", 0, 1 << 24);
  if (j.contains("seed")) {
    const json& s = j["seed"];
    if (!s.is_number_unsigned()) bad("seed", std::string("must be a whole number in [0, 2^64), got ") + (s.is_number_integer() ? s.dump() : type_name(s)));
    r.seed = s.get<std::uint64_t>();
  }
  if (j.contains("stop")) {
    const json& s = j["stop"];
    if (s.is_string()) {
      r.stop.push_back(get_string(s, "stop", limits.max_stop_bytes));
    } else if (s.is_array()) {
      if (static_cast<std::int64_t>(s.size()) > limits.max_stops)
        bad("stop", "holds " + std::to_string(s.size()) + " strings, more than " + std::to_string(limits.max_stops));
      for (std::size_t i = 0; i < s.size(); ++i) r.stop.push_back(get_string(s[i], "stop[" + std::to_string(i) + "]", limits.max_stop_bytes));
    } else if (!s.is_null()) {
      bad("stop", std::string("must be a string or an array of strings, got ") + type_name(s));
    }
    for (std::size_t i = 0; i < r.stop.size(); ++i)
      if (r.stop[i].empty()) bad(r.stop.size() == 1 && s.is_string() ? "stop" : "stop[" + std::to_string(i) + "]", "is empty");
  }
  if (j.contains("stream")) {
    if (!j["stream"].is_boolean()) bad("stream", std::string("must be true or false, got ") + type_name(j["stream"]));
    r.stream = j["stream"].get<bool>();
  }
  if (j.contains("logprobs") && !j["logprobs"].is_null()) r.logprobs = get_int(j["logprobs"], "logprobs", 0, limits.max_logprobs);
  if (j.contains("echo")) {
    if (!j["echo"].is_boolean()) bad("echo", std::string("must be true or false, got ") + type_name(j["echo"]));
    r.echo = j["echo"].get<bool>();
    if (r.echo && r.stream) bad("echo", "is not served with \"stream\": true; ask for the whole answer");
  }
  return r;
}

PredictRequest parse_predict(std::string_view body, const Shape& sample_shape, const Limits& limits) {
  const json j = parse_object(body);
  only(j, {"model", "inputs", "inputs_base64"});
  PredictRequest r;
  if (j.contains("model")) r.model = get_string(j["model"], "model", 1024);
  const bool nested = j.contains("inputs"), b64s = j.contains("inputs_base64");
  if (nested == b64s) bad(nested ? "inputs_base64" : "inputs", nested ? "and 'inputs' are both given; give one" : "is missing: give 'inputs' or 'inputs_base64'");
  std::vector<std::int64_t> dims(sample_shape.begin(), sample_shape.end());
  std::int64_t numel = 1;
  for (std::int64_t d : dims) numel *= d;
  if (nested) {
    const json& in = j["inputs"];
    // [N, shape...] or one sample [shape...]: told apart by the depth of the first element
    std::size_t depth = 0;
    for (const json* p = &in; p->is_array() && !p->empty(); p = &(*p)[0]) ++depth;
    std::vector<std::int64_t> want = dims;
    // flat samples: [numel] is one sample, [[numel], ...] several, when the shape has
    // more than one axis (a 784-value image of [1, 28, 28] was "must hold 1 elements")
    const bool flat = dims.size() > 1 && in.is_array() && !in.empty() &&
                      ((depth == 1 && static_cast<std::int64_t>(in.size()) == numel) ||
                       (depth == 2 && in[0].is_array() && static_cast<std::int64_t>(in[0].size()) == numel));
    if (flat) want = {numel};
    if ((flat && depth == 2) || (!flat && depth == dims.size() + 1) || !in.is_array() || in.empty()) {
      if (!in.is_array()) bad("inputs", std::string("must be an array, got ") + type_name(in));
      if (in.empty()) bad("inputs", "is empty");
      if (static_cast<std::int64_t>(in.size()) > limits.max_samples)
        bad("inputs", "holds " + std::to_string(in.size()) + " samples, more than the server's limit of " + std::to_string(limits.max_samples), 413);
      want.insert(want.begin(), static_cast<std::int64_t>(in.size()));
      r.samples = static_cast<std::int64_t>(in.size());
    } else {
      r.samples = 1;
    }
    r.inputs.reserve(static_cast<std::size_t>(r.samples * numel));
    flatten(in, want, 0, "inputs", r.inputs);
  } else {
    const json& in = j["inputs_base64"];
    if (!in.is_string()) bad("inputs_base64", std::string("must be a string, got ") + type_name(in));
    const std::size_t max_chars = static_cast<std::size_t>(limits.max_samples * numel * 4 / 3 + 8);
    if (in.get_ref<const std::string&>().size() > max_chars)
      bad("inputs_base64", "holds more than the server's limit of " + std::to_string(limits.max_samples) + " samples", 413);
    const std::string bytes = base64_decode(in.get<std::string>(), "inputs_base64");
    const auto per = static_cast<std::size_t>(numel) * 4;
    if (bytes.empty() || per == 0 || bytes.size() % per != 0)
      bad("inputs_base64", "decodes to " + std::to_string(bytes.size()) + " bytes, not a positive multiple of " + std::to_string(per) +
                               " (samples of " + sample_shape.str() + " little-endian f32)", 422);
    r.samples = static_cast<std::int64_t>(bytes.size() / per);
    if (r.samples > limits.max_samples)
      bad("inputs_base64", "holds " + std::to_string(r.samples) + " samples, more than the server's limit of " + std::to_string(limits.max_samples), 413);
    r.inputs.resize(bytes.size() / 4);
    for (std::size_t i = 0; i < r.inputs.size(); ++i) {
      std::uint32_t w = 0;
      for (int k = 3; k >= 0; --k) w = (w << 8) | static_cast<std::uint8_t>(bytes[4 * i + static_cast<std::size_t>(k)]);
      float f;
      static_assert(sizeof f == sizeof w);
      __builtin_memcpy(&f, &w, sizeof f);
      if (!std::isfinite(f)) bad("inputs_base64", "holds a value that is not finite at element " + std::to_string(i));
      r.inputs[i] = f;
    }
  }
  return r;
}

std::string error_body(int status, const std::string& field, const std::string& message) {
  json e = {{"message", message},
            {"type", status == 503 ? "overloaded" : status >= 500 ? "server_error" : "invalid_request_error"},
            {"param", field.empty() ? json(nullptr) : json(field)},
            {"code", status}};
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace bitgrad::serve
