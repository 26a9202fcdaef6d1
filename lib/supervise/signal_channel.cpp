// signalfd set-up and tear-down for the supervisor.
#include "supervise/signal_channel.hpp"

#include <sys/signalfd.h>
#include <unistd.h>
#include <cerrno>

#include "util/error.hpp"

namespace mgtrain {

SignalChannel::SignalChannel() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&handled, sig);
  if (sigprocmask(SIG_BLOCK, &handled, &original_mask_) != 0) throw SystemError("sigprocmask()", errno);
  fd_.reset(signalfd(-1, &handled, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_) {
    int err = errno;
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    throw SystemError("signalfd()", err);
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &original_sigpipe_);
  // An inherited SIG_IGN for SIGCHLD would discard the signal (and auto-reap the workers).
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(SIGCHLD, &default_action, &original_sigchld_);
  // The save/stop requests must reach the signalfd, which an inherited (or a previous channel's) SIG_IGN prevents.
  for (int sig : {SIGUSR1, SIGUSR2}) sigaction(sig, &default_action, nullptr);
}

SignalChannel::~SignalChannel() {
  take_pending();  // consumed here, so unblocking does not act on signals the supervisor already handled
  fd_.reset();
  sigaction(SIGPIPE, &original_sigpipe_, nullptr);
  sigaction(SIGCHLD, &original_sigchld_, nullptr);
  // A save/stop request that arrives after supervision (slurmstepd signals every process of a step, again and
  // again, while the launcher writes its report) has nothing left to act on: ignored, instead of SIGUSR1's default
  // action killing the launcher with 138 in place of the job's exit code.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  for (int sig : {SIGUSR1, SIGUSR2}) sigaction(sig, &ignore, nullptr);
  sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
}

std::vector<int> SignalChannel::take_pending() {
  std::vector<int> signals;
  signalfd_siginfo info;
  while (true) {
    ssize_t got = read(fd_.get(), &info, sizeof info);
    if (got == static_cast<ssize_t>(sizeof info)) {
      signals.push_back(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    break;  // EAGAIN: nothing more
  }
  return signals;
}

}  // namespace mgtrain
