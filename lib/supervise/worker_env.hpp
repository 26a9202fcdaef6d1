// The environment contract between launcher and worker: torchrun's variables (so unmodified torch
// programs work) plus mgtrain's own, and the per-worker expansion of the command line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "contract/worker_variables.hpp"
#include "supervise/launch_plan.hpp"
#include "util/environment.hpp"

namespace mgtrain {

struct WorkerSlot {
  int local_rank = 0;
  int attempt = 0;          // attempt_<n>/ of the logs; TORCHELASTIC_RESTART_COUNT unless plan.restart_count is set
  int master_port = 0;      // the port of this attempt
  std::string config_file;  // MGTRAIN_CONFIG_FILE; empty: not set
  // Whether this worker's stdout reaches the launcher's console, and that console's terminal width (0: not a
  // terminal): MGTRAIN_CONSOLE_IS_TTY / MGTRAIN_CONSOLE_COLUMNS (console_progress.hpp), so rank 0 knows to
  // draw a progress bar. Workers whose stdout goes only to their log get neither.
  bool stdout_to_console = false;
  int console_columns = 0;
  int snapshot_fd = -1;                // MGTRAIN_SNAPSHOT_FD: the worker's snapshot store; -1: none
  std::string snapshot_replicas = "";  // MGTRAIN_SNAPSHOT_REPLICAS ("rank:fd,..."); "": none
};

// The parent's environment with the worker's variables set on top.
EnvMap build_worker_environment(const LaunchPlan& plan, const WorkerSlot& slot, const EnvMap& parent);

// Whether workers get their progress file (MGTRAIN_HEARTBEAT_FILE): whenever something reads it (hang
// detection, the status API; straggler detection belongs here too).
bool workers_get_progress_file(const LaunchPlan& plan);

// Each worker's OpenMP thread count (docs/launch.md#threads), decided once per launch (a node agent: per round).
struct WorkerThreads {
  std::optional<int> omp_num_threads;  // each worker's OMP_NUM_THREADS; none: the launcher's environment as it is
  std::string notice;                  // to say once on the console (without "mgtrain: "); empty: nothing to say
};
// launch.threads_per_worker N: N. Else the launcher's OMP_NUM_THREADS, when set, wins. Else `mgtrain launch`
// divides the CPUs the launcher may use (plan.cpus: affinity mask, cgroup quota) among the workers that share
// them (plan.workers_sharing_cpus, else nproc), at least 1 each, one worker per node included; the torchrun
// personality keeps torchrun's rule (1 with more than one worker per node, else nothing).
WorkerThreads choose_worker_threads(const LaunchPlan& plan, const EnvMap& parent);

// What the workers run for a run whose config file is `config_file`: plan.command, and for the built-in
// trainer the config file after it (`<worker> <run_dir>/config.yaml`).
std::vector<std::string> worker_command(const LaunchPlan& plan, const std::string& config_file);

// The command with every "${local_rank}" replaced by the worker's local rank.
std::vector<std::string> expand_worker_command(const std::vector<std::string>& command, int local_rank);

}  // namespace mgtrain
