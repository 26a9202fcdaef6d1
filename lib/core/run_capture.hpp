// Runs a short-lived helper program and captures its stdout (used by `mgtrain env` to ask the worker
// binary for the LibTorch facts). Not for workers: those go through the supervisor.
#pragma once

#include <string>
#include <vector>

namespace mgtrain {

struct CapturedRun {
  int exit_code = -1;      // -1: killed by the timeout or a signal
  std::string output;      // stdout
  bool timed_out = false;
};

// Throws SystemError when the program cannot be started.
CapturedRun run_and_capture(const std::vector<std::string>& argv, double timeout_s);

}  // namespace mgtrain
