#include "bitgrad/fingerprint.hpp"

#include <cstdio>
#include <cstdlib>
#include <new>

#include "io/format.hpp"
#include "io/xxh_dispatch.hpp"

namespace bitgrad {

std::string Digest128::hex() const {
  return io::strprintf("%016llx%016llx", static_cast<unsigned long long>(high), static_cast<unsigned long long>(low));
}

Fingerprint::Fingerprint() {
  const io::HashImpl& h = io::hash_impl();
  state_ = std::aligned_alloc(64, (h.state_size + 63) / 64 * 64);
  if (!state_) throw std::bad_alloc();
  h.reset(state_);
}

Fingerprint::~Fingerprint() { std::free(state_); }

void Fingerprint::add_bytes(const void* data, std::size_t n) { io::hash_impl().update(state_, data, n); }

void Fingerprint::add_header(const Tensor& t) {
  BITGRAD_CHECK(t.defined(), "fingerprint", "cannot hash an undefined tensor");
  add_header(t.dtype(), t.shape().begin(), t.ndim());
}

void Fingerprint::add_header(DType dtype, const std::int64_t* dims, int ndim) {
  // dtype, ndim, dims as little-endian integers
  std::uint8_t head[2] = {static_cast<std::uint8_t>(dtype), static_cast<std::uint8_t>(ndim)};
  add_bytes(head, sizeof head);
  for (int d = 0; d < ndim; ++d) add_bytes(&dims[d], sizeof dims[d]);
}

const void* Fingerprint::element_bytes(const Tensor& t, std::size_t& n) {
  BITGRAD_CHECK(t.defined() && t.is_contiguous(), "fingerprint", "element_bytes needs a contiguous tensor");
  n = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  return static_cast<const char*>(t.storage()->data()) + t.offset() * static_cast<std::int64_t>(dtype_size(t.dtype()));
}

void Fingerprint::add(const Tensor& t) {
  add_header(t);
  Tensor c = t.is_contiguous() ? t : t.contiguous_copy();
  std::size_t n = 0;
  const void* p = element_bytes(c, n);
  add_bytes(p, n);
}

Digest128 Fingerprint::digest() const {
  Digest128 d;
  io::hash_impl().digest(state_, &d.high, &d.low);
  return d;
}

Digest128 fingerprint(const Tensor& t) {
  Fingerprint f;
  f.add(t);
  return f.digest();
}

Digest128 fingerprint(const std::vector<Tensor>& ts) {
  Fingerprint f;
  for (const Tensor& t : ts) f.add(t);
  return f.digest();
}

std::vector<Digest128> fingerprints(const std::vector<std::vector<Tensor>>& groups) {
  std::vector<Digest128> out;
  out.reserve(groups.size());
  for (const std::vector<Tensor>& g : groups) out.push_back(fingerprint(g));
  return out;
}

}  // namespace bitgrad
