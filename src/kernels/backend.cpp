// Execution contexts: ExecContext / ExecScope (bitgrad/runtime.hpp) and their kernel side,
// kern::Backend. The calling thread's backend is a thread-local pointer set by ExecScope (and
// by a pool for its workers); no scope means the default context, built on first use.
#include "kernels/backend.hpp"

#include "bitgrad/error.hpp"
#include "kernels/thread_pool.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
namespace kern {
namespace {


Backend& default_backend() { return default_context().backend(); }

}  // namespace

Backend::Backend(ExecContext* o, int threads, Isa i) : owner(o), pool(make_pool_state(this, threads)) {
  if (!cpu_supports(i)) throw Error("ExecContext: code path " + isa_unavailable(i));
  isa.store(i, std::memory_order_relaxed);
  resolve();
}

Backend::~Backend() = default;

void Backend::resolve() {
  const Isa i = isa.load(std::memory_order_relaxed);
  if (perturb.on) {
    f32.store(&perturbed_table_f32(), std::memory_order_relaxed);
    f64.store(&perturbed_table_f64(), std::memory_order_relaxed);
    return;
  }
  f32.store(substitute ? substitute : &table_f32(i), std::memory_order_relaxed);
  f64.store(&table_f64(i), std::memory_order_relaxed);
}

void Backend::set_isa(Isa i) {
  if (!cpu_supports(i)) throw Error("set_isa: " + isa_unavailable(i));
  isa.store(i, std::memory_order_relaxed);
  resolve();
}

Backend& current_backend() {
  Backend* b = thread_state().backend;
  return b ? *b : default_backend();
}

void bind_thread(Backend* b) { thread_state().backend = b; }

const Table<float>& context_table_f32() { return *current_backend().f32.load(std::memory_order_relaxed); }
const Table<double>& context_table_f64() { return *current_backend().f64.load(std::memory_order_relaxed); }

void set_substitute_f32(const Table<float>* t) {
  Backend& b = current_backend();
  b.substitute = t;
  b.resolve();
}
const Table<float>* substitute_f32() { return current_backend().substitute; }

}  // namespace kern

const char* device_name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
  }
  return "?";
}

ExecContext::ExecContext(int threads, Isa isa) : backend_(std::make_shared<kern::Backend>(this, threads, isa)) {}
ExecContext::~ExecContext() = default;

Device ExecContext::device() const { return backend_->device; }
Isa ExecContext::isa() const { return backend_->isa.load(std::memory_order_relaxed); }
void ExecContext::set_isa(Isa isa) { backend_->set_isa(isa); }
int ExecContext::threads() const { return kern::pool_threads(*backend_->pool); }
namespace {
constexpr int kMaxThreads = 1024;  // far past any machine's cores; 10^9 was accepted
}  // namespace

void ExecContext::set_threads(int n) {
  if (n < 1 || n > kMaxThreads)
    throw Error("set_num_threads: expected 1 to " + std::to_string(kMaxThreads) + " threads, got " + std::to_string(n));
  kern::pool_resize(*backend_->pool, n);
}

ExecScope::ExecScope(ExecContext& ctx) : before_(thread_state().backend) { thread_state().backend = &ctx.backend(); }
ExecScope::~ExecScope() { thread_state().backend = before_; }

ExecContext& default_context() {
  // never destroyed: its pool's threads must not be joined during static destruction, while
  // other statics (and other threads) may still call kernels
  static ExecContext* d = new ExecContext(0, default_isa());
  return *d;
}

ExecContext& current_context() { return *kern::current_backend().owner; }

}  // namespace bitgrad
