// Where a run's files live: <log_dir>/<run_id>/{config.yaml,failure.json,attempt_<n>/rank_<r>/...}.
#pragma once

#include <cstdlib>
#include <string>

namespace mgtrain::log_layout {

// Where runs are kept when no --log-dir is given: $MGTRAIN_LAUNCH_LOG_DIR (what `mgtrain launch` was told), else
// "runs" (launch.log_dir's default). `mgtrain runs`, `status` and `plot` look there.
inline std::string default_log_dir() {
  const char* from_environment = std::getenv("MGTRAIN_LAUNCH_LOG_DIR");
  return from_environment && *from_environment ? from_environment : "runs";
}

inline std::string config_file(const std::string& run_dir) { return run_dir + "/config.yaml"; }
inline std::string failure_json(const std::string& run_dir) { return run_dir + "/failure.json"; }
inline std::string attempt_dir(const std::string& run_dir, int attempt) {
  return run_dir + "/attempt_" + std::to_string(attempt);
}
inline std::string rank_dir(const std::string& run_dir, int attempt, int global_rank) {
  return attempt_dir(run_dir, attempt) + "/rank_" + std::to_string(global_rank);
}
inline std::string stdout_log(const std::string& rank_directory) { return rank_directory + "/stdout.log"; }
inline std::string stderr_log(const std::string& rank_directory) { return rank_directory + "/stderr.log"; }
// torch's @record writes the worker's exception here (TORCHELASTIC_ERROR_FILE).
inline std::string error_file(const std::string& rank_directory) { return rank_directory + "/error.json"; }
// Workers that opt in to the hang watchdog touch this file (MGTRAIN_HEARTBEAT_FILE).
inline std::string heartbeat_file(const std::string& rank_directory) { return rank_directory + "/heartbeat"; }

}  // namespace mgtrain::log_layout
