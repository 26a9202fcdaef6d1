// XXH64, the 64-bit xxHash, streaming and one-shot, from Debian's libxxhash-dev (header-only use: xxhash.h
// is compiled in with XXH_INLINE_ALL, so no shared library is loaded). Checkpoint files carry an XXH64 of
// their bytes so a torn or bit-flipped file is detected on load (checkpoint/checkpoint_file.hpp); the
// digests are the specification's, so checkpoints written by the earlier hand-written version still verify.
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
  // xxhash.h's XXH64_state_t, kept opaque so this header does not pull in xxhash.h (xxhash64.cpp checks the size).
  alignas(8) unsigned char state_[96];
};

// XXH64 of one buffer.
std::uint64_t xxhash64(const void* data, std::size_t size, std::uint64_t seed = 0);

}  // namespace mgtrain
