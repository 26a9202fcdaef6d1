// What a SLURM allocation tells mgtrain, read from the environment by pure functions, each value with
// the variable it came from (docs/slurm.md has the table). `mgtrain launch` started as one task per node
// (`srun --ntasks-per-node=1 mgtrain launch CONFIG`) fills the launch settings nobody gave from it;
// `mgtrain env` shows it; the worker's one-task-per-rank layout shares the store address and port rules.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config_loader.hpp"
#include "contract/slurm_task.hpp"
#include "util/environment.hpp"

namespace mgtrain {

enum class SlurmLayout {
  kNone,                // SLURM_JOB_ID unset: not inside a SLURM job
  kJobShell,            // inside a job but not in a job step: the sbatch script or an salloc shell (first node only)
  kLauncherPerNode,     // an srun step with one task per node: one `mgtrain launch` per node
  kSeveralTasksPerNode  // an srun step with more tasks than nodes: wrong for `mgtrain launch` (see `problem`)
};

struct SlurmDetection {
  SlurmLayout layout = SlurmLayout::kNone;
  std::string job_id;     // SLURM_JOB_ID
  int restart_count = 0;  // SLURM_RESTART_COUNT: > 0 when the job was requeued
  // What `mgtrain launch` fills in for launch.<key> when no source gave it.
  std::optional<SlurmValue> nnodes, node_rank, master_addr, master_port, run_id, nproc;
  std::vector<std::string> notes;  // things worth saying, e.g. a job shell of a multi-node job uses one node
  std::string nproc_note;          // why nproc was not detected (no GPUs), said when nproc is left at its default
  std::string problem;             // non-empty: this layout cannot work; the text says what to do instead

  bool in_job() const { return layout != SlurmLayout::kNone; }
};

SlurmDetection detect_slurm(const EnvMap& env);

// "launcher per node (srun step, one task per node)", ...
std::string describe_layout(SlurmLayout layout);

// GPUs in a SLURM GPU count: "4", "a100:4", "gpu:a100:4", "a100:2,v100:2" (a sum). nullopt: not a count.
std::optional<int> parse_slurm_gpu_count(const std::string& text);

// ---- what `mgtrain launch` does with it ----

// Every detected launch setting as {"launch.<key>", value with its variable}, in a fixed order.
std::vector<std::pair<std::string, SlurmValue>> slurm_detected_values(const SlurmDetection& detection);

// Every detected launch setting as launch.<key>, value and origin "SLURM (<variable>)".
std::vector<DetectedSetting> slurm_launch_settings(const SlurmDetection& detection);

// The config loader's `detect` hook for `mgtrain launch`: nothing with launch.slurm: off or outside a job;
// otherwise slurm_launch_settings (nproc only when launch.gpu_ids is not set). Throws UsageError with
// detection.problem for a step with several tasks per node.
std::function<std::vector<DetectedSetting>(const LoadedConfig&)> slurm_launch_detector(EnvMap env);

// Whether a config origin (LoadedConfig::origin) says the value came from SLURM's detection.
bool is_slurm_origin(const std::string& origin);

// The facts of a launch that the one-line SLURM summary reports.
struct SlurmLaunchFacts {
  int nnodes = 1, node_rank = 0, nproc = 1;
  std::string master_addr;
  int master_port = 0;  // 0: picked per attempt
  std::string run_id;
};
// "SLURM job 123: node 1 of 2 (SLURM_NODEID, SLURM_STEP_NUM_NODES), master node01:24123
// (SLURM_STEP_NODELIST, SLURM_JOB_ID), 4 workers (SLURM_GPUS_ON_NODE), run id slurm-123 (SLURM_JOB_ID)";
// values given explicitly say "given". `origin`: LoadedConfig::origin.
std::string slurm_launch_summary(const SlurmDetection& detection, const SlurmLaunchFacts& facts,
                                 const std::map<std::string, std::string>& origin);

// ---- requeue after preemption ----

struct RequeueDecision {
  bool requeue = false;
  std::string reason;  // why not, for the log (empty when requeue is true)
};

// What `scontrol -o show job ID` says about the job (fields absent or unreadable stay empty).
struct SlurmJobState {
  std::string state;                      // JobState: RUNNING, COMPLETING, TIMEOUT, CANCELLED, ...
  std::optional<long long> run_time_s;    // RunTime
  std::optional<long long> time_limit_s;  // TimeLimit; nullopt also for UNLIMITED
};
SlurmJobState parse_slurm_job_state(const std::string& scontrol_output);
// SLURM durations: "[D-]HH:MM:SS", "MM:SS", "MM"; nullopt for UNLIMITED, INVALID or garbage.
std::optional<long long> parse_slurm_duration(const std::string& text);

// Node 0 requeues the job when its workers saved a checkpoint and stopped on request (exit 75), nothing
// failed and launch.slurm_requeue is on — after a warning signal (SIGUSR1: --signal=USR1@90, scancel
// --signal=USR1). After a SIGTERM only when the job reached its time limit (JobState TIMEOUT, or RunTime
// >= TimeLimit while it completes): `scancel` sends SIGTERM too, and its job must not come back.
// `job`: from scontrol, when it could be asked.
RequeueDecision decide_slurm_requeue(const SlurmDetection& detection, bool requeue_enabled, int node_rank,
                                     bool workers_saved_and_stopped, bool failed, bool after_sigterm,
                                     const std::optional<SlurmJobState>& job);

}  // namespace mgtrain
