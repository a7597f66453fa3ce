// Storage: a 64-byte aligned buffer shared by a tensor and its views. Buffers come from a
// size-class pool, so a training step reuses the activations of the previous one instead
// of calling the system allocator. The version counter is bumped by in-place writes so
// autograd can refuse to use a saved tensor that was modified after it was saved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "bitgrad/device.hpp"

namespace bitgrad {

class Storage {
 public:
  static std::shared_ptr<Storage> allocate(std::size_t bytes);
  // A buffer someone else owns (a NumPy array, a DLPack producer), shared without a copy: not
  // pooled and not counted in memory::bytes_in_use; `owner` is released with the storage.
  static std::shared_ptr<Storage> wrap(void* data, std::size_t bytes, std::shared_ptr<void> owner);
  bool external() const { return owner_ != nullptr; }
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // where the buffer lives (CPU only today; a GPU backend allocates its own)
  Device device() const { return device_; }
  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  std::uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  Storage(void* data, std::size_t bytes, std::size_t capacity) : data_(data), bytes_(bytes), capacity_(capacity) {}
  void* data_;
  std::size_t bytes_;
  std::size_t capacity_;  // size class actually held
  std::uint64_t version_ = 0;
  Device device_ = Device::cpu;
  std::shared_ptr<void> owner_;  // wrap(): the buffer's owner
  std::uint64_t budget_ = 0;             // the serial of the memory::Budget it was charged to (0: none)
  const void* budget_thread_ = nullptr;  // and its thread's (a storage freed elsewhere gives nothing back)
};

namespace memory {
std::size_t bytes_in_use();     // bytes held by live storages
std::size_t peak_bytes_in_use();
void reset_peak();
std::size_t bytes_cached();     // bytes parked in the pool
void release_cached();          // returns pooled buffers to the system
double available_bytes();       // what the system can still give (MemAvailable; 0 when unknown)

// A bound on the storage this thread takes while the scope lives (an ONNX import: its
// initializers, folded constants and load-time forward). An allocation that would hold more than
// `bytes` at once throws Error before any memory is taken, naming what() and the sizes; freed
// storage is given back. Scopes nest: an allocation counts in every enclosing one.
class Budget {
 public:
  Budget(double bytes, std::string what);
  ~Budget();
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;
  void set_what(std::string what);  // the step now running, for the error
  double held() const { return held_; }
  double peak() const { return peak_; }  // the most held at once

 private:
  friend class bitgrad::Storage;
  double limit_, held_ = 0, peak_ = 0;
  std::string what_;
  std::uint64_t serial_;
  Budget* parent_;
};
}  // namespace memory

}  // namespace bitgrad
