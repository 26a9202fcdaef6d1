// The header of a .npy file: the Python dict literal numpy writes after the preamble ("{'descr': '<f4',
// 'fortran_order': False, 'shape': (5, 3), }"), parsed and checked for what NpyFile reads. Used by npy_file.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker_io/npy_file.hpp"

namespace mgtrain {

struct NpyHeader {
  NpyType type = NpyType::Float32;
  std::vector<std::int64_t> shape;  // at least one dimension, each >= 0
};

// Parses `text` (the header bytes of the file `path`, padding included): keys in any order, any spacing, trailing
// commas, double or single quotes, Python 2's 5L. A UsageError naming `path` for a damaged dict (with the offending
// text), a missing, unknown or repeated key, an unsupported dtype, fortran_order True, a shape that is not a tuple of
// integers >= 0, or a 0-d shape.
NpyHeader parse_npy_header(const std::string& path, std::string_view text);

}  // namespace mgtrain
