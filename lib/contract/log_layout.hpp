// Where a run's files live: <log_dir>/<run_id>/{config.yaml,failure.json,attempt_<n>/rank_<r>/...}. Every name in a
// run folder is spelled here and nowhere else in lib/ and apps/ (as leveldb's filename.h; scripts/check/
// run_folder_names.py fails on such a name as a string literal anywhere else).
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

namespace mgtrain::log_layout {

// Where `mgtrain launch` keeps runs when launch.log_dir is its default but neither ./runs nor the current directory
// is writable (as torchrun writes under the system temp directory): $TMPDIR (or /tmp)/mgtrain-<user>/runs.
inline std::string temp_log_dir(const std::map<std::string, std::string>& environment) {
  auto tmpdir = environment.find("TMPDIR");
  std::string base = tmpdir != environment.end() && !tmpdir->second.empty() ? tmpdir->second : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const passwd* user = getpwuid(geteuid());
  std::string name = user && user->pw_name && *user->pw_name ? user->pw_name : std::to_string(geteuid());
  return base + "/mgtrain-" + name + "/runs";
}

// Where runs are kept when no --log-dir is given: $MGTRAIN_LAUNCH_LOG_DIR (what `mgtrain launch` was told), else
// "runs" (launch.log_dir's default), or temp_log_dir() where `mgtrain launch` fell back to it. `mgtrain runs`,
// `status` and `plot` look there.
inline std::string default_log_dir() {
  const char* from_environment = std::getenv("MGTRAIN_LAUNCH_LOG_DIR");
  if (from_environment && *from_environment) return from_environment;
  if (access("runs", F_OK) == 0 || access(".", W_OK) == 0) return "runs";
  const char* tmpdir = std::getenv("TMPDIR");
  return temp_log_dir(tmpdir ? std::map<std::string, std::string>{{"TMPDIR", tmpdir}}
                             : std::map<std::string, std::string>{});
}

// The resolved config the workers run, by its name in the run folder (run.json records it relative to the folder).
inline constexpr const char* kConfigFileName = "config.yaml";
inline std::string config_file(const std::string& run_dir) { return run_dir + "/" + kConfigFileName; }
inline std::string failure_json(const std::string& run_dir) { return run_dir + "/failure.json"; }
// The run record: status, attempts, outcome (observe/run_record.hpp, docs/monitoring.md#run-history).
inline std::string run_json(const std::string& run_dir) { return run_dir + "/run.json"; }
// The trainer's metric rows (docs/monitoring.md), written by global rank 0.
inline std::string metrics_jsonl(const std::string& run_dir) { return run_dir + "/metrics.jsonl"; }
// The launcher's resource samples of this node's ranks (observe/resource_sampler.hpp).
inline std::string resources_jsonl(const std::string& run_dir) { return run_dir + "/resources.jsonl"; }
// Locked (flock) by the launcher the run directory belongs to for as long as it lives, with its pid and host
// inside: a second launch with the same run id is refused while it is held (launch/run_directory_lock.hpp).
inline std::string launcher_lock(const std::string& run_dir) { return run_dir + "/launcher.lock"; }
// The status API's token (0600) and its endpoint, written by the launcher that serves it, read by `mgtrain status`
// (launch/launch_monitor.hpp, docs/monitoring.md).
inline std::string status_token_file(const std::string& run_dir) { return run_dir + "/status_token"; }
inline std::string status_endpoint_file(const std::string& run_dir) { return run_dir + "/status_endpoint"; }
inline constexpr const char* kAttemptPrefix = "attempt_";
inline std::string attempt_dir(const std::string& run_dir, int attempt) {
  return run_dir + "/" + kAttemptPrefix + std::to_string(attempt);
}
// The attempt number of an entry of a run folder named like attempt_dir's ("attempt_3": 3); nullopt for any other name.
inline std::optional<int> attempt_of(const std::string& name) {
  const std::string prefix = kAttemptPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int number = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9' || number > 100000000) return std::nullopt;
    number = number * 10 + (name[i] - '0');
  }
  return number;
}
inline std::string rank_dir(const std::string& run_dir, int attempt, int global_rank) {
  return attempt_dir(run_dir, attempt) + "/rank_" + std::to_string(global_rank);
}
inline std::string stdout_log(const std::string& rank_directory) { return rank_directory + "/stdout.log"; }
inline std::string stderr_log(const std::string& rank_directory) { return rank_directory + "/stderr.log"; }
// torchrun's --duplicate-stdout-filters / --duplicate-stderr-filters: the matching lines of all the node's ranks.
inline std::string filtered_log(const std::string& attempt_directory, bool is_stderr) {
  return attempt_directory + (is_stderr ? "/filtered_stderr.log" : "/filtered_stdout.log");
}
// torch's @record writes the worker's exception here (TORCHELASTIC_ERROR_FILE).
inline std::string error_file(const std::string& rank_directory) { return rank_directory + "/error.json"; }
// The progress file workers touch or write (MGTRAIN_HEARTBEAT_FILE, contract/heartbeat_line.hpp).
inline std::string heartbeat_file(const std::string& rank_directory) { return rank_directory + "/heartbeat"; }
// Every thread's stack of a rank, dumped before a hung job is stopped (docs/diagnosis.md).
inline std::string stacks_file(const std::string& rank_directory) { return rank_directory + "/stacks.txt"; }
// The stacks of the `number`th dump on request (`mgtrain status --stacks`, POST /stacks): stacks-1.txt, stacks-2.txt.
inline std::string stacks_on_request_file(const std::string& rank_directory, int number) {
  return rank_directory + "/stacks-" + std::to_string(number) + ".txt";
}
// What the armed Python hook's faulthandler appends a rank's Python stacks to (diagnose/python_hook.hpp).
inline std::string faulthandler_file(const std::string& rank_directory) { return rank_directory + "/faulthandler.txt"; }
// The NCCL flight recorder's dumps of an attempt's ranks (diagnose/flight_recorder.hpp).
inline std::string flight_recorder_dir(const std::string& attempt_directory) {
  return attempt_directory + "/flight_recorder";
}
// The Python stack hook (sitecustomize.py) of a run, put first on its Python workers' PYTHONPATH (docs/diagnosis.md).
inline std::string python_hook_dir(const std::string& run_dir) { return run_dir + "/python_hook"; }

}  // namespace mgtrain::log_layout
