// Reading small text files and the last lines of large ones (log tails for the failure report).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mgtrain {

// The last `count` lines of the file (at most the last `max_bytes` bytes are read). Empty when
// the file is missing or empty.
std::vector<std::string> read_last_lines(const std::string& path, std::size_t count, std::size_t max_bytes = 64 * 1024);

// The file's content up to `max_bytes`, or nullopt when it does not exist / cannot be read.
std::optional<std::string> read_small_file(const std::string& path, std::size_t max_bytes = 1024 * 1024);

}  // namespace mgtrain
