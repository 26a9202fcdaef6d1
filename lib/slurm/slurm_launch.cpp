// The launcher's messages inside SLURM and the requeue after preemption (see slurm_launch.hpp).
#include "slurm/slurm_launch.hpp"

#include <fmt/format.h>

#include "util/error.hpp"
#include "util/log.hpp"
#include "util/value_parsing.hpp"

namespace mgtrain {
namespace {

// The last non-empty line of a command's output, for a one-line warning.
std::string last_line(const std::string& text) {
  std::string line;
  for (const auto& l : split(text, '\n'))
    if (!trim(l).empty()) line = trim(l);
  return line;
}

}  // namespace

CommandRunner default_command_runner() {
  return [](const std::vector<std::string>& argv) {
    CaptureOptions options;
    options.timeout_s = 30.0;
    return run_and_capture(argv, options);
  };
}

void announce_slurm_launch(const SlurmDetection& d, const LoadedConfig& loaded, const LaunchPlan& plan,
                           bool builtin_trainer) {
  if (!d.in_job()) return;
  const SlurmLaunchFacts facts{plan.nnodes,      plan.node_rank,   plan.nproc,
                               plan.master_addr, plan.master_port, plan.run_id};
  log::info("{}", slurm_launch_summary(d, facts, loaded.origin));
  for (const auto& note : d.notes) log::note("SLURM: {}", note);
  if (!d.nproc_note.empty() && loaded.is_default("launch.nproc")) log::note("SLURM: {}", d.nproc_note);
  if (d.restart_count == 0) return;
  std::string what;
  const CheckpointConfig& checkpoint = loaded.config.checkpoint;
  if (!builtin_trainer) {
    what = fmt::format("the program runs again with TORCHELASTIC_RUN_ID={} and can resume from its own files",
                       plan.run_id);
  } else if (checkpoint.dir.empty() || checkpoint.resume == "never") {
    what =
        "checkpoints are off (checkpoint.dir empty or checkpoint.resume: never), so training starts from the beginning";
  } else if (checkpoint.resume == "auto") {
    what = fmt::format("the workers resume from the newest checkpoint in {}", checkpoint.dir);
  } else {
    what = fmt::format("the workers resume from {} (checkpoint.resume)", checkpoint.resume);
  }
  log::info("SLURM_RESTART_COUNT={}: job {} was requeued and this is a rerun of run {}; {}", d.restart_count, d.job_id,
            plan.run_id, what);
}

bool requeue_after_preemption(const SlurmDetection& d, const LaunchConfig& launch, const SlurmJobEnd& end,
                              const CommandRunner& run) {
  if (!d.in_job()) return false;
  if (!end.saved_and_stopped) return false;
  RequeueDecision decision = decide_slurm_requeue(d, launch.slurm_requeue, end.node_rank, end.saved_and_stopped,
                                                  end.failed, false, std::nullopt);
  if (!decision.requeue) {
    if (end.node_rank == 0 && !end.failed) log::info("SLURM job {} is not requeued: {}", d.job_id, decision.reason);
    return false;
  }
  // scancel sends SIGTERM too: the job's state and times tell a time limit from a cancellation.
  std::optional<SlurmJobState> job;
  try {
    CapturedRun show = run({"scontrol", "-o", "show", "job", d.job_id});
    if (show.exit_code == 0) job = parse_slurm_job_state(show.out);
  } catch (const Error&) {
    // scontrol missing: said below (after SIGTERM) or by the requeue itself.
  }
  decision = decide_slurm_requeue(d, launch.slurm_requeue, end.node_rank, end.saved_and_stopped, end.failed,
                                  end.after_sigterm, job);
  if (!decision.requeue) {
    log::info("SLURM job {} is not requeued: {}", d.job_id, decision.reason);
    return false;
  }
  // The requeue ends this job's processes, this launcher too: say it first.
  log::info("requeueing SLURM job {} (scontrol requeue {}): it will run again and resume from run {}", d.job_id,
            d.job_id, d.run_id ? d.run_id->value : d.job_id);
  try {
    CapturedRun requeue = run({"scontrol", "requeue", d.job_id});
    if (requeue.exit_code == 0) return true;
    const std::string why = last_line(requeue.err).empty() ? last_line(requeue.out) : last_line(requeue.err);
    log::warn("scontrol requeue {} failed ({}){}; submit the job again to resume", d.job_id,
              requeue.timed_out        ? "timed out"
              : requeue.exit_code >= 0 ? fmt::format("exit code {}", requeue.exit_code)
                                       : fmt::format("signal {}", requeue.signal),
              why.empty() ? "" : ": " + why);
  } catch (const Error& e) {
    log::warn("cannot run scontrol to requeue SLURM job {}: {}; submit the job again to resume", d.job_id, e.what());
  }
  return false;
}

}  // namespace mgtrain
