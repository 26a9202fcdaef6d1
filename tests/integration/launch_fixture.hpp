// Helpers for the launcher's integration tests: worker scripts, running run_launch in-process with a captured
// console, starting a launcher process to send it signals, and finding processes of a job that are still alive.
// Their temporary directory is support/temp_dir.hpp's TempDir.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "process/run_capture.hpp"
#include "support/temp_dir.hpp"
#include "util/strings.hpp"

namespace mgtrain::testing {

// Writes an executable /bin/sh script and returns its path.
std::string write_script(const std::string& path, const std::string& body);
std::string read_text(const std::string& path);
bool file_exists(const std::string& path);
// A socket listening on a kernel-chosen loopback port (stored in `port`); the caller closes it.
int listening_socket(int& port);
// A TCP port free on every interface, as the launcher picks one (SocketPortProbe; its reservation is released).
int free_port();

// Launch settings for tests: a run id, logs inside `dir`, a short grace period.
LaunchConfig test_launch_config(const TempDir& dir, int nproc);

struct LaunchOutcome {
  int exit_code = -1;
  std::string out;  // the launcher's console stdout
  std::string err;  // the launcher's console stderr
  std::string run_dir;
};

// Calls run_launch in this process with `command` (empty: the built-in trainer), the environment
// of this process plus `extra_env`, and the console captured into files.
LaunchOutcome launch_in_process(const LaunchConfig& launch, const std::vector<std::string>& command,
                                const std::vector<std::pair<std::string, std::string>>& extra_env = {});

// A child process (a launcher) with stdout/stderr going to files.
struct ChildProcess {
  pid_t pid = -1;
  std::string out_path;
  std::string err_path;
};
ChildProcess start_process(const std::vector<std::string>& argv, const std::string& output_prefix,
                           const std::vector<std::pair<std::string, std::string>>& extra_env = {});
// The exit code (128+N for a signal) or nullopt when it did not end within `timeout`.
std::optional<int> wait_for_exit(pid_t pid, std::chrono::milliseconds timeout);

// Polls `condition` every few milliseconds until it holds or `timeout` passes.
bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// Live (non-zombie) processes whose process group is in `groups` or whose command line contains `marker`.
std::vector<pid_t> live_job_processes(const std::set<pid_t>& groups, const std::string& marker);

// The path of the launcher test harness binary (tests/integration/launch_harness.cpp).
std::string harness_path();

// The mgtrain binary under test, and `mgtrain launch --log-dir DIR/runs ARGS...` run to its end (60 s at most).
extern const std::string kMgtrain;
CapturedRun mgtrain_launch(const TempDir& dir, std::vector<std::string> args, CaptureOptions options = {});

}  // namespace mgtrain::testing
