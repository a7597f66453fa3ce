// Size-class pool for tensor buffers. Classes: multiples of 64 bytes up to 4 KiB, then four
// classes per power of two. Freed buffers are parked per class and reused; the pool never
// holds more than kMaxCachedBytes. Which buffer is reused can never reach a result: every
// op writes its whole output before it is read.
#include "bitgrad/storage.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "bitgrad/checked.hpp"
#include "bitgrad/error.hpp"
#include "platform/thread_state.hpp"

namespace bitgrad {
namespace {

constexpr std::size_t kAlign = 64;
constexpr std::size_t kMaxCachedBytes = std::size_t(4) << 30;

std::size_t size_class(std::size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes <= 4096) return (bytes + kAlign - 1) / kAlign * kAlign;
  std::size_t p = 4096;
  while (p * 2 < bytes) p *= 2;  // p < bytes <= 2p
  std::size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

struct Pool {
  std::mutex mu;
  std::map<std::size_t, std::vector<void*>> free;  // ordered by class; never iterated for results
  std::size_t cached = 0;
  std::size_t in_use = 0;
  std::size_t peak = 0;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: storages may die during static teardown
  return *p;
}

// the innermost memory::Budget of this thread, and the serials that tell a charged storage's
// budgets apart from later ones
std::uint64_t next_budget_serial() {
  static std::mutex mu;
  static std::uint64_t next = 1;
  std::lock_guard<std::mutex> lock(mu);
  return next++;
}

std::string human(double bytes) {
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (u < 5 && bytes >= 1024.0) {
    bytes /= 1024.0;
    ++u;
  }
  char b[32];
  std::snprintf(b, sizeof b, u == 0 ? "%.0f %s" : "%.3g %s", bytes, unit[u]);
  return b;
}

}  // namespace

std::shared_ptr<Storage> Storage::allocate(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(kMaxElements))  // a size from checked arithmetic never is; a raw one may be
    throw Error("storage: " + std::to_string(bytes) + " bytes is more than 2^56, the most a tensor may span");
  const std::size_t cap = size_class(bytes);
  for (memory::Budget* b = thread_state().budget; b; b = b->parent_)  // checked before any memory is taken
    if (b->held_ + static_cast<double>(cap) > b->limit_)
      throw Error(b->what_ + ": needs more than the " + human(b->limit_) + " of memory it may take (" + human(b->held_) + " held, " +
                  human(static_cast<double>(cap)) + " more asked)");
  for (memory::Budget* b = thread_state().budget; b; b = b->parent_) {
    b->held_ += static_cast<double>(cap);
    if (b->held_ > b->peak_) b->peak_ = b->held_;
  }
  void* ptr = nullptr;
  Pool& p = pool();
  {
    std::lock_guard<std::mutex> lock(p.mu);
    auto it = p.free.find(cap);
    if (it != p.free.end() && !it->second.empty()) {
      ptr = it->second.back();
      it->second.pop_back();
      p.cached -= cap;
    }
    p.in_use += cap;
    if (p.in_use > p.peak) p.peak = p.in_use;
  }
  if (!ptr) {
    ptr = std::aligned_alloc(kAlign, cap);
    if (!ptr) {
      std::lock_guard<std::mutex> lock(p.mu);
      p.in_use -= cap;
      throw Error("storage: out of memory allocating " + std::to_string(bytes) + " bytes");
    }
  }
  auto s = std::shared_ptr<Storage>(new Storage(ptr, bytes, cap));
  if (thread_state().budget) {
    s->budget_ = thread_state().budget->serial_;
    s->budget_thread_ = &thread_state().budget;
  }
  return s;
}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t bytes, std::shared_ptr<void> owner) {
  BITGRAD_CHECK(owner != nullptr, "storage", "wrap needs the owner of the buffer");
  auto s = std::shared_ptr<Storage>(new Storage(data, bytes, 0));
  s->owner_ = std::move(owner);
  return s;
}

Storage::~Storage() {
  if (owner_) return;  // owner_ (a member) releases the buffer after this body
  // given back to the budgets of this thread that were charged for it (not those opened since)
  if (budget_ && budget_thread_ == &thread_state().budget)
    for (memory::Budget* b = thread_state().budget; b; b = b->parent_)
      if (b->serial_ <= budget_) b->held_ -= static_cast<double>(capacity_);
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mu);
  p.in_use -= capacity_;
  if (p.cached + capacity_ <= kMaxCachedBytes) {
    p.free[capacity_].push_back(data_);
    p.cached += capacity_;
  } else {
    std::free(data_);
  }
}

namespace memory {
std::size_t bytes_in_use() {
  std::lock_guard<std::mutex> lock(pool().mu);
  return pool().in_use;
}
std::size_t peak_bytes_in_use() {
  std::lock_guard<std::mutex> lock(pool().mu);
  return pool().peak;
}
void reset_peak() {
  std::lock_guard<std::mutex> lock(pool().mu);
  pool().peak = pool().in_use;
}
std::size_t bytes_cached() {
  std::lock_guard<std::mutex> lock(pool().mu);
  return pool().cached;
}
void release_cached() {
  std::lock_guard<std::mutex> lock(pool().mu);
  for (auto& [cap, v] : pool().free) {
    for (void* ptr : v) std::free(ptr);
    v.clear();
  }
  pool().cached = 0;
}

double available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024.0;
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<double>(pages) * static_cast<double>(size) : 0.0;
}

Budget::Budget(double bytes, std::string what) : limit_(bytes), what_(std::move(what)), serial_(next_budget_serial()), parent_(thread_state().budget) {
  thread_state().budget = this;
}

Budget::~Budget() { thread_state().budget = parent_; }

void Budget::set_what(std::string what) { what_ = std::move(what); }
}  // namespace memory

}  // namespace bitgrad
