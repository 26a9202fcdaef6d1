// XXH64, the 64-bit xxHash (public xxHash specification, v0.8), streaming and one-shot. Checkpoint files
// carry an XXH64 of their bytes so a torn or bit-flipped file is detected on load (core/checkpoint_file.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mgtrain {

// Streaming XXH64: update() any number of times with pieces of any size, digest() at any point (it does
// not change the state). Equal to xxhash64() over the concatenated pieces.
class Xxh64 {
 public:
  explicit Xxh64(std::uint64_t seed = 0);
  void reset(std::uint64_t seed = 0);
  void update(const void* data, std::size_t size);
  std::uint64_t digest() const;

 private:
  std::uint64_t lanes_[4];
  std::uint64_t seed_;
  std::uint64_t total_size_ = 0;
  unsigned char buffer_[32];  // a partial 32-byte stripe
  std::size_t buffered_ = 0;
};

// XXH64 of one buffer.
std::uint64_t xxhash64(const void* data, std::size_t size, std::uint64_t seed = 0);

}  // namespace mgtrain
