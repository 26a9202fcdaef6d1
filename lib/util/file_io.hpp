// Reading a whole file into a string: read_file throws on failure, try_read_file returns nothing.
#pragma once

#include <optional>
#include <string>

namespace mgtrain {

// The whole file. Throws SystemError naming the path when it cannot be opened or read.
std::string read_file(const std::string& path);
// The whole file, or nullopt when it cannot be opened or read (absent, unreadable, a directory).
std::optional<std::string> try_read_file(const std::string& path);

}  // namespace mgtrain
