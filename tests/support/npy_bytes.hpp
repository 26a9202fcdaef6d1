// .npy files built byte by byte, as numpy.save writes them, for the tests of the .npy reader (tests/worker_io) and
// of the npy data set (tests/train).
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

namespace mgtrain::testing::npy {

// A .npy file's bytes as numpy.save writes them: magic, version, header length, the dict, spaces up to 64-byte
// alignment of the data, '\n', then `data`.
inline std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  const std::size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>(header.size() >> (8 * i) & 0xff);
  return out + header + data;
}

inline std::string dict_text(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace mgtrain::testing::npy
