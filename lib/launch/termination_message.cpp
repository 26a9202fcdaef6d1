// Writes a failed job's one-line root cause to the termination log (see termination_message.hpp).
#include "launch/termination_message.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"
#include "util/fd.hpp"
#include "util/log.hpp"

namespace mgtrain {

std::optional<std::string> termination_log_path(const std::string& configured, const std::string& kubernetes_default) {
  if (configured == kTerminationLogOff) return std::nullopt;
  if (!configured.empty()) return configured;
  if (access(kubernetes_default.c_str(), W_OK) == 0) return kubernetes_default;
  return std::nullopt;
}

void write_termination_message(const FailureReport& report, const std::string& configured, Personality personality) {
  const std::optional<std::string> path = termination_log_path(configured);
  if (!path) return;
  FailureReport shown = report;
  if (personality == Personality::Torchrun) shown.exit_code = exit_code::kFailure;  // as apps/mgtrain/main.cpp ends
  const std::string text = failure_summary_line(shown) + "\n";
  // Truncated in place, never replaced: Kubernetes' file is a mount point.
  Fd file(open(path->c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644));
  int error = errno;
  bool written = false;
  if (file) {
    written = write(file.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
    error = errno;
    if (!file.close() && written) {  // close() can report a deferred write error
      written = false;
      error = errno;
    }
  }
  if (!written) {
    log::warn("cannot write the termination message to {} (launch.termination_log): {}", *path, std::strerror(error));
  }
}

}  // namespace mgtrain
