// Locates mgtrain-worker (see worker_binary.hpp).
#include "contract/worker_binary.hpp"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <memory>

#include <fmt/format.h>

#include "util/error.hpp"

namespace mgtrain {

std::string executable_directory() {
  char buffer[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) throw SystemError("cannot read /proc/self/exe", errno);
  std::string path(buffer, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::vector<std::string> wheel_workers(const std::string& bin_directory) {
  std::vector<std::string> found;
  for (const char* site : {"site-packages", "dist-packages"}) {
    const std::string pattern = bin_directory + "/../lib/python3.*/" + site + "/mgtrain_trainer/bin/mgtrain-worker";
    glob_t matches{};
    const std::unique_ptr<glob_t, void (*)(glob_t*)> release(&matches, globfree);
    if (glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches) != 0) continue;
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
      if (access(matches.gl_pathv[i], X_OK) == 0) found.emplace_back(matches.gl_pathv[i]);
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::string find_worker_binary(const std::string& configured) {
  const auto refuse = [](const std::string& path, int error) {
    return UsageError(
        fmt::format("worker binary {} is not executable ({}); build it (cmake --build build), install the trainer "
                    "wheel (pip install mgtrain-trainer, docs/install.md) or point launch.worker / "
                    "MGTRAIN_LAUNCH_WORKER / --worker at it",
                    path, std::strerror(error)));
  };
  if (!configured.empty()) {
    if (access(configured.c_str(), X_OK) != 0) throw refuse(configured, errno);
    return configured;
  }
  const std::string directory = executable_directory();
  std::string beside = directory + "/mgtrain-worker";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  const int error = errno;
  const std::vector<std::string> wheels = wheel_workers(directory);
  if (wheels.size() == 1) return wheels.front();
  if (wheels.empty()) throw refuse(beside, error);
  std::string list;
  for (const std::string& path : wheels) list += "\n  " + path;
  throw UsageError("this environment holds the trainer wheel's worker more than once (one per Python version?):" +
                   list + "\nchoose one with launch.worker / MGTRAIN_LAUNCH_WORKER / --worker");
}

}  // namespace mgtrain
