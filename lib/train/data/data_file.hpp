// Reading data files whole into memory, plain or gzip-compressed (zlib), for the data set readers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mgtrain {

// The path of `name` in `directory`: `name` itself if it exists, else `name`.gz.
// Throws UsageError naming both candidates when neither exists.
std::string find_data_file(const std::string& directory, const std::string& name);

// The bytes of `path`, inflated when the file starts with the gzip magic (1f 8b), whatever its name.
// A missing file or a corrupt/truncated gzip stream: UsageError naming the file; other read failures: SystemError.
std::vector<uint8_t> read_data_file(const std::string& path);

// Whether `path` exists (any type).
bool data_file_exists(const std::string& path);

// Whether both paths exist and name the same file (same device and inode).
bool same_file(const std::string& a, const std::string& b);

}  // namespace mgtrain
