// Decoding wait statuses and naming signals for reports and exit codes.
#include "util/exit_status.hpp"

#include <sys/wait.h>
#include <csignal>

namespace mgtrain {

ExitStatus ExitStatus::from_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return killed_by(WTERMSIG(wait_status));
  return exited(WEXITSTATUS(wait_status));
}

std::string ExitStatus::describe() const {
  if (signaled) return "signal " + signal_name(value) + " (" + std::to_string(value) + ")";
  return "exit code " + std::to_string(value);
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGSTKFLT:
      return "SIGSTKFLT";
    case SIGCHLD:
      return "SIGCHLD";
    case SIGCONT:
      return "SIGCONT";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTSTP:
      return "SIGTSTP";
    case SIGTTIN:
      return "SIGTTIN";
    case SIGTTOU:
      return "SIGTTOU";
    case SIGURG:
      return "SIGURG";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGVTALRM:
      return "SIGVTALRM";
    case SIGPROF:
      return "SIGPROF";
    case SIGWINCH:
      return "SIGWINCH";
    case SIGIO:
      return "SIGIO";
    case SIGPWR:
      return "SIGPWR";
    case SIGSYS:
      return "SIGSYS";
    default:
      break;
  }
  if (signal >= SIGRTMIN && signal <= SIGRTMAX) {
    return signal == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+" + std::to_string(signal - SIGRTMIN);
  }
  return "signal " + std::to_string(signal);
}

}  // namespace mgtrain
