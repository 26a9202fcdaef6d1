// XXH64 per the public xxHash specification: four lanes over 32-byte stripes, then the tail and avalanche.
#include "core/xxhash64.hpp"

#include <cstring>

namespace mgtrain {
namespace {

constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr std::uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr std::uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;

inline std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads (the supported targets are little-endian; memcpy compiles to one unaligned load).
inline std::uint64_t read64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t read32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline std::uint64_t round(std::uint64_t acc, std::uint64_t lane) {
  acc += lane * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}

inline std::uint64_t merge_round(std::uint64_t acc, std::uint64_t lane) {
  acc ^= round(0, lane);
  return acc * kPrime1 + kPrime4;
}

// Consumes whole 32-byte stripes from p; returns the number of bytes consumed.
inline std::size_t consume_stripes(std::uint64_t lanes[4], const unsigned char* p, std::size_t size) {
  std::uint64_t v1 = lanes[0], v2 = lanes[1], v3 = lanes[2], v4 = lanes[3];
  const unsigned char* const begin = p;
  const unsigned char* const limit = p + (size & ~std::size_t{31});
  while (p < limit) {
    v1 = round(v1, read64(p));
    v2 = round(v2, read64(p + 8));
    v3 = round(v3, read64(p + 16));
    v4 = round(v4, read64(p + 24));
    p += 32;
  }
  lanes[0] = v1, lanes[1] = v2, lanes[2] = v3, lanes[3] = v4;
  return static_cast<std::size_t>(p - begin);
}

// The tail (< 32 bytes) and the final avalanche.
std::uint64_t finish(std::uint64_t acc, const unsigned char* p, std::size_t size) {
  while (size >= 8) {
    acc ^= round(0, read64(p));
    acc = rotl(acc, 27) * kPrime1 + kPrime4;
    p += 8;
    size -= 8;
  }
  if (size >= 4) {
    acc ^= static_cast<std::uint64_t>(read32(p)) * kPrime1;
    acc = rotl(acc, 23) * kPrime2 + kPrime3;
    p += 4;
    size -= 4;
  }
  while (size > 0) {
    acc ^= static_cast<std::uint64_t>(*p) * kPrime5;
    acc = rotl(acc, 11) * kPrime1;
    ++p;
    --size;
  }
  acc ^= acc >> 33;
  acc *= kPrime2;
  acc ^= acc >> 29;
  acc *= kPrime3;
  acc ^= acc >> 32;
  return acc;
}

}  // namespace

Xxh64::Xxh64(std::uint64_t seed) { reset(seed); }

void Xxh64::reset(std::uint64_t seed) {
  seed_ = seed;
  lanes_[0] = seed + kPrime1 + kPrime2;
  lanes_[1] = seed + kPrime2;
  lanes_[2] = seed;
  lanes_[3] = seed - kPrime1;
  total_size_ = 0;
  buffered_ = 0;
}

void Xxh64::update(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_size_ += size;
  if (buffered_ > 0) {
    const std::size_t take = size < 32 - buffered_ ? size : 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < 32) return;
    consume_stripes(lanes_, buffer_, 32);
    buffered_ = 0;
  }
  const std::size_t consumed = consume_stripes(lanes_, p, size);
  p += consumed;
  size -= consumed;
  if (size > 0) {
    std::memcpy(buffer_, p, size);
    buffered_ = size;
  }
}

std::uint64_t Xxh64::digest() const {
  std::uint64_t acc;
  if (total_size_ >= 32) {
    acc = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
    acc = merge_round(acc, lanes_[0]);
    acc = merge_round(acc, lanes_[1]);
    acc = merge_round(acc, lanes_[2]);
    acc = merge_round(acc, lanes_[3]);
  } else {
    acc = seed_ + kPrime5;
  }
  acc += total_size_;
  return finish(acc, buffer_, buffered_);
}

std::uint64_t xxhash64(const void* data, std::size_t size, std::uint64_t seed) {
  Xxh64 hasher(seed);
  hasher.update(data, size);
  return hasher.digest();
}

}  // namespace mgtrain
