// Delivers the launcher's signals (SIGCHLD and the ones it forwards) as readable events on a
// signalfd, so the event loop (event_loop.hpp) sees them without handlers or races. Restores the
// signal mask and SIGPIPE's disposition when destroyed.
#pragma once

#include <signal.h>

#include <vector>

#include "util/fd.hpp"

namespace mgtrain {

class SignalChannel {
 public:
  // Blocks SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, then gives each its default disposition (a
  // parent may have left them ignored), and ignores SIGPIPE. The destructor ignores SIGUSR1/SIGUSR2 from then on (late
  // save/stop requests) and restores the rest. One at a time.
  SignalChannel();
  ~SignalChannel();
  SignalChannel(const SignalChannel&) = delete;
  SignalChannel& operator=(const SignalChannel&) = delete;

  int fd() const { return fd_.get(); }
  // The signals received since the last call, in arrival order (non-blocking).
  std::vector<int> take_pending();

 private:
  Fd fd_;
  sigset_t original_mask_;
  struct sigaction original_sigpipe_;
  struct sigaction original_actions_[5];  // SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT
};

}  // namespace mgtrain
