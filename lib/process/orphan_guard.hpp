// A tiny helper process that outlives the launcher only to kill the workers' process groups when the
// launcher dies, even by SIGKILL. PR_SET_PDEATHSIG kills each worker itself; this also kills what
// the workers started (their children do not inherit PDEATHSIG).
#pragma once

#include <sys/types.h>

#include "util/fd.hpp"

namespace mgtrain {

class OrphanGuard {
 public:
  // Forks the guard. It waits on a pipe; when the pipe closes (the launcher exited or was killed),
  // it sends SIGKILL to every process group still being watched and exits.
  OrphanGuard();
  // Closes the pipe and reaps the guard.
  ~OrphanGuard();
  OrphanGuard(const OrphanGuard&) = delete;
  OrphanGuard& operator=(const OrphanGuard&) = delete;

  // The pipe's write end (close-on-exec). A worker registers its process group itself: between
  // fork and exec it writes its pid (an int) here, so there is no moment in which the worker runs
  // and the guard does not know it (see WorkerProcessSpec::announce_fd).
  int announce_fd() const { return pipe_write_.get(); }
  // The group is gone (reaped and killed): never kill that id again, it may be reused.
  void forget(pid_t process_group);

 private:
  void send(int message);

  pid_t guard_pid_ = -1;
  Fd pipe_write_;
};

}  // namespace mgtrain
