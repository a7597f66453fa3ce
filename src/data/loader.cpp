// The sampler, batch assembly with augmentations, and the loader. Workers build whole batches
// (batch g = epoch * batches_per_epoch + index) up to `prefetch` ahead; next() hands them out
// in order. What a batch holds depends only on (dataset, options, epoch, index).
#include <cxxabi.h>

#include <condition_variable>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "bitgrad/data.hpp"
#include "kernels/thread_pool.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::data {

std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch) {
  if (shuffle) return rng::Stream(seed, "shuffle").sub(static_cast<std::uint64_t>(epoch)).permutation(n);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

namespace {

std::int64_t batches_in(std::int64_t n, const LoaderOptions& o) {
  return o.drop_last ? n / o.batch_size : (n + o.batch_size - 1) / o.batch_size;
}

// Crop offsets dy, dx in [0, 2p] and the flip of sample `id`: draws 3 id, 3 id + 1, 3 id + 2 of
// (seed, "augment").sub(epoch).
void augment_sample(const Augment& a, const Shape& s, const rng::Stream& st, std::int64_t id, const float* in, float* out) {
  const std::int64_t C = s[0], H = s[1], W = s[2], p = a.crop_padding;
  const std::uint64_t base = static_cast<std::uint64_t>(id) * 3;
  const std::int64_t dy = p > 0 ? static_cast<std::int64_t>(st.below(base, static_cast<std::uint64_t>(2 * p + 1))) : p;
  const std::int64_t dx = p > 0 ? static_cast<std::int64_t>(st.below(base + 1, static_cast<std::uint64_t>(2 * p + 1))) : p;
  const bool flip = a.hflip && st.below(base + 2, 2) == 1;
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t i = 0; i < H; ++i)
      for (std::int64_t j = 0; j < W; ++j) {
        const std::int64_t si = i + dy - p, sj0 = j + dx - p;
        const std::int64_t sj = flip ? W - 1 - sj0 : sj0;
        out[(c * H + i) * W + j] = (si >= 0 && si < H && sj >= 0 && sj < W) ? in[(c * H + si) * W + sj] : 0.0f;
      }
}

}  // namespace

std::pair<std::int64_t, std::int64_t> shard_rows(std::int64_t rows, std::int64_t leaf_rows, int world, int rank) {
  const std::int64_t leaves = (rows + leaf_rows - 1) / leaf_rows;
  auto row = [&](std::int64_t leaf) { return std::min(rows, leaf * leaf_rows); };
  return {row(rank * leaves / world), row((rank + 1) * leaves / world)};
}

Batch make_batch(const Dataset& ds, const LoaderOptions& o, const std::vector<std::int64_t>& order, std::int64_t epoch,
                 std::int64_t index, bool use_kernel_threads) {
  const std::int64_t n = ds.size();
  const std::int64_t rows = std::min(o.batch_size, n - index * o.batch_size);
  BITGRAD_CHECK(rows > 0, "data loader", "batch ", index, " of epoch ", epoch, " is past the end of the data");
  BITGRAD_CHECK(o.world >= 1 && o.rank >= 0 && o.rank < o.world && o.leaf_rows > 0, "data loader", "rank ", o.rank, " of ", o.world,
                " with leaves of ", o.leaf_rows, " samples");
  const auto [first, last] = o.shard_of ? o.shard_of(rows) : shard_rows(rows, o.leaf_rows, o.world, o.rank);
  const std::int64_t start = index * o.batch_size + first;  // the shard's first sample in the epoch order
  const std::int64_t B = last - first;
  const Shape ss = ds.sample_shape();
  const std::int64_t sx = ss.numel();
  Shape xs{B};
  for (std::int64_t d : ss) xs.push_back(d);
  Batch b;
  b.epoch = epoch;
  b.index = index;
  b.rows = rows;
  b.first = first;
  b.x = Tensor::empty(xs, DType::f32);
  float* px = const_cast<float*>(b.x.data<float>());
  const bool cls = ds.num_classes() > 0;
  Shape ys{B};
  for (std::int64_t d : ds.target_shape()) ys.push_back(d);
  b.y = Tensor::empty(ys, cls ? DType::i64 : DType::f32);
  const std::int64_t sy = ds.target_shape().numel();
  const bool aug = o.augment.active();
  BITGRAD_CHECK(!aug || ss.ndim() == 3, "data loader", "augmentations need image samples [C, H, W], got ", ss.str());
  rng::Stream ast = rng::Stream(o.seed, "augment").sub(static_cast<std::uint64_t>(epoch));
  // samples [r0, r1); the first error by sample is kept, so it does not depend on the split
  std::exception_ptr err;
  std::int64_t err_at = B;
  std::mutex err_mu;
  auto fill = [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> tmp(aug ? static_cast<std::size_t>(sx) : 0);
    for (std::int64_t r = r0; r < r1; ++r) {
      try {
        const std::int64_t id = order[static_cast<std::size_t>(start + r)];
        float* xr = px + r * sx;
        std::int64_t* lab = cls ? const_cast<std::int64_t*>(b.y.data<std::int64_t>()) + r * sy : nullptr;
        float* yr = cls ? nullptr : const_cast<float*>(b.y.data<float>()) + r * sy;
        if (aug) {
          ds.get(id, tmp.data(), lab, yr);
          augment_sample(o.augment, ss, ast, id, tmp.data(), xr);
        } else {
          ds.get(id, xr, lab, yr);
        }
      } catch (const abi::__forced_unwind&) {
        throw;  // a thread ended by its runtime (pthread_exit: Python's, at shutdown) must unwind
      } catch (...) {
        std::lock_guard<std::mutex> lock(err_mu);
        if (r < err_at) err = std::current_exception(), err_at = r;
        return;
      }
    }
  };
  if (use_kernel_threads) kern::parallel_for(B, 16, fill);
  else fill(0, B);
  if (err) std::rethrow_exception(err);
  return b;
}

struct DataLoader::State {
  std::mutex mu;
  std::condition_variable cv_work, cv_ready;
  std::int64_t deliver = 0;   // global number of the next batch to hand out
  std::int64_t next_job = 0;  // global number of the next batch to build
  std::map<std::int64_t, Batch> ready;  // keyed by batch number; looked up, never iterated
  // by epoch; a future, so that a worker shuffles a new epoch outside the lock while batches
  // of the current one are still handed out
  using Order = std::shared_ptr<const std::vector<std::int64_t>>;
  std::map<std::int64_t, std::shared_future<Order>> orders;
  std::exception_ptr error;
  std::int64_t error_at = -1;
  bool stop = false;
  std::vector<std::thread> threads;
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> ds, LoaderOptions o) : ds_(std::move(ds)), o_(o), st_(std::make_unique<State>()) {
  BITGRAD_CHECK(ds_ && ds_->size() > 0, "data loader", "the dataset is empty");
  BITGRAD_CHECK(o_.batch_size > 0, "data loader", "batch size must be positive, got ", o_.batch_size);
  BITGRAD_CHECK(o_.batch_size <= ds_->size(), "data loader", "batch size ", o_.batch_size, " is larger than the dataset (",
                ds_->size(), " samples: ", ds_->describe(), ")");
  BITGRAD_CHECK(o_.workers >= 0 && o_.workers <= 256, "data loader", "workers must be in [0, 256], got ", o_.workers);
  BITGRAD_CHECK(o_.prefetch >= 1, "data loader", "prefetch must be >= 1, got ", o_.prefetch);
  seek(0, 0);
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->stop = true;
  }
  st_->cv_work.notify_all();
  for (auto& t : st_->threads) t.join();
}

std::int64_t DataLoader::batches_per_epoch() const { return batches_in(ds_->size(), o_); }
std::int64_t DataLoader::epoch() const { return st_->deliver / batches_per_epoch(); }
std::int64_t DataLoader::index() const { return st_->deliver % batches_per_epoch(); }

void DataLoader::seek(std::int64_t epoch, std::int64_t index) {
  BITGRAD_CHECK(epoch >= 0 && index >= 0 && index < batches_per_epoch(), "data loader", "cannot seek to batch ", index, " of epoch ",
                epoch, " (", batches_per_epoch(), " batches per epoch)");
  {
    std::lock_guard<std::mutex> lock(st_->mu);
    st_->stop = true;
  }
  st_->cv_work.notify_all();
  for (auto& t : st_->threads) t.join();
  st_ = std::make_unique<State>();
  st_->deliver = st_->next_job = epoch * batches_per_epoch() + index;
  State* st = st_.get();
  const std::int64_t bpe = batches_per_epoch();
  const std::int64_t window = static_cast<std::int64_t>(o_.prefetch) * (o_.workers > 0 ? o_.workers : 1);
  for (int w = 0; w < o_.workers; ++w) {
    st->threads.emplace_back([this, st, bpe, window] {
      for (;;) {
        std::int64_t job;
        std::shared_future<State::Order> order;
        std::promise<State::Order> make_order;  // set by this worker when it creates the entry
        bool shuffle_here = false;
        {
          std::unique_lock<std::mutex> lock(st->mu);
          st->cv_work.wait(lock, [&] { return st->stop || st->next_job < st->deliver + window; });
          if (st->stop) return;
          job = st->next_job++;
          const std::int64_t ep = job / bpe;
          auto it = st->orders.find(ep);
          if (it == st->orders.end()) {
            it = st->orders.emplace(ep, make_order.get_future().share()).first;
            shuffle_here = true;
            st->orders.erase(st->orders.begin(), st->orders.lower_bound(st->deliver / bpe));
          }
          order = it->second;
        }
        Batch b;
        std::exception_ptr err;
        try {
          if (shuffle_here) {
            try {
              make_order.set_value(std::make_shared<const std::vector<std::int64_t>>(epoch_order(ds_->size(), o_.shuffle, o_.seed, job / bpe)));
            } catch (...) {
              make_order.set_exception(std::current_exception());
            }
          }
          b = make_batch(*ds_, o_, *order.get(), job / bpe, job % bpe);
        } catch (const abi::__forced_unwind&) {
          throw;
        } catch (...) {
          err = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(st->mu);
          if (err) {
            if (!st->error || job < st->error_at) {
              st->error = err;
              st->error_at = job;
            }
          } else {
            st->ready.emplace(job, std::move(b));
          }
        }
        st->cv_ready.notify_all();
      }
    });
  }
}

Batch DataLoader::next() {
  State* st = st_.get();
  const std::int64_t bpe = batches_per_epoch();
  if (o_.workers == 0) {
    const std::int64_t g = st->deliver++;
    auto it = st->orders.find(g / bpe);
    if (it == st->orders.end()) {
      st->orders.clear();
      std::promise<State::Order> p;
      p.set_value(std::make_shared<const std::vector<std::int64_t>>(epoch_order(ds_->size(), o_.shuffle, o_.seed, g / bpe)));
      it = st->orders.emplace(g / bpe, p.get_future().share()).first;
    }
    return make_batch(*ds_, o_, *it->second.get(), g / bpe, g % bpe, true);
  }
  std::unique_lock<std::mutex> lock(st->mu);
  const std::int64_t g = st->deliver;
  st->cv_ready.wait(lock, [&] { return st->ready.count(g) > 0 || (st->error && st->error_at <= g); });
  if (!st->ready.count(g)) std::rethrow_exception(st->error);
  Batch b = std::move(st->ready.at(g));
  st->ready.erase(g);
  st->deliver = g + 1;
  lock.unlock();
  st->cv_work.notify_all();
  return b;
}

}  // namespace bitgrad::data
