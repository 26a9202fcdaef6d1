// The supervisor's table of started workers.
#include "supervise/worker_roster.hpp"

namespace mgtrain {

void WorkerRoster::begin_attempt(int attempt, int nproc) {
  current_.clear();
  pids_by_attempt_.resize(static_cast<std::size_t>(attempt) + 1);
  pids_by_attempt_[attempt].assign(nproc, -1);
}

void WorkerRoster::add(int attempt, RosterWorker worker) {
  pids_by_attempt_.at(attempt).at(worker.local_rank) = worker.pid;
  current_.push_back(std::move(worker));
}

std::optional<int> WorkerRoster::mark_exited(pid_t pid) {
  for (RosterWorker& worker : current_) {
    if (!worker.alive || worker.pid != pid) continue;
    worker.alive = false;
    return worker.local_rank;
  }
  return std::nullopt;
}

const RosterWorker* WorkerRoster::running(int local_rank) const {
  for (const RosterWorker& worker : current_) {
    if (worker.alive && worker.local_rank == local_rank) return &worker;
  }
  return nullptr;
}

const RosterWorker* WorkerRoster::owner_of(pid_t pid, pid_t group) const {
  const RosterWorker* owner = nullptr;
  for (const RosterWorker& worker : current_) {
    if (worker.alive && (worker.pid == pid || worker.pid == group)) owner = &worker;
  }
  return owner;
}

}  // namespace mgtrain
