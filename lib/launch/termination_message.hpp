// Kubernetes' termination message (docs/launch.md#termination-message): when a job fails, the launcher writes its
// one-line root cause (supervise/failure_report.hpp's failure_summary_line) to the container's termination log, so that
// `kubectl describe pod` shows why the pod ended. launch.termination_log names the file; empty means
// /dev/termination-log when it exists (Kubernetes mounts it there by default), "none" turns it off. In both
// personalities.
#pragma once

#include <optional>
#include <string>

#include "config/config_request.hpp"
#include "supervise/failure_report.hpp"

namespace mgtrain {

inline constexpr const char* kKubernetesTerminationLog = "/dev/termination-log";
inline constexpr const char* kTerminationLogOff = "none";

// The file to write for `configured` (launch.termination_log): it, the Kubernetes default when that exists, or none.
std::optional<std::string> termination_log_path(const std::string& configured,
                                                const std::string& kubernetes_default = kKubernetesTerminationLog);

// Writes the report's summary line (and a newline) to that file, replacing what it held; the exit code it names is
// the launcher's (the torchrun personality ends 1 whatever the worker's code). A file that cannot be written is a
// warning: the job's exit code stays the job's.
void write_termination_message(const FailureReport& report, const std::string& configured, Personality personality);

}  // namespace mgtrain
