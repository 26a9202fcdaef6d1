// Error types shared by both binaries and the exit codes they map to (docs/exit-codes.md).
// Code below the binaries' main() throws these; each main() catches them once and prints one message.
#pragma once

#include <stdexcept>
#include <string>

namespace mgtrain {

// Documented process exit codes of mgtrain and mgtrain-worker.
namespace exit_code {
inline constexpr int kSuccess = 0;
inline constexpr int kFailure = 1;  // a runtime failure of mgtrain itself (I/O, system call, ...)
inline constexpr int kUsage = 2;    // bad flags, config, environment or input files
// A worker asked to stop (SIGTERM, SIGUSR1) saved a checkpoint and stopped; rerunning resumes. The launcher
// passes it on when that is why the job ended, and never counts it as a failure to restart from.
inline constexpr int kStoppedAfterCheckpoint = 75;  // EX_TEMPFAIL: try again later
// A launcher stopped by signal N exits 128+N (130 SIGINT, 143 SIGTERM): supervise/supervision_policy.hpp's
// stopped_exit_code, the one rule.
}  // namespace exit_code

// Base of every error mgtrain raises on purpose. The message is complete and user-facing. Control characters
// other than line feed and tab are kept escaped in it ("\0", "\x1b": util/strings.hpp's escape_control_characters):
// a value it quotes cannot cut it short at a NUL or reach the terminal as escape sequences.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = exit_code::kFailure);
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// The user asked for something invalid: flags, config keys and values, environment, input files.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message, exit_code::kUsage) {}
};

// A command line that does not parse: an unknown flag, an option without its value, a value its parser cannot convert
// (torchrun's argparse: type=int, type=float, choices), no program. Exit 2 in both personalities; the torchrun
// personality exits 1 for every other error, as torchrun, whose argparse refuses only these (docs/torchrun.md).
class CommandLineError : public UsageError {
 public:
  using UsageError::UsageError;
};

// A system call failed; the message names the call, the object (path, address) and strerror(errno).
class SystemError : public Error {
 public:
  SystemError(const std::string& what, int err);
  int error_number() const { return errno_; }

 private:
  int errno_;
};

}  // namespace mgtrain
