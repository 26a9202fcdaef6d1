// SIGTERM and SIGUSR1 as a request to stop: the handler only records the signal; the training loop
// notices it at the next step, all ranks agree (step_agreement.hpp), save a checkpoint and exit 75.
// Installed only while the loop runs with checkpoints on; otherwise the signals keep their default action.
// Once the ranks agreed to stop, more of these signals are ignored until the worker exits 75: under SLURM
// every process of the step gets the signal from slurmstepd and the launcher forwards it again, so a late
// copy must not kill a worker that already saved (the launcher's SIGKILL after its grace period still ends it).
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
};

}  // namespace mgtrain
