// The step trace (trace.jsonl) at the least cost to the step (bench/trace_bench.cpp). The
// record of step t (fingerprints of its batch, its gradients and the updated parameters) is
// computed while step t+1 runs its forward and backward passes, and the session waits for it
// (Session::set_before_update) before the next optimizer update changes the parameters:
// * `thread`: when the kernel threads leave a CPU free, on a thread of its own;
// * `idle`:   otherwise, in 64 KiB slices run by the kernel threads between parallel regions
//             (kern::post_idle_work), the rest by the training thread when it waits;
// * `inline`: with one thread on one CPU, at once.
// A tensor's hash is one sequential stream whoever computes it; records are written in step
// order. The file is the same in every mode.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bitgrad/runtime.hpp"
#include "bitgrad/session.hpp"
#include "instruments/trace.hpp"

namespace bitgrad::instruments {

class StepTracer {
 public:
  enum class Mode { thread, idle, inline_ };
  explicit StepTracer(store::JsonLinesWriter out);  // the mode from the thread and CPU counts
  StepTracer(store::JsonLinesWriter out, Mode mode);
  ~StepTracer();  // writes what was submitted
  StepTracer(const StepTracer&) = delete;
  StepTracer& operator=(const StepTracer&) = delete;

  // Takes (shared) references to step `s`'s tensors; waits for the previous record first.
  void submit(std::int64_t s, const train::Session& session, const train::Session::StepOut& out);
  // Blocks until every submitted record is written; rethrows a write error.
  void wait();
  Mode mode() const { return mode_; }
  static const char* mode_name(Mode m);

  struct Job;  // the tensors of one record and the hashing state

 private:
  void loop();

  store::JsonLinesWriter out_;
  const Mode mode_;
  std::unique_ptr<Job> job_;  // thread: waiting for the worker; idle: posted or done
  // idle: the context whose pool the job was posted to (kept alive until it is taken back)
  std::shared_ptr<kern::Backend> posted_to_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace bitgrad::instruments
