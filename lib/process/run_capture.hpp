// Runs a short-lived program to completion and captures its output (through start_child, worker_process.hpp):
// `mgtrain env` asks the worker binary for the LibTorch facts this way, scontrol and eu-stack run so, and tests run
// the binaries through it. Not for workers: those run on the event loop.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mgtrain {

struct CaptureOptions {
  double timeout_s = 60.0;                     // then SIGKILL
  std::map<std::string, std::string> set_env;  // added to (or replacing in) the inherited environment
  std::vector<std::string> unset_env;          // removed from it
  std::string working_directory;               // empty: inherit
  // The child leads a process group of its own, and the timeout's SIGKILL goes to the whole group: for programs
  // that start others (a launcher and its workers), which would otherwise outlive the timeout holding the pipes.
  bool own_process_group = false;
};

struct CapturedRun {
  int exit_code = -1;  // -1: ended by a signal (see signal) or by the timeout
  int signal = 0;
  bool timed_out = false;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Throws SystemError when the program cannot be started.
CapturedRun run_and_capture(const std::vector<std::string>& argv, const CaptureOptions& options = {});

}  // namespace mgtrain
