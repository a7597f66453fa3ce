#include "instruments/step_tracer.hpp"

#include "bitgrad/runtime.hpp"
#include "instruments/group_hasher.hpp"
#include "kernels/thread_pool.hpp"

namespace bitgrad::instruments {

// The hash groups of a record in order (the batch's inputs and targets together, then each
// gradient, then each parameter), hashed one 64 KiB piece per slice, the rest at wait().
struct StepTracer::Job final : kern::IdleWork {
  static constexpr std::size_t kSlice = 64 * 1024;

  StepRecord rec;  // step, epoch, batch, loss; names with empty digests to fill
  std::unique_ptr<GroupHasher> hash;
  store::JsonLinesWriter* out = nullptr;  // idle mode: the last slice writes the record
  std::exception_ptr error;
  bool written = false;

  // What the idle slices left (none may run any more), on the kernel threads, then the record.
  void finish() {
    if (written) return;
    try {
      hash->finish_parallel();
    } catch (...) {
      error = std::current_exception();
      written = true;
      return;
    }
    write();
  }
  void finish_record() {
    const auto& groups = hash->groups();
    const auto& digests = hash->digests();
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
    if (hash->advance(kSlice)) return true;
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

StepTracer::StepTracer(store::JsonLinesWriter out) : StepTracer(std::move(out), default_mode()) {}

StepTracer::StepTracer(store::JsonLinesWriter out, Mode mode) : out_(std::move(out)), mode_(mode) {
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
  std::vector<std::vector<Tensor>> groups;
  groups.push_back({c(step_out.batch.x), c(step_out.batch.y)});
  for (const auto& [name, p] : session.params()) {
    const Tensor g = p.grad();
    groups.push_back(g.defined() ? std::vector<Tensor>{c(g)} : std::vector<Tensor>{});
    j->rec.grads.emplace_back(name, Digest128{});
  }
  for (const auto& [name, p] : session.params()) {
    groups.push_back({c(p)});
    j->rec.params.emplace_back(name, Digest128{});
  }
  j->hash = std::make_unique<GroupHasher>(std::move(groups));
  j->out = &out_;
  switch (mode_) {
    case Mode::inline_:
      while (j->slice()) {
      }
      if (j->error) std::rethrow_exception(j->error);
      return;
    case Mode::idle:
      job_ = std::move(j);
      posted_to_ = current_context().backend_ptr();
      kern::post_idle_work(*posted_to_, job_.get());
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
    kern::take_back_idle_work(*posted_to_);
    posted_to_.reset();
    job_->finish();
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
