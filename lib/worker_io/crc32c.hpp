// CRC32C (Castagnoli, the checksum of TensorBoard's event-file records) and TensorFlow's masked form
// of it, in plain C++ (a table per byte; event files are small, speed does not matter here).
#pragma once

#include <cstdint>
#include <string_view>

namespace mgtrain {

// CRC32C of `data`; crc32c("123456789") == 0xE3069283. `seed` continues an earlier CRC.
std::uint32_t crc32c(std::string_view data, std::uint32_t seed = 0);

// TensorFlow's record checksum: ((crc >> 15) | (crc << 17)) + 0xa282ead8, so a CRC stored next to
// the bytes it covers does not checksum to a trivial value.
std::uint32_t masked_crc32c(std::string_view data);

}  // namespace mgtrain
