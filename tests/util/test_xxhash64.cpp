// XXH64 against reference vectors (the xxHash library's own results) and streaming in odd pieces == one shot.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "util/xxhash64.hpp"

using mgtrain::Xxh64;
using mgtrain::xxhash64;

namespace {

std::vector<unsigned char> pattern(std::size_t size) {
  std::vector<unsigned char> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  return bytes;
}

std::uint64_t hash_text(const std::string& text, std::uint64_t seed = 0) {
  return xxhash64(text.data(), text.size(), seed);
}

}  // namespace

TEST_CASE("xxhash64: known vectors", "[checkpoint][xxhash]") {
  CHECK(xxhash64(nullptr, 0) == 0xEF46DB3751D8E999ULL);
  CHECK(hash_text("a") == 0xD24EC4F1A98C6E5BULL);
  CHECK(hash_text("abc") == 0x44BC2CF5AD770999ULL);
  CHECK(hash_text("xxhash") == 0x32DD38952C4BC720ULL);
  CHECK(hash_text("xxhash", 20141025) == 0xB559B98D844E0635ULL);
  CHECK(hash_text("Nobody inspects the spammish repetition") == 0xFBCEA83C8A378BF1ULL);
  // Lengths around the 4/8/32-byte boundaries of the algorithm; values from the reference library.
  const std::vector<std::pair<std::size_t, std::uint64_t>> vectors = {
      {1, 0xA96C7F0CE858BBB7ULL},    {3, 0xBED43740EE6332BBULL},    {4, 0xFA212AE44B3BB23DULL},
      {7, 0x2744460DD675D2C0ULL},    {8, 0x994B676B71CE94DDULL},    {15, 0x09E6451ED2FF8B1DULL},
      {16, 0x94AD0095E72B24D5ULL},   {31, 0x6711D55E306B5D8FULL},   {32, 0x07F7B8E3BC5D6E25ULL},
      {33, 0x09F85EEB4E1CBE9FULL},   {63, 0xB7C9968C066CB6A5ULL},   {64, 0x50D4159A0411632EULL},
      {65, 0xD277176BFF863EFCULL},   {100, 0x9DDADA11D3DC2D8FULL},  {255, 0x15A6DB05D4E83DF4ULL},
      {1000, 0x0BF0BDBCC82EB373ULL}, {4099, 0xC2C15A86D6A1985BULL},
  };
  const std::vector<unsigned char> bytes = pattern(5000);
  for (const auto& [size, expected] : vectors) {
    INFO("length " << size);
    CHECK(xxhash64(bytes.data(), size) == expected);
  }
  CHECK(xxhash64(bytes.data(), 1000, 0x9E3779B97F4A7C15ULL) == 0x3ECB5D7B5E7C64CFULL);
}

TEST_CASE("xxhash64: streaming in odd-sized pieces equals one shot", "[checkpoint][xxhash]") {
  const std::vector<unsigned char> bytes = pattern(10007);
  for (std::size_t size : {0, 1, 31, 32, 33, 64, 100, 4099, 10007}) {
    const std::uint64_t one_shot = xxhash64(bytes.data(), size);
    for (std::size_t piece : {1, 3, 7, 31, 32, 33, 1000}) {
      Xxh64 hasher;
      for (std::size_t at = 0; at < size; at += piece) hasher.update(bytes.data() + at, std::min(piece, size - at));
      INFO("length " << size << " in pieces of " << piece);
      CHECK(hasher.digest() == one_shot);
    }
  }
  // Varying piece sizes, digest() in between does not disturb the state, reset() starts over.
  Xxh64 hasher;
  std::size_t at = 0;
  for (std::size_t piece = 1; at < bytes.size(); piece = piece * 7 % 61 + 1) {
    const std::size_t n = std::min(piece, bytes.size() - at);
    hasher.update(bytes.data() + at, n);
    at += n;
    (void)hasher.digest();
  }
  CHECK(hasher.digest() == xxhash64(bytes.data(), bytes.size()));
  hasher.reset();
  hasher.update("abc", 3);
  CHECK(hasher.digest() == 0x44BC2CF5AD770999ULL);
}

// Not run by ctest (hidden tag: a throughput figure is a benchmark, not a test): `test_checkpoint "[.bench]"`.
TEST_CASE("xxhash64: throughput on a large buffer", "[.bench][xxhash]") {
  std::vector<unsigned char> bytes(64 << 20);
  for (std::size_t i = 0; i < bytes.size(); i += 4096) bytes[i] = static_cast<unsigned char>(i >> 12);
  (void)xxhash64(bytes.data(), bytes.size());  // warm up
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t sink = 0;
  for (int round = 0; round < 4; ++round) sink += xxhash64(bytes.data(), bytes.size());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gb_per_s = 4.0 * static_cast<double>(bytes.size()) / 1e9 / seconds;
  WARN("xxhash64: " << gb_per_s << " GB/s (checksum " << sink << ")");
  CHECK(gb_per_s > 0.0);
}
