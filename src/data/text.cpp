// Text corpora and their windows (character- or byte-level language modelling).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bitgrad/data.hpp"

namespace bitgrad::data {
namespace {

std::string hex_byte(unsigned char c) {
  static const char* d = "0123456789abcdef";
  return std::string("0x") + d[c >> 4] + d[c & 15];
}

// A corpus larger than this is not what a character-level model on this library is for, and a
// path to the wrong place (a disk image) would otherwise be read whole.
constexpr std::uintmax_t kMaxCorpusBytes = std::uintmax_t{1} << 30;

std::string read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    const int err = errno ? errno : ENOENT;
    const std::string msg = "text: cannot open " + path + " (" + std::strerror(err) + ")";
    if (err == ENOENT) throw NotFoundError(msg);
    throw Error(msg);
  }
  std::ostringstream os;
  os << f.rdbuf();
  if (f.bad()) throw Error("text: cannot read " + path);
  return os.str();
}

// Decodes one UTF-8 character at s[i]; returns its length (0: not UTF-8). Overlong forms,
// surrogates and code points beyond U+10FFFF are refused.
int utf8_at(const std::string& s, std::size_t i, std::uint32_t& cp) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  const int n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + static_cast<std::size_t>(n) > s.size()) return 0;
  cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (int k = 1; k < n; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void put_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The characters (or bytes) of a text, in order; throws naming the first byte that is not UTF-8.
std::vector<std::uint32_t> symbols_of(const std::string& s, bool bytes, const std::string& what) {
  std::vector<std::uint32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp = 0;
    const int n = utf8_at(s, i, cp);
    if (n == 0) {
      std::size_t line = 1 + static_cast<std::size_t>(std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(i), '\n'));
      throw Error("text: " + what + ": line " + std::to_string(line) + " (byte " + std::to_string(i) + "): " +
                  hex_byte(static_cast<unsigned char>(s[i])) + " is not UTF-8; a text corpus must be UTF-8");
    }
    if (bytes) {
      for (int k = 0; k < n; ++k) out.push_back(static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]));
    } else {
      out.push_back(cp);
    }
    i += static_cast<std::size_t>(n);
  }
  return out;
}

class TextWindows : public Dataset {
 public:
  TextWindows(std::shared_ptr<const TextCorpus> c, std::int64_t block, bool train, std::int64_t max_windows)
      : c_(std::move(c)), block_(block), train_(train) {
    const std::int64_t n = static_cast<std::int64_t>(c_->tokens.size());
    BITGRAD_CHECK(block > 0, "text", "block_size must be positive, got ", block);
    if (train) {
      count_ = c_->train_tokens - block;
      if (count_ <= 0)
        throw Error("text: block_size " + std::to_string(block) + " is larger than the training part of the corpus " + c_->path + " (" +
                    std::to_string(c_->train_tokens) + " tokens; a window needs block_size + 1)");
    } else {
      first_ = c_->train_tokens;
      count_ = (n - first_ - 1) / block;
      if (max_windows > 0) count_ = std::min(count_, max_windows);
      if (count_ <= 0)
        throw Error("text: the validation part of " + c_->path + " (" + std::to_string(n - first_) +
                    " tokens) is shorter than one window of block_size + 1 = " + std::to_string(block + 1) + " tokens; raise val_fraction");
    }
  }
  std::int64_t size() const override { return count_; }
  Shape sample_shape() const override { return Shape{block_}; }
  std::int64_t num_classes() const override { return c_->vocab_size(); }
  Shape target_shape() const override { return Shape{block_}; }
  void get(std::int64_t i, float* x, std::int64_t* label, float*) const override {
    BITGRAD_CHECK(i >= 0 && i < count_, "text", "window ", i, " out of range [0, ", count_, ")");
    const std::int64_t p = train_ ? i : first_ + i * block_;
    const std::int32_t* t = c_->tokens.data() + p;
    for (std::int64_t k = 0; k < block_; ++k) {
      x[k] = static_cast<float>(t[k]);  // exact: a vocabulary has far fewer than 2^24 symbols
      label[k] = t[k + 1];
    }
  }
  std::string describe() const override {
    return std::string("text(") + c_->path + ", " + (train_ ? "train" : "validation") + ", " + std::to_string(count_) + " windows of " +
           std::to_string(block_) + ", vocabulary " + std::to_string(c_->vocab_size()) + (c_->bytes ? " bytes)" : " characters)");
  }

 private:
  std::shared_ptr<const TextCorpus> c_;
  std::int64_t block_, first_ = 0, count_ = 0;
  bool train_;
};

}  // namespace

std::vector<std::string> text_files(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    std::string hint = path.rfind(kFortunesDir, 0) == 0 ? "; install Debian's fortunes package (scripts/install-deps.sh does)"
                                                        : "; set [data] path to a UTF-8 text file or a directory of them";
    throw NotFoundError("text: " + path + " does not exist" + hint);
  }
  if (fs::is_regular_file(st)) return {path};
  if (!fs::is_directory(st)) throw Error("text: " + path + " is neither a regular file nor a directory");
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || (name.size() >= 4 && name.compare(name.size() - 4, 4, ".dat") == 0)) continue;
    std::error_code e2;
    if (it->is_symlink(e2) || !it->is_regular_file(e2)) continue;
    names.push_back(name);
  }
  if (ec) throw Error("text: cannot list " + path + " (" + ec.message() + ")");
  std::sort(names.begin(), names.end());  // byte order: the corpus does not depend on the file system's listing order
  if (names.empty()) throw Error("text: " + path + " holds no text files (regular files, not *.dat)");
  std::vector<std::string> out;
  for (const std::string& n : names) out.push_back((fs::path(path) / n).string());
  return out;
}

std::shared_ptr<const TextCorpus> load_text(const std::string& path, bool bytes, double val_fraction) {
  BITGRAD_CHECK(val_fraction >= 0 && val_fraction < 1, "text", "val_fraction must be in [0, 1), got ", val_fraction);
  auto c = std::make_shared<TextCorpus>();
  c->path = path;
  c->bytes = bytes;
  c->files = text_files(path);
  std::vector<std::uint32_t> all;
  std::uintmax_t total = 0;
  for (const std::string& f : c->files) {
    std::error_code ec;
    total += std::filesystem::file_size(f, ec);
    if (total > kMaxCorpusBytes) throw Error("text: " + path + " holds more than " + std::to_string(kMaxCorpusBytes) + " bytes of text");
    const std::vector<std::uint32_t> s = symbols_of(read_whole(f), bytes, f);
    all.insert(all.end(), s.begin(), s.end());
  }
  if (all.empty()) throw Error("text: " + path + " is empty; a corpus needs text");
  c->symbols = all;
  std::sort(c->symbols.begin(), c->symbols.end());
  c->symbols.erase(std::unique(c->symbols.begin(), c->symbols.end()), c->symbols.end());
  c->tokens.resize(all.size());
  for (std::size_t i = 0; i < all.size(); ++i)
    c->tokens[i] = static_cast<std::int32_t>(std::lower_bound(c->symbols.begin(), c->symbols.end(), all[i]) - c->symbols.begin());
  const auto n = static_cast<std::int64_t>(all.size());
  c->train_tokens = n - static_cast<std::int64_t>(static_cast<double>(n) * val_fraction);
  return c;
}

std::string vocabulary_json(const TextCorpus& c) {
  nlohmann::ordered_json j;
  j["corpus"] = c.path;
  j["bytes"] = c.bytes;
  j["symbols"] = c.symbols;
  return j.dump() + "\n";
}

std::shared_ptr<const TextCorpus> vocabulary_from_json(const std::string& text, const std::string& file) {
  auto c = std::make_shared<TextCorpus>();
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    c->path = j.at("corpus").get<std::string>();
    c->bytes = j.at("bytes").get<bool>();
    c->symbols = j.at("symbols").get<std::vector<std::uint32_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error("text: " + file + " is not a vocabulary (" + e.what() + ")");
  }
  const std::uint32_t top = c->bytes ? 0xff : 0x10ffff;
  for (std::size_t i = 0; i < c->symbols.size(); ++i)
    if (c->symbols[i] > top || (i > 0 && c->symbols[i] <= c->symbols[i - 1]))
      throw Error("text: " + file + ": symbol " + std::to_string(i) + " (" + std::to_string(c->symbols[i]) +
                  ") is out of order, repeated or not a " + (c->bytes ? "byte" : "code point"));
  if (c->symbols.empty()) throw Error("text: " + file + " holds an empty vocabulary");
  return c;
}

std::vector<std::int64_t> TextCorpus::encode(const std::string& text, const std::string& what) const {
  const std::vector<std::uint32_t> s = symbols_of(text, bytes, what);
  std::vector<std::int64_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto it = std::lower_bound(symbols.begin(), symbols.end(), s[i]);
    if (it == symbols.end() || *it != s[i]) {
      std::string ch;
      if (bytes) ch = hex_byte(static_cast<unsigned char>(s[i]));
      else if (s[i] < 0x20 || s[i] == 0x7f) ch = "U+" + std::to_string(s[i]);
      else put_utf8(ch, s[i]), ch = "'" + ch + "'";
      throw Error("text: " + what + ": character " + std::to_string(i + 1) + " (" + ch + ") is not in the vocabulary of " + path + " (" +
                  std::to_string(symbols.size()) + (bytes ? " bytes)" : " characters)"));
    }
    out.push_back(it - symbols.begin());
  }
  return out;
}

std::string TextCorpus::decode(const std::vector<std::int64_t>& t) const {
  std::string out;
  for (std::int64_t id : t) {
    BITGRAD_CHECK(id >= 0 && id < vocab_size(), "text", "token ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
    if (bytes) out += static_cast<char>(symbols[static_cast<std::size_t>(id)]);
    else put_utf8(out, symbols[static_cast<std::size_t>(id)]);
  }
  return out;
}

std::shared_ptr<Dataset> text_windows(std::shared_ptr<const TextCorpus> corpus, std::int64_t block, bool train, std::int64_t max_windows) {
  return std::make_shared<TextWindows>(std::move(corpus), block, train, max_windows);
}

}  // namespace bitgrad::data
