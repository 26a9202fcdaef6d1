// The workers the supervisor started: the current attempt's (local rank, pid, running or not, progress file) and
// every attempt's pids for the failure report. What the supervisor's parts (the worker group, file timers, hang
// response, failure report) share about them.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <vector>

#include "supervise/heartbeat_file.hpp"

namespace mgtrain {

struct RosterWorker {
  int local_rank = 0;
  pid_t pid = -1;
  bool alive = false;
  std::unique_ptr<HeartbeatFile> heartbeat;  // hang detection on: its progress file
};

class WorkerRoster {
 public:
  // Forgets the previous attempt's workers (their pids stay known to pid_of).
  void begin_attempt(int attempt, int nproc);
  void add(int attempt, RosterWorker worker);
  // The running worker with `pid` is running no more: its local rank, or nullopt when `pid` is none of them.
  std::optional<int> mark_exited(pid_t pid);
  const std::vector<RosterWorker>& current() const { return current_; }
  std::vector<RosterWorker>& current() { return current_; }
  // The running worker of `local_rank`, or nullptr.
  const RosterWorker* running(int local_rank) const;
  // The running worker whose process is `pid` or leads `group` (pid's process group, a worker's descendant).
  const RosterWorker* owner_of(pid_t pid, pid_t group) const;
  pid_t pid_of(int attempt, int local_rank) const { return pids_by_attempt_.at(attempt).at(local_rank); }

 private:
  std::vector<RosterWorker> current_;
  std::vector<std::vector<pid_t>> pids_by_attempt_;
};

}  // namespace mgtrain
