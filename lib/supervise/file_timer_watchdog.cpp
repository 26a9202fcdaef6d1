// The file timers' side of the supervisor: requests read, expired timers signalled.
#include "supervise/file_timer_watchdog.hpp"

#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "util/exit_status.hpp"

namespace mgtrain {

FileTimerWatchdog::FileTimerWatchdog(const std::string& path, const WorkerRoster& workers, SupervisionPolicy& policy,
                                     ConsoleWriter& console)
    : watch_(std::in_place, path), workers_(workers), policy_(policy), console_(console) {}

const ExpiredFileTimer* FileTimerWatchdog::fired_at(int attempt, int local_rank) const {
  const auto found = fired_.find({attempt, local_rank});
  return found == fired_.end() ? nullptr : &found->second;
}

void FileTimerWatchdog::add_fds(std::vector<pollfd>& fds) {
  if (watch_) fds.push_back(pollfd{watch_->fd(), POLLIN, 0});
}

void FileTimerWatchdog::on_ready(const pollfd& ready, LoopTime) {
  if (!watch_ || ready.fd != watch_->fd()) return;
  for (const std::string& problem : watch_->on_readable()) {
    console_.message(log::Level::Warning, "file timer: {} (torch's FileTimerClient format expected); ignored", problem);
  }
}

std::optional<LoopTime> FileTimerWatchdog::next_deadline() const {
  if (!watch_ || policy_.finished()) return std::nullopt;
  return watch_->next_deadline(LoopClock::now());
}

// torch's FileTimerServer signals any pid; the launcher signals only its own workers and their descendants
// (a process in a worker's process group), so a stray request cannot kill an unrelated process.
void FileTimerWatchdog::on_time(LoopTime now) {
  if (!watch_) return;
  int fired = 0;  // the last signal sent, once every expired timer's is: as torch's server then signals itself
  for (const ExpiredFileTimer& timer : watch_->take_expired()) {
    const auto pid = static_cast<pid_t>(timer.pid);
    const RosterWorker* owner = workers_.owner_of(pid, getpgid(pid));
    if (!owner && kill(pid, 0) != 0 && errno == ESRCH) continue;  // it has ended
    if (!owner) {
      console_.message(log::Level::Warning,
                       "file timer \"{}\" of pid {} expired, but that pid is not one of this job's "
                       "running workers: not signalled",
                       timer.scope_id, timer.pid);
      continue;
    }
    console_.message(log::Level::Warning, "local rank {} (pid {}): file timer \"{}\" expired; sending it {}",
                     owner->local_rank, timer.pid, timer.scope_id,
                     timer.signal == 0 ? std::string("signal 0 (nothing)") : signal_name(timer.signal));
    if (timer.signal != 0) kill(pid, timer.signal);
    fired_[{policy_.record().attempt(), owner->local_rank}] = timer;
    if (timer.signal != 0) fired = timer.signal;
  }
  if (fired != 0) policy_.on_file_timer_fired(fired, now);
}

}  // namespace mgtrain
