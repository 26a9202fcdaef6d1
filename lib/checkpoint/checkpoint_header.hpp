// The JSON header of a checkpoint file (the format is in checkpoint_file.hpp): building it for the writer and
// parsing it, with every structural check, for the reader. Both use nlohmann::json (ordered, so tensors keep
// file order). Internal to lib/checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/checkpoint_file.hpp"

namespace mgtrain::checkpoint_header {

inline constexpr std::string_view kZeroDigits = "0000000000000000";
inline constexpr const char* kFormatVersion = "1";
inline constexpr const char* kChecksumKey = "mgtrain.checksum";
inline constexpr const char* kFormatKey = "mgtrain.format";
inline constexpr const char* kMetadataKey = "__metadata__";

// product(shape) * element_size, or nullopt on overflow / a negative dimension.
std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, std::size_t element_size);

// The 8-byte little-endian length and the JSON header padded with spaces to a multiple of 8, the checksum
// digits as '0's. The caller has checked the names, dtypes and sizes.
std::string build(const std::map<std::string, std::string>& metadata, const std::vector<TensorRecord>& tensors);

// One tensor of a parsed header, with its data_offsets (relative to the data region).
struct PlacedTensor {
  TensorEntry entry;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

struct Parsed {
  std::map<std::string, std::string> metadata;  // without mgtrain.checksum and mgtrain.format
  std::string format;                           // mgtrain.format ("" when absent)
  std::vector<PlacedTensor> tensors;            // in header order
};

// Parses the header's JSON text and checks its shape: an object, keys unique at every level, __metadata__ an
// object of strings, each tensor {"dtype": known, "shape": [non-negative integers], "data_offsets": [begin, end]}
// with end - begin matching dtype and shape. Throws CorruptCheckpoint("<path>: <what>").
Parsed parse(const std::string& path, std::string_view json);

}  // namespace mgtrain::checkpoint_header
