// A run directory's records (metrics.jsonl, trace.jsonl, ops.jsonl): the writers, and what a
// resume and a checkpoint do to them (cut back to the checkpoint, synced, measured).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bitgrad/error.hpp"
#include "bitgrad/fingerprint.hpp"
#include "bitgrad/io.hpp"
#include "store/run_dir.hpp"

namespace bitgrad::store {
namespace {
constexpr const char* kRecords[] = {"metrics.jsonl", "trace.jsonl", "ops.jsonl"};
}  // namespace

JsonLinesWriter RunDir::metrics() const { return JsonLinesWriter(file("metrics.jsonl"), LineFormat{{{"test_accuracy", "%.6f"}}}); }
JsonLinesWriter RunDir::step_trace() const { return JsonLinesWriter(file("trace.jsonl")); }
JsonLinesWriter RunDir::op_trace() const { return JsonLinesWriter(file("ops.jsonl")); }

void RunDir::clear_records() const {
  for (const char* f : kRecords)
    if (has(f)) ::unlink(file(f).c_str());
}

std::map<std::string, std::int64_t> RunDir::record_sizes() const {
  std::map<std::string, std::int64_t> sizes;
  for (const char* f : kRecords) {
    struct stat st {};
    if (::stat(file(f).c_str(), &st) == 0) sizes[f] = static_cast<std::int64_t>(st.st_size);
  }
  return sizes;
}

namespace {
std::string digest_of(const std::string& bytes) {
  Fingerprint f;
  f.add_bytes(bytes.data(), bytes.size());
  return f.digest().hex();
}
}  // namespace

std::map<std::string, std::string> RunDir::record_digests() const {
  std::map<std::string, std::string> d;
  for (const char* f : kRecords)
    if (has(f)) d[f] = digest_of(io::read_file(file(f)));
  return d;
}

std::map<std::string, std::string> RunDir::input_digests() const {
  std::map<std::string, std::string> d;
  if (has("vocabulary.json")) d["vocabulary.json"] = digest_of(io::read_file(vocabulary_path()));
  return d;
}

void RunDir::check_inputs(const std::map<std::string, std::string>& recorded, const std::string& checkpoint) const {
  for (const auto& [f, want] : recorded) {
    if (!has(f.c_str()))
      throw Error(who_ + ": " + file(f.c_str()) + " is missing; checkpoint " + checkpoint + " was written with it (xxh128 " + want + ")");
    const std::string got = digest_of(io::read_file(file(f.c_str())));
    if (got != want)
      throw Error(who_ + ": " + file(f.c_str()) + " changed since checkpoint " + checkpoint + " was written (xxh128 " + got +
                  ", recorded " + want + "): the tokens the model was trained on would decode to other text; restore the file");
  }
}

void RunDir::truncate_after(std::int64_t step, const std::map<std::string, std::int64_t>& expected,
                            const std::map<std::string, std::string>& digests) const {
  for (const auto& [f, bytes] : expected)
    if (!has(f.c_str()))
      throw Error(who_ + ": " + file(f.c_str()) + " is missing, but the checkpoint at step " + std::to_string(step) + " recorded " +
                  std::to_string(bytes) + " bytes of it");
  std::vector<std::pair<std::string, std::string>> keep;
  for (const char* f : kRecords) {
    if (!has(f)) continue;
    const std::string text = io::read_file(file(f));
    std::string kept;
    if (auto e = expected.find(f); e != expected.end()) {
      // The checkpoint says how many bytes were on disk when it was written: what follows is
      // of later steps (a kill can leave half a line there) and goes; what precedes must be
      // whole records of steps up to `step`.
      auto damaged = [&](const std::string& why) {
        return Error(who_ + ": " + file(f) + " " + why + " after the checkpoint at step " + std::to_string(step) + " was written (the checkpoint recorded " +
                     std::to_string(e->second) + " bytes, the file has " + std::to_string(text.size()) +
                     (why == "was cut short" ? "; a power loss or a full disk can do this" : "") + "): the run cannot continue with its records complete");
      };
      if (static_cast<std::int64_t>(text.size()) < e->second) throw damaged("was cut short");
      kept = text.substr(0, static_cast<std::size_t>(e->second));
      if (!kept.empty() && kept.back() != '\n') throw damaged("was changed");
      if (auto d = digests.find(f); d != digests.end() && digest_of(kept) != d->second) throw damaged("was changed");
      std::vector<Json> records;
      try {
        records = parse_json_lines(kept, who_, file(f));
      } catch (const Error&) {
        throw damaged("was changed");
      }
      for (const Json& r : records)
        if (!r.contains("step") || !r["step"].is_number_integer() || r["step"].get<std::int64_t>() > step) throw damaged("was changed");
    } else {
      // no recorded size (the initial checkpoint): keep the whole records of steps up to `step`
      std::size_t at = 0;
      while (at < text.size()) {
        const std::size_t nl = text.find('\n', at);
        if (nl == std::string::npos) break;  // half a line a kill left: of a later step
        const std::vector<Json> r = parse_json_lines(text.substr(at, nl + 1 - at), who_, file(f));
        if (!r[0].contains("step") || !r[0]["step"].is_number_integer())
          throw Error(who_ + ": " + file(f) + ": a record without an integer \"step\"");
        if (r[0]["step"].get<std::int64_t>() <= step) kept.append(text, at, nl + 1 - at);
        at = nl + 1;
      }
    }
    keep.emplace_back(f, std::move(kept));
  }
  for (const auto& [f, kept] : keep) io::write_file_atomic(file(f.c_str()), kept);
}

void RunDir::sync_records() const {
  for (const char* f : kRecords) {
    if (!has(f)) continue;
    const int fd = ::open(file(f).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw Error(who_ + ": cannot sync " + file(f) + " to disk: " + std::strerror(err));
    }
    ::close(fd);
  }
}

}  // namespace bitgrad::store
