// XXH64 through Debian's xxhash.h (see xxhash64.hpp).
#include "util/xxhash64.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <new>

namespace mgtrain {
namespace {

static_assert(sizeof(XXH64_state_t) <= 96 && alignof(XXH64_state_t) <= 8,
              "Xxh64::state_ is too small for XXH64_state_t");

}  // namespace

Xxh64::Xxh64(std::uint64_t seed) { reset(seed); }

void Xxh64::reset(std::uint64_t seed) { XXH64_reset(new (state_) XXH64_state_t, seed); }

void Xxh64::update(const void* data, std::size_t size) {
  if (size > 0) XXH64_update(reinterpret_cast<XXH64_state_t*>(state_), data, size);
}

std::uint64_t Xxh64::digest() const { return XXH64_digest(reinterpret_cast<const XXH64_state_t*>(state_)); }

std::uint64_t xxhash64(const void* data, std::size_t size, std::uint64_t seed) {
  return XXH64(size > 0 ? data : "", size, seed);
}

}  // namespace mgtrain
