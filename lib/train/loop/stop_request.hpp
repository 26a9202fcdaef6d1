// SIGTERM and SIGUSR1 as a request to stop: the handler only records the signal; the training loop
// notices it at the next step, all ranks agree (step_agreement.hpp), save a checkpoint and exit 75.
// Installed only while the loop runs with checkpoints on; otherwise the signals keep their default action.
// Once the ranks agreed to stop, more of these signals are ignored until the worker exits 75: under SLURM
// every process of the step gets the signal from slurmstepd and the launcher forwards it again, so a late
// copy must not kill a worker that already saved (the launcher's SIGKILL after its grace period still ends it).
//
// SIGUSR2 asks for a checkpoint now while training goes on (the launcher's POST /checkpoint sends it):
// SaveRequest::install() runs first thing in run_worker, so a SIGUSR2 during setup (data, model, rendezvous)
// neither kills the worker (the default action) nor gets lost: the ranks agree on it at the first step and
// rank 0 saves with reason "requested". Only the time before main() (the dynamic loader mapping LibTorch,
// a fraction of a second) is left uncovered; ignoring SIGUSR2 in the launcher's child instead would be
// inherited by `-- COMMAND` programs, and a shell cannot trap a signal ignored on entry.
#pragma once

namespace mgtrain {

class StopRequestHandler {
 public:
  StopRequestHandler();   // installs the handlers for SIGTERM and SIGUSR1
  ~StopRequestHandler();  // restores the previous actions, or ignores the signals after stop_agreed()
  StopRequestHandler(const StopRequestHandler&) = delete;
  StopRequestHandler& operator=(const StopRequestHandler&) = delete;

  // The signal that asked to stop, or 0.
  static int requested();
  // The ranks agreed to stop (this rank's signal or another's): from now on SIGTERM/SIGUSR1 are ignored.
  static void stop_agreed();

  // From worker start (run_worker): SIGUSR1, SLURM's usual warning signal, arriving during setup is recorded
  // instead of killing the worker, and the loop acts on it at its first step (a checkpoint, exit 75).
  static void record_early_warning();
  // Training without checkpoints: SIGUSR1 gets its default action back; one recorded meanwhile is delivered now.
  static void release_early_warning();
};

class SaveRequest {
 public:
  static void install();  // SIGUSR2 -> recorded; stays for the life of the process (idempotent)
  static bool pending();
  static void clear();  // the ranks agreed to save: later SIGUSR2s ask again
};

}  // namespace mgtrain
