// Fashion-MNIST (gzipped IDX), CSV and the synthetic adder.
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <fstream>
#include <sstream>

#include "bitgrad/data.hpp"
#include "bitgrad/rng.hpp"

namespace bitgrad::data {
namespace {

std::uint32_t be32(const unsigned char* b) {
  return (std::uint32_t(b[0]) << 24) | (std::uint32_t(b[1]) << 16) | (std::uint32_t(b[2]) << 8) | b[3];
}

// A gzipped IDX file, decompressed no further than its header says it holds: `size(header)`
// is the whole file's size as the first `header_bytes` bytes declare it. A gzip bomb, or a
// header that lies, is an error before the memory is taken.
template <class Size>
std::vector<unsigned char> read_idx_gz(const std::string& path, const char* what, std::size_t header_bytes, Size size) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) {
    const int err = errno ? errno : ENOENT;
    const std::string msg = std::string(what) + ": cannot open " + path + " (" + std::strerror(err) +
                            "); install Debian's dataset-fashion-mnist package or set [data] path to the directory holding the files";
    if (err == ENOENT) throw NotFoundError(msg);
    throw Error(msg);
  }
  std::vector<unsigned char> out(header_bytes);
  std::uint64_t want = 0;
  auto read = [&](unsigned char* to, std::size_t n) -> std::size_t {
    std::size_t got = 0;
    while (got < n) {
      const int k = gzread(f, to + got, static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30)));
      if (k < 0) {  // the caller closes f
        int err = 0;
        throw Error(std::string(what) + ": " + path + " is not a readable gzip file (" + gzerror(f, &err) + ")");
      }
      if (k == 0) break;
      got += static_cast<std::size_t>(k);
    }
    return got;
  };
  try {
    if (read(out.data(), header_bytes) != header_bytes) throw Error(std::string(what) + ": " + path + " is too short to hold an IDX header");
    want = size(out.data());
    // grown as the data arrives: a 16-byte file that declares a million images takes no more
    // memory than it holds
    while (out.size() < want) {
      const std::size_t at = out.size(), chunk = static_cast<std::size_t>(std::min<std::uint64_t>(want - at, 1 << 20));
      out.resize(at + chunk);
      const std::size_t got = read(out.data() + at, chunk);
      out.resize(at + got);
      if (got < chunk) break;  // the end: shorter than declared, which the caller reports
    }
    unsigned char extra;
    if (out.size() == want && read(&extra, 1) != 0)
      throw Error(std::string(what) + ": " + path + " decompresses to more than the " + std::to_string(want) + " bytes its IDX header declares");
  } catch (...) {
    gzclose(f);
    throw;
  }
  gzclose(f);
  return out;
}

std::uint32_t be32(const std::vector<unsigned char>& b, std::size_t at) { return be32(b.data() + at); }

// Fashion-MNIST has 60,000 + 10,000 images; a million is room for any IDX set of 28x28 images
// this reader is for (784 MB), and refuses a header that would claim terabytes.
constexpr std::uint32_t kMaxIdxImages = 1000000;

class FashionMnist : public Dataset {
 public:
  FashionMnist(const std::string& dir, bool train, bool normalize) : train_(train), normalize_(normalize) {
    const std::string prefix = dir + "/" + (train ? "train" : "t10k");
    const std::string ipath = prefix + "-images-idx3-ubyte.gz", lpath = prefix + "-labels-idx1-ubyte.gz";
    auto bad = [&](const std::string& path, const std::string& why) { throw Error("fashion-mnist: " + path + ": " + why); };
    auto count = [&](const std::string& path, std::uint32_t n) {
      if (n > kMaxIdxImages) bad(path, "its header declares " + std::to_string(n) + " items, more than the " + std::to_string(kMaxIdxImages) + " this reader takes");
      return std::uint64_t(n);
    };
    images_ = read_idx_gz(ipath, "fashion-mnist", 16, [&](const unsigned char* h) {
      if (be32(h) != 0x00000803) bad(ipath, "not an IDX image file (magic 0x00000803 expected)");
      if (be32(h + 8) != 28 || be32(h + 12) != 28)
        bad(ipath, "images are " + std::to_string(be32(h + 8)) + "x" + std::to_string(be32(h + 12)) + ", expected 28x28");
      return 16 + count(ipath, be32(h + 4)) * 784;
    });
    labels_ = read_idx_gz(lpath, "fashion-mnist", 8, [&](const unsigned char* h) {
      if (be32(h) != 0x00000801) bad(lpath, "not an IDX label file (magic 0x00000801 expected)");
      return 8 + count(lpath, be32(h + 4));
    });
    n_ = be32(images_, 4);
    const std::uint32_t rows = be32(images_, 8), cols = be32(images_, 12);
    if (rows != 28 || cols != 28) bad(ipath, "images are " + std::to_string(rows) + "x" + std::to_string(cols) + ", expected 28x28");
    if (images_.size() != 16 + std::size_t(n_) * 784)
      bad(ipath, "holds " + std::to_string(images_.size() - 16) + " pixel bytes, expected " + std::to_string(std::size_t(n_) * 784) +
                     " (truncated?)");
    if (be32(labels_, 4) != n_ || labels_.size() != 8 + std::size_t(n_))
      bad(lpath, "has " + std::to_string(labels_.size() - 8) + " labels for " + std::to_string(n_) + " images");
    for (std::size_t i = 8; i < labels_.size(); ++i)
      if (labels_[i] > 9) bad(lpath, "label " + std::to_string(labels_[i]) + " of image " + std::to_string(i - 8) + " is not in [0, 10)");
  }
  std::int64_t size() const override { return n_; }
  Shape sample_shape() const override { return Shape{1, 28, 28}; }
  std::int64_t num_classes() const override { return 10; }
  void get(std::int64_t i, float* x, std::int64_t* label, float*) const override {
    const unsigned char* px = images_.data() + 16 + std::size_t(i) * 784;
    for (int k = 0; k < 784; ++k) {
      float v = static_cast<float>(px[k]) / 255.0f;
      if (normalize_) v = (v - 0.2860f) / 0.3530f;
      x[k] = v;
    }
    *label = labels_[8 + std::size_t(i)];
  }
  std::string describe() const override {
    return std::string("fashion-mnist ") + (train_ ? "train" : "test") + " (" + std::to_string(n_) + " images" +
           (normalize_ ? ", normalised" : "") + ")";
  }

 private:
  bool train_, normalize_;
  std::uint32_t n_ = 0;
  std::vector<unsigned char> images_, labels_;
};

constexpr double kMaxClasses = 1 << 20;

class Csv : public Dataset {
 public:
  Csv(const std::string& path, bool header, int label_column, int targets, bool allow_nonfinite)
      : path_(path), label_(label_column), targets_(targets) {
    std::ifstream f(path);
    if (!f) {
      const int err = errno ? errno : ENOENT;
      const std::string msg = "csv: cannot open " + path + " (" + std::strerror(err) + ")";
      if (err == ENOENT) throw NotFoundError(msg);
      throw Error(msg);
    }
    std::string line;
    std::int64_t lineno = 0;
    int width = -1;
    while (std::getline(f, line)) {
      ++lineno;
      if (header && lineno == 1) continue;
      if (line.empty() || line == "\r") continue;
      std::vector<double> vals;
      std::stringstream ss(line);
      std::string cell;
      while (std::getline(ss, cell, ',')) {
        char* end = nullptr;
        errno = 0;
        double v = std::strtod(cell.c_str(), &end);
        while (end && (*end == ' ' || *end == '\r' || *end == '\t')) ++end;
        if (cell.empty() || !end || *end != '\0' || errno == ERANGE)
          throw Error("csv: " + path + ":" + std::to_string(lineno) + ": column " + std::to_string(vals.size() + 1) + " ('" + printable_excerpt(cell) +
                      "') is not a number");
        // nan, inf and values beyond f32 (which become inf) train silently into NaN: refused
        // unless the configuration says the data holds them on purpose
        if (!allow_nonfinite && !(std::fabs(v) <= static_cast<double>(std::numeric_limits<float>::max())))
          throw Error("csv: " + path + ":" + std::to_string(lineno) + ": column " + std::to_string(vals.size() + 1) + " ('" +
                      printable_excerpt(cell) + "') is not a finite f32 value; set [data] allow_nonfinite = true to train on such data");
        vals.push_back(v);
      }
      if (width < 0) width = static_cast<int>(vals.size());
      if (static_cast<int>(vals.size()) != width)
        throw Error("csv: " + path + ":" + std::to_string(lineno) + ": " + std::to_string(vals.size()) + " columns, expected " +
                    std::to_string(width));
      rows_.push_back(std::move(vals));
    }
    if (rows_.empty()) throw Error("csv: " + path + " has no data rows");
    width_ = width;
    if (label_ >= 0) {
      if (label_ >= width_) throw Error("csv: " + path + ": label column " + std::to_string(label_) + " does not exist (" +
                                        std::to_string(width_) + " columns)");
      for (std::size_t r = 0; r < rows_.size(); ++r) {
        const double v = rows_[r][std::size_t(label_)];
        // checked before the conversion (1e63 or NaN do not convert to an integer)
        if (!(v >= 0 && v < kMaxClasses) || v != std::floor(v))
          throw Error("csv: " + path + ": row " + std::to_string(r + 1) + ": label " + std::to_string(v) + " is not a class index (an integer in [0, " +
                      std::to_string(static_cast<long long>(kMaxClasses)) + "))");
        classes_ = std::max<std::int64_t>(classes_, static_cast<std::int64_t>(v) + 1);
      }
    } else if (targets_ < 1 || targets_ >= width_) {
      throw Error("csv: " + path + ": " + std::to_string(targets_) + " target columns of " + std::to_string(width_) +
                  " leave no features");
    }
  }
  std::int64_t size() const override { return static_cast<std::int64_t>(rows_.size()); }
  Shape sample_shape() const override { return Shape{width_ - (label_ >= 0 ? 1 : targets_)}; }
  std::int64_t num_classes() const override { return label_ >= 0 ? classes_ : 0; }
  Shape target_shape() const override { return label_ >= 0 ? Shape{} : Shape{targets_}; }
  void get(std::int64_t i, float* x, std::int64_t* label, float* y) const override {
    const auto& r = rows_[std::size_t(i)];
    int k = 0;
    for (int c = 0; c < width_; ++c) {
      if (label_ >= 0) {
        if (c == label_) *label = static_cast<std::int64_t>(r[std::size_t(c)]);
        else x[k++] = static_cast<float>(r[std::size_t(c)]);
      } else {
        if (c < width_ - targets_) x[k++] = static_cast<float>(r[std::size_t(c)]);
        else y[c - (width_ - targets_)] = static_cast<float>(r[std::size_t(c)]);
      }
    }
  }
  std::string describe() const override { return "csv " + path_ + " (" + std::to_string(rows_.size()) + " rows)"; }

 private:
  std::string path_;
  int label_, targets_, width_ = 0;
  std::int64_t classes_ = 0;
  std::vector<std::vector<double>> rows_;
};

class Adder : public Dataset {
 public:
  Adder(std::int64_t n, int features, std::uint64_t seed, std::int64_t first)
      : n_(n), first_(first), f_(features), base_(seed, "adder") {
    BITGRAD_CHECK(n > 0 && features > 0, "adder", "needs n > 0 and features > 0, got ", n, " and ", features);
  }
  std::int64_t size() const override { return n_; }
  Shape sample_shape() const override { return Shape{f_}; }
  Shape target_shape() const override { return Shape{1}; }
  void get(std::int64_t i, float* x, std::int64_t*, float* y) const override {
    // feature j is s.uniform_f32(j) = (word j%4 of block j/4 >> 8) 2^-24: one Philox block per
    // four features, the named base stream built once
    const rng::Stream s = base_.sub(static_cast<std::uint64_t>(first_ + i));
    float sum = 0.0f;
    rng::Block b{};
    for (int j = 0; j < f_; ++j) {
      if (j % 4 == 0) b = s.block(static_cast<std::uint64_t>(j / 4));
      x[j] = static_cast<float>(b[static_cast<std::size_t>(j % 4)] >> 8) * 0x1p-24f;
      sum = sum + x[j];
    }
    y[0] = sum;
  }
  std::string describe() const override {
    return "adder (" + std::to_string(n_) + " samples of " + std::to_string(f_) + " features, target their sum)";
  }

 private:
  std::int64_t n_, first_;
  int f_;
  rng::Stream base_;
};

class Synthetic : public Dataset {
 public:
  Synthetic(std::int64_t n, Shape sample, std::int64_t classes, std::int64_t targets, std::uint64_t seed, std::int64_t first)
      : n_(n), first_(first), classes_(classes), targets_(targets), sample_(std::move(sample)), values_(seed, "synthetic"),
        labels_(seed, "synthetic-label") {
    BITGRAD_CHECK(n > 0 && sample_.numel() > 0 && (classes > 0 || targets > 0), "synthetic",
                  "needs samples > 0, a non-empty shape and classes > 0 or targets > 0, got ", n, ", ", sample_.str(), ", ", classes, ", ",
                  targets);
  }
  std::int64_t size() const override { return n_; }
  Shape sample_shape() const override { return sample_; }
  std::int64_t num_classes() const override { return classes_; }
  Shape target_shape() const override { return classes_ > 0 ? Shape{} : Shape{targets_}; }
  void get(std::int64_t i, float* x, std::int64_t* label, float* y) const override {
    const auto id = static_cast<std::uint64_t>(first_ + i);
    values_.sub(id).fill_normal(x, sample_.numel(), 0, 0.0f, 1.0f);
    const rng::Stream l = labels_.sub(id);
    if (classes_ > 0) {
      *label = static_cast<std::int64_t>(l.below(0, static_cast<std::uint64_t>(classes_)));
    } else {
      for (std::int64_t t = 0; t < targets_; ++t) y[t] = l.uniform_f32(static_cast<std::uint64_t>(t));
    }
  }
  std::string describe() const override {
    return "synthetic (" + std::to_string(n_) + " samples of " + sample_.str() +
           (classes_ > 0 ? ", " + std::to_string(classes_) + " classes)" : ", " + std::to_string(targets_) + " targets)");
  }

 private:
  std::int64_t n_, first_, classes_, targets_;
  Shape sample_;
  rng::Stream values_, labels_;
};

}  // namespace

std::shared_ptr<Dataset> synthetic_dataset(std::int64_t n, const Shape& sample, std::int64_t classes, std::int64_t targets,
                                           std::uint64_t seed, std::int64_t first) {
  return std::make_shared<Synthetic>(n, sample, classes, targets, seed, first);
}

std::shared_ptr<Dataset> fashion_mnist(const std::string& dir, bool train, bool normalize) {
  return std::make_shared<FashionMnist>(dir, train, normalize);
}
std::shared_ptr<Dataset> csv_dataset(const std::string& path, bool header, int label_column, int targets, bool allow_nonfinite) {
  return std::make_shared<Csv>(path, header, label_column, targets, allow_nonfinite);
}
std::shared_ptr<Dataset> adder_dataset(std::int64_t n, int features, std::uint64_t seed, std::int64_t first) {
  return std::make_shared<Adder>(n, features, seed, first);
}

}  // namespace bitgrad::data
