// The one temporary directory of the tests: a fresh directory under the system temp directory ($TMPDIR or /tmp),
// made with mkdtemp so parallel ctest runs never share one, removed with everything in it when the TempDir goes.
// path() for the directory, dir / "name" for a path inside it (both std::string; fs::path(dir.path()) where a
// test wants a filesystem path).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace mgtrain::testing {

class TempDir {
 public:
  // The directory is named <prefix>-XXXXXX, the prefix telling whose leftovers a crashed test left.
  explicit TempDir(const std::string& prefix = "mgtrain-test") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace mgtrain::testing
