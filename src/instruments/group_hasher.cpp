#include "instruments/group_hasher.hpp"

#include <algorithm>
#include <atomic>

#include "kernels/thread_pool.hpp"

namespace bitgrad::instruments {

GroupHasher::GroupHasher(std::vector<std::vector<Tensor>> groups) : groups_(std::move(groups)), digests_(groups_.size()) {}

bool GroupHasher::advance(std::size_t budget) {
  while (g_ < groups_.size()) {
    if (!fp_) fp_ = std::make_unique<Fingerprint>();
    if (t_ == groups_[g_].size()) {
      digests_[g_] = fp_->digest();
      fp_.reset();
      ++g_, t_ = 0;
      continue;
    }
    const Tensor& x = groups_[g_][t_];
    if (!header_done_) {
      fp_->add_header(x);
      header_done_ = true;
      at_ = 0;
    }
    std::size_t n = 0;
    const char* p = static_cast<const char*>(Fingerprint::element_bytes(x, n));
    const std::size_t k = std::min(budget, n - at_);
    fp_->add_bytes(p + at_, k);
    at_ += k;
    budget -= k;
    if (at_ == n) ++t_, header_done_ = false;
    if (budget == 0) return g_ < groups_.size();
  }
  return false;
}

void GroupHasher::finish_parallel() {
  std::vector<std::size_t> order, bytes;
  for (std::size_t k = g_; k < groups_.size(); ++k) {
    std::size_t b = 0;
    for (const Tensor& x : groups_[k]) b += static_cast<std::size_t>(x.numel()) * dtype_size(x.dtype());
    order.push_back(k);
    bytes.push_back(b);
  }
  // largest first, so that no thread is left with a big group at the end
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return bytes[a - g_] > bytes[b - g_]; });
  std::atomic<std::size_t> next{0};
  kern::parallel_for(kern::pool_threads(), 1, [&](std::int64_t, std::int64_t) {
    // the counter decides who hashes a group, never what goes into its stream
    for (std::size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < order.size();) hash_rest(order[i]);
  });
  g_ = groups_.size(), t_ = 0, at_ = 0, header_done_ = false;
  fp_.reset();
}

void GroupHasher::hash_rest(std::size_t k) {
  std::unique_ptr<Fingerprint> own;
  Fingerprint* f = fp_.get();
  std::size_t t0 = t_, at0 = at_;
  bool header0 = header_done_;
  if (k != g_ || !f) {
    own = std::make_unique<Fingerprint>();
    f = own.get(), t0 = 0, at0 = 0, header0 = false;
  }
  for (std::size_t i = t0; i < groups_[k].size(); ++i) {
    const Tensor& x = groups_[k][i];
    std::size_t from = 0;
    if (i == t0 && header0) from = at0;
    else f->add_header(x);
    std::size_t n = 0;
    const char* p = static_cast<const char*>(Fingerprint::element_bytes(x, n));
    f->add_bytes(p + from, n - from);
  }
  digests_[k] = f->digest();
}

}  // namespace bitgrad::instruments
