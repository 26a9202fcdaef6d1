// SIGTERM and SIGUSR1 as a request to stop: the handler only records the signal; the training loop
// notices it at the next step, all ranks agree (step_agreement.hpp), save a checkpoint and exit 75.
// Installed only while the loop runs with checkpoints on; otherwise the signals keep their default action.
#pragma once

namespace mgtrain {

class StopRequestHandler {
 public:
  StopRequestHandler();   // installs the handlers for SIGTERM and SIGUSR1
  ~StopRequestHandler();  // restores the previous actions
  StopRequestHandler(const StopRequestHandler&) = delete;
  StopRequestHandler& operator=(const StopRequestHandler&) = delete;

  // The signal that asked to stop, or 0.
  static int requested();
};

}  // namespace mgtrain
