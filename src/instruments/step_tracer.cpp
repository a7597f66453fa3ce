#include "instruments/step_tracer.hpp"

#include <algorithm>

#include "bitgrad/runtime.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad::instruments {

// The hash groups of a record in order (the batch's inputs and targets together, then each
// gradient, then each parameter), hashed one 64 KiB piece per slice.
struct StepTracer::Job final : kern::IdleWork {
  static constexpr std::size_t kSlice = 64 * 1024;

  StepRecord rec;  // step, epoch, batch, loss; names with empty digests to fill
  std::vector<std::vector<Tensor>> groups;
  std::vector<Digest128> digests;
  train::JsonLinesWriter* out = nullptr;  // idle mode: the last slice writes the record
  std::exception_ptr error;
  bool written = false;
  // position
  std::size_t g = 0, t = 0, at = 0;
  bool header_done = false;
  std::unique_ptr<Fingerprint> fp;

  // Hashes up to `budget` bytes; true while bytes remain.
  bool advance(std::size_t budget) {
    while (g < groups.size()) {
      if (!fp) fp = std::make_unique<Fingerprint>();
      if (t == groups[g].size()) {
        digests[g] = fp->digest();
        fp.reset();
        ++g, t = 0;
        continue;
      }
      const Tensor& x = groups[g][t];
      if (!header_done) {
        fp->add_header(x);
        header_done = true;
        at = 0;
      }
      std::size_t n = 0;
      const char* p = static_cast<const char*>(Fingerprint::element_bytes(x, n));
      const std::size_t k = std::min(budget, n - at);
      fp->add_bytes(p + at, k);
      at += k;
      budget -= k;
      if (at == n) ++t, header_done = false;
      if (budget == 0) return g < groups.size();
    }
    return false;
  }
  void finish_record() {
    std::size_t i = 0;
    rec.input = digests[i++];
    for (auto& [name, d] : rec.grads) d = groups[i].empty() ? Digest128{} : digests[i], ++i;
    for (auto& [name, d] : rec.params) d = digests[i++];
  }
  void write() {
    try {
      finish_record();
      out->write(step_record_json(rec));
      out->flush();
    } catch (...) {
      error = std::current_exception();
    }
    written = true;
  }
  bool slice() override {
    if (advance(kSlice)) return true;
    write();
    return false;
  }
};

namespace {

StepTracer::Mode default_mode() {
  if (num_threads() < available_cpus()) return StepTracer::Mode::thread;
  return num_threads() > 1 ? StepTracer::Mode::idle : StepTracer::Mode::inline_;
}

}  // namespace

const char* StepTracer::mode_name(Mode m) {
  switch (m) {
    case Mode::thread: return "thread";
    case Mode::idle: return "idle";
    case Mode::inline_: return "inline";
  }
  return "?";
}

StepTracer::StepTracer(train::JsonLinesWriter out) : StepTracer(std::move(out), default_mode()) {}

StepTracer::StepTracer(train::JsonLinesWriter out, Mode mode) : out_(std::move(out)), mode_(mode) {
  if (mode_ == Mode::thread) worker_ = std::thread([this] { loop(); });
}

StepTracer::~StepTracer() {
  try {
    wait();
  } catch (...) {
    // a write error surfaces through wait(); here the run is already ending
  }
  if (mode_ == Mode::thread) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
}

void StepTracer::submit(std::int64_t s, const train::Session& session, const train::Session::StepOut& step_out) {
  wait();
  auto j = std::make_unique<Job>();
  j->rec.step = s + 1;
  j->rec.epoch = step_out.batch.epoch;
  j->rec.batch = step_out.batch.index;
  j->rec.loss = step_out.loss;
  auto c = [](const Tensor& x) { return x.is_contiguous() ? x : x.contiguous_copy(); };
  j->groups.push_back({c(step_out.batch.x), c(step_out.batch.y)});
  for (const auto& [name, p] : session.params()) {
    const Tensor g = p.grad();
    j->groups.push_back(g.defined() ? std::vector<Tensor>{c(g)} : std::vector<Tensor>{});
    j->rec.grads.emplace_back(name, Digest128{});
  }
  for (const auto& [name, p] : session.params()) {
    j->groups.push_back({c(p)});
    j->rec.params.emplace_back(name, Digest128{});
  }
  j->digests.resize(j->groups.size());
  j->out = &out_;
  switch (mode_) {
    case Mode::inline_:
      while (j->slice()) {
      }
      if (j->error) std::rethrow_exception(j->error);
      return;
    case Mode::idle:
      job_ = std::move(j);
      kern::post_idle_work(job_.get());
      return;
    case Mode::thread: {
      std::lock_guard<std::mutex> l(mu_);
      job_ = std::move(j);
      busy_ = true;
    }
      cv_.notify_all();
      return;
  }
}

void StepTracer::wait() {
  std::exception_ptr e;
  if (mode_ == Mode::idle) {
    if (!job_) return;
    kern::finish_idle_work();
    e = job_->error;
    job_.reset();
  } else if (mode_ == Mode::thread) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !busy_; });
    e = error_;
    error_ = nullptr;
  }
  if (e) std::rethrow_exception(e);
}

void StepTracer::loop() {
  for (;;) {
    std::unique_ptr<Job> j;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return busy_ || stop_; });
      if (!busy_) return;
      j = std::move(job_);
    }
    while (j->slice()) {
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      error_ = j->error;
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace bitgrad::instruments
