// What `mgtrain launch` does inside a SLURM job beyond filling settings (slurm_environment.hpp): it says
// what SLURM gave when it starts, and after a preemption — the workers saved a checkpoint and stopped,
// exit 75, on SIGUSR1 or SIGTERM — node 0 requeues the job with `scontrol requeue`, so it runs again
// and resumes (its run id is the job id). docs/slurm.md.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "process/run_capture.hpp"
#include "slurm/slurm_environment.hpp"
#include "supervise/launch_plan.hpp"

namespace mgtrain {

// Runs a short command to its end (run_and_capture by default); tests pass a fake.
using CommandRunner = std::function<CapturedRun(const std::vector<std::string>& argv)>;
CommandRunner default_command_runner();  // run_and_capture with a 30 s timeout

// At start, on the launcher's message stream (util/log.hpp): the one-line summary (slurm_launch_summary),
// notes, and on a requeued job (SLURM_RESTART_COUNT > 0) that this is a rerun and what it resumes from.
// Nothing outside a job.
void announce_slurm_launch(const SlurmDetection& detection, const LoadedConfig& loaded, const LaunchPlan& plan,
                           bool builtin_trainer);

// How the job ended on this node.
struct SlurmJobEnd {
  int node_rank = 0;
  bool saved_and_stopped = false;  // the workers exited 75 (saved a checkpoint and stopped on request)
  bool failed = false;             // a worker failed
  bool after_sigterm = false;      // the launcher itself was stopped by SIGTERM
};

// At the end: when decide_slurm_requeue agrees — after asking `scontrol -o show job` for the job's state,
// so that after a SIGTERM only a job at its time limit is requeued, never one the user cancelled — runs
// `scontrol requeue JOBID`. A failure of scontrol is a warning with its stderr, never an error. What it
// decided goes to the launcher's message stream (util/log.hpp). Returns whether the job was requeued.
bool requeue_after_preemption(const SlurmDetection& detection, const LaunchConfig& launch, const SlurmJobEnd& end,
                              const CommandRunner& run);

}  // namespace mgtrain
