// A tiny helper process that outlives the launcher only to kill the workers' process groups when the
// launcher dies, even by SIGKILL. PR_SET_PDEATHSIG kills each worker itself; this also kills what
// the workers started (their children do not inherit PDEATHSIG). The guard is a POSIX shell loop started through
// start_child (the one fork and exec), in a process group of its own and ignoring every signal it can.
// Its protocol, one line per message on its stdin (each shorter than PIPE_BUF, so writers never interleave):
// "+G\n" watches process group G, "-G\n" forgets it; end of file kills every group still watched.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "util/fd.hpp"

namespace mgtrain {

class OrphanGuard {
 public:
  // Starts the guard. It waits on a pipe; when the pipe closes (the launcher exited or was killed),
  // it sends SIGKILL to every process group still being watched and exits.
  OrphanGuard();
  // Closes the pipe and reaps the guard.
  ~OrphanGuard();
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;

  // The pipe's write end (close-on-exec). A worker registers its process group itself: between
  // fork and exec it writes its message (message_line) here, so there is no moment in which the worker runs
  // and the guard does not know it (see WorkerProcessSpec::announce_fd).
  int announce_fd() const { return pipe_write_.get(); }
  // The group is gone (reaped and killed): never kill that id again, it may be reused.
  void forget(pid_t process_group);

  // A message's longest line.
  static constexpr std::size_t kMessageSize = 24;
  // The line "+G\n" (watch: `watch` true) or "-G\n" (forget) for process group G, written into `line`; returns its
  // length. Async-signal-safe: a worker writes its own between fork and exec.
  static std::size_t message_line(bool watch, pid_t process_group, char (&line)[kMessageSize]);

 private:
  pid_t guard_pid_ = -1;
  Fd pipe_write_;
};

}  // namespace mgtrain
