// signalfd set-up and tear-down for the supervisor.
#include "process/signal_channel.hpp"

#include <sys/signalfd.h>
#include <unistd.h>
#include <cerrno>
#include <iterator>

#include "util/error.hpp"

namespace mgtrain {

namespace {

// The signals the launcher handles; the stopping ones get back what they had when the channel ends.
constexpr int kHandled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
constexpr int kRestored[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};

}  // namespace

SignalChannel::SignalChannel() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : kHandled) sigaddset(&handled, sig);
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
  // Every handled signal gets its default disposition, now that it is blocked (a pending one stays pending): an
  // inherited SIG_IGN (a script's `mgtrain launch ... &` ignores SIGINT and SIGQUIT, nohup SIGHUP) would discard
  // SIGCHLD (and auto-reap the workers) and is what a stop or save request must not depend on. The workers start with
  // every default anyway (worker_process.cpp).
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  static_assert(std::size(kRestored) == std::size(decltype(original_actions_){}));
  for (std::size_t index = 0; index < std::size(kRestored); ++index) {
    sigaction(kRestored[index], &default_action, &original_actions_[index]);
  }
  for (int sig : {SIGUSR1, SIGUSR2}) sigaction(sig, &default_action, nullptr);
}

SignalChannel::~SignalChannel() {
  take_pending();  // consumed here, so unblocking does not act on signals the supervisor already handled
  fd_.reset();
  sigaction(SIGPIPE, &original_sigpipe_, nullptr);
  for (std::size_t index = 0; index < std::size(kRestored); ++index) {
    sigaction(kRestored[index], &original_actions_[index], nullptr);
  }
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
