// Locates mgtrain-worker (see worker_binary.hpp).
#include "contract/worker_binary.hpp"

#include <unistd.h>

#include <climits>

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

std::string find_worker_binary(const std::string& configured) {
  std::string path = configured.empty() ? executable_directory() + "/mgtrain-worker" : configured;
  if (access(path.c_str(), X_OK) != 0) {
    throw UsageError(
        fmt::format("worker binary {} is not executable ({}); build it (cmake --build build) or point "
                    "launch.worker / MGTRAIN_LAUNCH_WORKER / --worker at it",
                    path, std::strerror(errno)));
  }
  return path;
}

}  // namespace mgtrain
