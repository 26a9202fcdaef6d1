// The `--hosts` launcher's decisions: first failure, settling, stop, kill, exit code (see hosts_policy.hpp).
#include "hosts/hosts_policy.hpp"

#include <algorithm>
#include <csignal>

#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
HostsPolicy::HostsPolicy(std::size_t agents, double grace_period_s) : grace_period_s_(grace_period_s), ended_(agents) {}

bool HostsPolicy::any_running() const {
  return std::any_of(ended_.begin(), ended_.end(), [](const std::optional<ExitStatus>& ended) { return !ended; });
}

void HostsPolicy::stop(Time now) {
  // The agents stop their own workers within their grace period, then exit.
  if (!kill_deadline_) kill_deadline_ = now + steady_seconds(grace_period_s_ + kKillMarginS);
}

HostsOrder HostsPolicy::on_agent_exit(std::size_t agent, const ExitStatus& status, Time now) {
  if (ended_.at(agent)) return {};
  ended_[agent] = status;
  if (!failed_exit(status) || first_failure_ || launcher_signal_) return {};
  first_failure_ = agent;
  settle_deadline_ = now + steady_seconds(settle_seconds());
  return {HostsAction::kWaitForOthers, 0};
}

HostsOrder HostsPolicy::on_signal(int signal, Time now) {
  if (!stops_the_job(signal)) return {HostsAction::kForward, signal};
  if (launcher_signal_) return {HostsAction::kKillAll, SIGKILL};  // the second Ctrl-C
  launcher_signal_ = signal;
  stop(now);
  return {HostsAction::kStopOnSignal, signal};
}

HostsOrder HostsPolicy::on_time(Time now) {
  if (settle_deadline_ && now >= *settle_deadline_) {
    settle_deadline_.reset();
    if (any_running()) {
      stop(now);
      return {HostsAction::kStopStragglers, SIGTERM};
    }
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    if (any_running()) return {HostsAction::kKillAll, SIGKILL};
  }
  return {};
}

std::optional<HostsPolicy::Time> HostsPolicy::next_deadline() const {
  if (settle_deadline_ && kill_deadline_) return std::min(*settle_deadline_, *kill_deadline_);
  return settle_deadline_ ? settle_deadline_ : kill_deadline_;
}

int HostsPolicy::exit_code() const {
  if (launcher_signal_) {
    const bool every_agent_saved =
        std::all_of(ended_.begin(), ended_.end(), [](const std::optional<ExitStatus>& ended) {
          return ended && !ended->signaled && ended->value == mgtrain::exit_code::kStoppedAfterCheckpoint;
        });
    return stopped_job_exit_code(*launcher_signal_, every_agent_saved);
  }
  if (first_failure_) return ended_[*first_failure_]->as_exit_code();
  for (const std::optional<ExitStatus>& ended : ended_) {
    if (ended && !ended->signaled && ended->value == mgtrain::exit_code::kStoppedAfterCheckpoint) {
      return mgtrain::exit_code::kStoppedAfterCheckpoint;
    }
  }
  return 0;
}

}  // namespace mgtrain
