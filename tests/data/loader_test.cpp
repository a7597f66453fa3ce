// Datasets, the sampler and the loader: contract T3 (batches bit-identical for any number of
// workers), the sampler's golden values, resume positions, augmentations, errors.
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "bitgrad/data.hpp"
#include "bitgrad/fingerprint.hpp"
#include "support/fashion.hpp"
#include "support/test_util.hpp"

namespace bitgrad::test {
namespace {

using data::DataLoader;
using data::LoaderOptions;

Digest128 first_batches(std::shared_ptr<const data::Dataset> ds, LoaderOptions o, int n) {
  DataLoader l(ds, o);
  Fingerprint fp;
  for (int i = 0; i < n; ++i) {
    data::Batch b = l.next();
    fp.add(b.x);
    fp.add(b.y);
    std::int64_t pos[2] = {b.epoch, b.index};
    fp.add_bytes(pos, sizeof pos);
  }
  return fp.digest();
}

TEST(Sampler, GoldenPermutation) {
  // Fisher-Yates on (42, "shuffle").sub(epoch); the values come from an independent Python
  // implementation of the documented streams (tests/golden/gen_sampler_golden.py)
  EXPECT_EQ(data::epoch_order(10, true, 42, 0), (std::vector<std::int64_t>{3, 7, 0, 2, 6, 8, 5, 4, 1, 9}));
  EXPECT_EQ(data::epoch_order(10, true, 42, 1), (std::vector<std::int64_t>{8, 4, 0, 6, 2, 9, 7, 5, 3, 1}));
  EXPECT_EQ(data::epoch_order(4, false, 42, 3), (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(Loader, BatchesDoNotDependOnTheWorkers) {
  auto ds = data::adder_dataset(1000, 10, 7);
  LoaderOptions o;
  o.batch_size = 64;
  o.seed = 11;
  RuntimeGuard guard;
  set_num_threads(1);
  const Digest128 want = first_batches(ds, o, 40);  // crosses two epoch boundaries (15 batches each)
  {
    // without workers the samples are split over the kernel threads
    for (int t : thread_counts()) {
      set_num_threads(t);
      EXPECT_EQ(first_batches(ds, o, 40).hex(), want.hex()) << "workers=0 threads=" << t;
    }
  }
  for (int w : {1, 2, 4}) {
    o.workers = w;
    for (int pf : {1, 3}) {
      o.prefetch = pf;
      EXPECT_EQ(first_batches(ds, o, 40).hex(), want.hex()) << "workers=" << w << " prefetch=" << pf;
    }
  }
}

TEST(Loader, FashionMnistBatchesDoNotDependOnTheWorkers) {
  BITGRAD_NEED_FASHION_MNIST();
  auto ds = data::fashion_mnist(data::kFashionMnistDir, true, true);
  LoaderOptions o;
  o.batch_size = 128;
  o.seed = 3;
  o.augment.crop_padding = 2;
  o.augment.hflip = true;
  RuntimeGuard guard;
  set_num_threads(1);
  const Digest128 want = first_batches(ds, o, 12);
  for (int t : {2, 3, 8}) {  // augmented samples split over the kernel threads
    set_num_threads(t);
    EXPECT_EQ(first_batches(ds, o, 12).hex(), want.hex()) << "workers=0 threads=" << t;
  }
  for (int w : {1, 2, 4}) {
    o.workers = w;
    EXPECT_EQ(first_batches(ds, o, 12).hex(), want.hex()) << "workers=" << w;
  }
}

TEST(Loader, SeekContinuesTheSameSequence) {
  auto ds = data::adder_dataset(300, 4, 1);
  LoaderOptions o;
  o.batch_size = 32;  // 9 batches an epoch
  o.seed = 5;
  for (int w : {0, 3}) {
    o.workers = w;
    DataLoader a(ds, o);
    std::vector<data::Batch> seq;
    for (int i = 0; i < 25; ++i) seq.push_back(a.next());
    DataLoader b(ds, o);
    b.seek(1, 4);  // batch 13 of the sequence
    EXPECT_EQ(b.epoch(), 1);
    for (int i = 13; i < 25; ++i) {
      data::Batch x = b.next();
      EXPECT_EQ(fingerprint({x.x, x.y}), fingerprint({seq[static_cast<std::size_t>(i)].x, seq[static_cast<std::size_t>(i)].y}))
          << "batch " << i << " workers=" << w;
      EXPECT_EQ(x.index, i % 9);
    }
  }
}

TEST(Loader, AugmentationIsKeyedBySampleNotPosition) {
  // an unshuffled epoch and a shuffled one hold the same sample at different positions; with the
  // same (seed, epoch) its augmented image is the same
  class Img : public data::Dataset {
   public:
    std::int64_t size() const override { return 6; }
    Shape sample_shape() const override { return Shape{1, 4, 4}; }
    std::int64_t num_classes() const override { return 2; }
    void get(std::int64_t i, float* x, std::int64_t* l, float*) const override {
      for (int k = 0; k < 16; ++k) x[k] = static_cast<float>(i * 16 + k);
      *l = i % 2;
    }
    std::string describe() const override { return "img"; }
  } ds;
  LoaderOptions o;
  o.batch_size = 6;
  o.seed = 9;
  o.augment.crop_padding = 1;
  o.augment.hflip = true;
  auto ident = data::epoch_order(6, false, 9, 0), perm = data::epoch_order(6, true, 9, 0);
  data::Batch a = data::make_batch(ds, o, ident, 0, 0), b = data::make_batch(ds, o, perm, 0, 0);
  for (int r = 0; r < 6; ++r) {
    const std::int64_t id = perm[static_cast<std::size_t>(r)];
    std::vector<float> xa(a.x.data<float>() + id * 16, a.x.data<float>() + id * 16 + 16);
    std::vector<float> xb(b.x.data<float>() + r * 16, b.x.data<float>() + r * 16 + 16);
    EXPECT_EQ(xa, xb) << "sample " << id;
  }
  data::Batch c = data::make_batch(ds, o, ident, 1, 0);
  EXPECT_NE(fingerprint(a.x), fingerprint(c.x)) << "another epoch, other crops";
}

TEST(Loader, Errors) {
  auto ds = data::adder_dataset(10, 2, 1);
  LoaderOptions o;
  o.batch_size = 11;
  try {
    DataLoader l(ds, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch size 11 is larger than the dataset (10 samples"), std::string::npos) << e.what();
  }
  o.batch_size = 5;
  DataLoader l(ds, o);
  EXPECT_THROW(l.seek(0, 2), Error);
}

TEST(FashionMnist, ReadsTheDebianFiles) {
  BITGRAD_NEED_FASHION_MNIST();
  auto tr = data::fashion_mnist(data::kFashionMnistDir, true, false);
  auto te = data::fashion_mnist(data::kFashionMnistDir, false, false);
  EXPECT_EQ(tr->size(), 60000);
  EXPECT_EQ(te->size(), 10000);
  EXPECT_EQ(tr->num_classes(), 10);
  std::vector<float> x(784);
  std::int64_t label = -1;
  tr->get(0, x.data(), &label, nullptr);
  EXPECT_EQ(label, 9) << "the first training image is an ankle boot";
  for (float v : x) ASSERT_TRUE(v >= 0.0f && v <= 1.0f);
}

TEST(FashionMnist, MissingAndCorruptFilesAreClearErrors) {
  try {
    data::fashion_mnist("/nonexistent/dir", true);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos) << e.what();
  }
  BITGRAD_NEED_FASHION_MNIST();
  const std::string dir = ::testing::TempDir() + "/fmnist_corrupt";
  std::system(("mkdir -p " + dir).c_str());
  // labels fine, images truncated
  std::system(("cp " + std::string(data::kFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz " + dir + "/").c_str());
  std::system(("zcat " + std::string(data::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz | head -c 100000 | gzip > " + dir +
               "/t10k-images-idx3-ubyte.gz").c_str());
  try {
    data::fashion_mnist(dir, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// An IDX file gzipped, from its header's fields and `body` bytes of data.
void write_idx_gz(const std::string& path, std::uint32_t magic, std::vector<std::uint32_t> dims, std::size_t body) {
  std::string raw;
  auto be = [&](std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) raw += static_cast<char>((v >> s) & 0xff);
  };
  be(magic);
  for (std::uint32_t d : dims) be(d);
  raw += std::string(body, '\0');
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(f);
}

TEST(FashionMnist, ADecompressedSizeBeyondTheHeaderIsRefusedBeforeItIsRead) {
  const std::string dir = ::testing::TempDir() + "/fmnist_bomb_" + std::to_string(::getpid());
  std::system(("mkdir -p " + dir).c_str());
  write_idx_gz(dir + "/t10k-labels-idx1-ubyte.gz", 0x801, {2}, 2);
  // a header declaring 2 images over 8 MB of zeros (which gzip shrinks to a few KB)
  write_idx_gz(dir + "/t10k-images-idx3-ubyte.gz", 0x803, {2, 28, 28}, 8 << 20);
  EXPECT_THROW_MSG(data::fashion_mnist(dir, false), "decompresses to more than the 1584 bytes its IDX header declares");
  // a header claiming more images than any real set (it would ask for terabytes)
  write_idx_gz(dir + "/t10k-images-idx3-ubyte.gz", 0x803, {4000000000u, 28, 28}, 16);
  EXPECT_THROW_MSG(data::fashion_mnist(dir, false), "its header declares 4000000000 items, more than the 1000000 this reader takes");
  write_idx_gz(dir + "/t10k-images-idx3-ubyte.gz", 0x803, {2, 28, 28}, 2 * 784);
  EXPECT_EQ(data::fashion_mnist(dir, false)->size(), 2) << "an honest small file reads";
}

TEST(Csv, NonFiniteValuesAreRefusedUnlessAllowed) {
  const std::string path = ::testing::TempDir() + "/bitgrad_nonfinite.csv";
  for (const char* bad : {"nan", "inf", "-Infinity", "1e39"}) {
    std::ofstream(path) << "1,2,0\n3," << bad << ",1\n";
    EXPECT_THROW_MSG(data::csv_dataset(path, false, 2), path + ":2: column 2 ('" + bad + "') is not a finite f32 value; set [data] allow_nonfinite = true");
    auto ds = data::csv_dataset(path, false, 2, 1, true);
    // sized by the dataset: GCC's speculative devirtualization guesses the 16-float Img::get
    // above for this call, and a fixed float[2] made it warn (-Warray-bounds) of that path
    std::vector<float> x(static_cast<std::size_t>(ds->sample_shape().numel()));
    std::int64_t l;
    ds->get(1, x.data(), &l, nullptr);
    EXPECT_FALSE(std::isfinite(x[1])) << bad;
  }
  std::ofstream(path) << "1,2,0\n3,4,1e63\n";
  EXPECT_THROW_MSG(data::csv_dataset(path, false, 2, 1, true), "is not a class index (an integer in [0, 1048576))");
  // an error quotes a short, printable excerpt of what it found
  std::ofstream(path) << "1,2\n3," << std::string(500, 'x') << "\x01\n";
  try {
    data::csv_dataset(path, false, -1, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    EXPECT_NE(std::string(e.what()).find("xxx..."), std::string::npos) << e.what();
  }
}

TEST(Csv, ParsesAndReportsLines) {
  const std::string path = ::testing::TempDir() + "/bitgrad_test.csv";
  std::ofstream(path) << "a,b,label\n1.5,2,1\n-3,4e1,0\n";
  auto ds = data::csv_dataset(path, true, 2);
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->num_classes(), 2);
  float x[2];
  std::int64_t l;
  ds->get(1, x, &l, nullptr);
  EXPECT_EQ(x[0], -3.0f);
  EXPECT_EQ(x[1], 40.0f);
  EXPECT_EQ(l, 0);
  std::ofstream(path) << "1,2\n3,x\n";
  try {
    data::csv_dataset(path, false, -1, 1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2: column 2 ('x') is not a number"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace bitgrad::test

namespace bitgrad::test {
namespace {

TEST(Datasets, AdderSamplesAreTheDocumentedStream) {
  // feature j of sample i: Stream(seed, "adder").sub(i).uniform_f32(j); target: their sum in order
  for (int f : {1, 4, 10}) {
    auto ds = data::adder_dataset(50, f, 9);
    std::vector<float> x(static_cast<std::size_t>(f));
    float y = 0;
    for (std::int64_t i : {0, 1, 17, 49}) {
      ds->get(i, x.data(), nullptr, &y);
      const rng::Stream s = rng::Stream(9, "adder").sub(static_cast<std::uint64_t>(i));
      float sum = 0.0f;
      for (int j = 0; j < f; ++j) {
        EXPECT_EQ(x[static_cast<std::size_t>(j)], s.uniform_f32(static_cast<std::uint64_t>(j))) << "f=" << f << " i=" << i << " j=" << j;
        sum = sum + x[static_cast<std::size_t>(j)];
      }
      EXPECT_EQ(y, sum);
    }
  }
}

}  // namespace
}  // namespace bitgrad::test
