// How a worker process ended (exit code or signal) and how that maps to the launcher's exit code.
#pragma once

#include <string>

namespace mgtrain {

struct ExitStatus {
  bool signaled = false;  // true: killed by signal `value`; false: exited with code `value`
  int value = 0;

  static ExitStatus exited(int code) { return {false, code}; }
  static ExitStatus killed_by(int signal) { return {true, signal}; }
  // Decodes a wait()/waitpid() status word.
  static ExitStatus from_wait_status(int wait_status);

  bool success() const { return !signaled && value == 0; }
  // The shell convention: the exit code itself, or 128 + N for signal N.
  int as_exit_code() const { return signaled ? 128 + value : value; }
  // "exit code 3" or "signal SIGSEGV (11)".
  std::string describe() const;
};

// "SIGSEGV" for 11, "SIGRTMIN+3" for real-time signals, "signal 99" when unknown.
std::string signal_name(int signal);

// Exit code of the launcher when a worker stopped sending heartbeats (like timeout(1)).
inline constexpr int kHungWorkerExitCode = 124;

// Exit code of every node of a multi-node job when a node was lost (silent past launch.node_timeout,
// or gone) or the nodes did not all arrive within launch.join_timeout, and no worker failure explains
// it (EX_UNAVAILABLE).
inline constexpr int kNodeLostExitCode = 69;

}  // namespace mgtrain
