// A fresh, empty directory under the system temp directory for one test, named after the test and this
// process so parallel ctest runs never share one. The test removes it when done.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace mgtrain::testing {

inline std::filesystem::path scratch_dir(const std::string& prefix, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / (prefix + "-" + name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace mgtrain::testing
