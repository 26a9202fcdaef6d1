// Creates the run directory and moves an earlier launch's files aside (see run_directory.hpp).
#include "supervise/run_directory.hpp"

#include <filesystem>
#include <fstream>
#include <vector>

#include "contract/log_layout.hpp"
#include "util/error.hpp"
#include "util/strings.hpp"

namespace mgtrain {

namespace fs = std::filesystem;

void create_run_directory(const std::string& run_dir) {
  std::error_code error;
  fs::create_directories(run_dir, error);
  if (error) {
    throw Error("cannot create run directory " + run_dir + ": " + error.message() +
                ": choose a writable directory with --log-dir (launch.log_dir)");
  }
}

std::string prepare_run_directory(const std::string& run_dir) {
  create_run_directory(run_dir);
  std::error_code error;
  std::vector<fs::path> earlier;
  for (const auto& entry : fs::directory_iterator(run_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name == log_layout::kConfigFileName || entry.path() == fs::path(log_layout::failure_json(run_dir)) ||
        log_layout::attempt_of(name))
      earlier.push_back(entry.path());
  }
  if (earlier.empty()) return "";
  fs::path archive;
  for (int k = 1;; ++k) {
    archive = fs::path(run_dir) / "earlier" / std::to_string(k);
    if (!fs::exists(archive)) break;
  }
  fs::create_directories(archive, error);
  if (error) throw Error("cannot create " + archive.string() + ": " + error.message());
  for (const auto& path : earlier) {
    fs::rename(path, archive / path.filename(), error);
    if (error) throw Error("cannot move " + path.string() + " to " + archive.string() + ": " + error.message());
  }
  return archive.string();
}

void write_run_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) throw Error("cannot write " + path + ": check that launch.log_dir is writable (--log-dir)");
}

}  // namespace mgtrain
