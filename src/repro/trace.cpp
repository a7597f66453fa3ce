// Fingerprint traces as JSON lines (docs/cli.md, "Traces").
#include <cmath>
#include <cstdio>
#include <cstring>

#include "bitgrad/repro.hpp"

#ifndef BITGRAD_SOURCE_DIR
#define BITGRAD_SOURCE_DIR ""
#endif

namespace bitgrad::repro {

std::string hex32(std::uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

std::string site_string(const char* file, int line) {
  std::string f = file ? file : "";
  const std::string root = std::string(BITGRAD_SOURCE_DIR) + "/";
  if (root.size() > 1 && f.rfind(root, 0) == 0) f = f.substr(root.size());
  return f + ":" + std::to_string(line);
}

namespace {
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else {
      o += c;
    }
  }
  return o;
}
}  // namespace

StepTrace::StepTrace(const std::string& path, bool append) : out_(path, append ? std::ios::app : std::ios::trunc), path_(path) {
  if (!out_) throw Error("trace: cannot write " + path);
}

void StepTrace::write(const StepRecord& r) {
  std::uint32_t bits;
  std::memcpy(&bits, &r.loss, 4);
  out_ << "{\"step\": " << r.step << ", \"epoch\": " << r.epoch << ", \"batch\": " << r.batch << ", \"input\": \"" << r.input.hex()
       << "\", \"loss\": \"" << hex32(bits) << "\", \"grad\": [";
  for (std::size_t i = 0; i < r.grads.size(); ++i)
    out_ << (i ? ", " : "") << "[\"" << esc(r.grads[i].first) << "\", \"" << r.grads[i].second.hex() << "\"]";
  out_ << "], \"param\": [";
  for (std::size_t i = 0; i < r.params.size(); ++i)
    out_ << (i ? ", " : "") << "[\"" << esc(r.params[i].first) << "\", \"" << r.params[i].second.hex() << "\"]";
  out_ << "]}\n";
  out_.flush();
  if (!out_) throw Error("trace: cannot write " + path_);
}

OpTrace::OpTrace(const std::string& path, bool append) : out_(path, append ? std::ios::app : std::ios::trunc), path_(path) {
  if (!out_) throw Error("trace: cannot write " + path);
}

void OpTrace::begin_step(std::int64_t step) {
  step_ = step;
  seq_ = 0;
}

void OpTrace::record(const char* op, const Tensor& value, const char* file, int line, const std::string& label, bool backward, int input) {
  out_ << "{\"step\": " << step_ << ", \"seq\": " << seq_++ << ", \"phase\": \"" << (backward ? "backward" : "forward") << "\", \"op\": \""
       << esc(op) << "\"";
  if (backward) out_ << ", \"input\": " << input;
  out_ << ", \"label\": \"" << esc(label) << "\", \"site\": \"" << esc(site_string(file, line)) << "\", \"shape\": \"" << value.shape().str()
       << "\", \"hash\": \"" << fingerprint(value).hex() << "\"}\n";
}

void OpTrace::flush() {
  out_.flush();
  if (!out_) throw Error("trace: cannot write " + path_);
}

}  // namespace bitgrad::repro
