#include "bitgrad/fingerprint.hpp"

#include <xxhash.h>

#include <cstdio>

namespace bitgrad {

std::string Digest128::hex() const {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(high), static_cast<unsigned long long>(low));
  return buf;
}

Fingerprint::Fingerprint() : state_(XXH3_createState()) {
  if (!state_) throw Error("fingerprint: out of memory");
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Fingerprint::~Fingerprint() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Fingerprint::add_bytes(const void* data, std::size_t n) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, n);
}

void Fingerprint::add(const Tensor& t) {
  BITGRAD_CHECK(t.defined(), "fingerprint", "cannot hash an undefined tensor");
  // header: dtype, ndim, dims as little-endian integers
  std::uint8_t head[2] = {static_cast<std::uint8_t>(t.dtype()), static_cast<std::uint8_t>(t.ndim())};
  add_bytes(head, sizeof head);
  for (int d = 0; d < t.ndim(); ++d) {
    std::int64_t v = t.shape()[d];
    add_bytes(&v, sizeof v);
  }
  Tensor c = t.is_contiguous() ? t : t.contiguous_copy();
  const char* base = static_cast<const char*>(c.storage()->data()) + c.offset() * static_cast<std::int64_t>(dtype_size(c.dtype()));
  add_bytes(base, static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));
}

Digest128 Fingerprint::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return {h.high64, h.low64};
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

}  // namespace bitgrad
