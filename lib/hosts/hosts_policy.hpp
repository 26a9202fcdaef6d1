// The `--hosts` launcher's decisions, free of I/O (a sibling of supervise/supervision_policy.hpp): the
// agents' exits, the launcher's signals and the time go in, one order comes out, for hosts_launch.cpp to
// carry out. Which signal stops the job and which exit fails it is supervision_policy's one rule. Unit
// tests drive it with made-up times.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

#include "util/exit_status.hpp"

namespace mgtrain {

enum class HostsAction {
  kNone,
  kWaitForOthers,   // the first agent failed: the others get settle_seconds() to end by themselves
  kStopOnSignal,    // the launcher got `signal`: pass it to every agent and close their stdin pipes
  kStopStragglers,  // the others did not end in time: `signal` (SIGTERM) to them, stdin pipes closed
  kKillAll,         // SIGKILL every agent still running (a second stop signal, or the kill deadline)
  kForward,         // pass `signal` on to every agent (SIGUSR1/SIGUSR2: the agents forward it to their workers)
};

struct HostsOrder {
  HostsAction action = HostsAction::kNone;
  int signal = 0;
};

class HostsPolicy {
 public:
  using Time = std::chrono::steady_clock::time_point;
  // After the first failure, how long beyond the grace period the others get (they hear of it through
  // the rendezvous within the grace period); after a stop, how long beyond it before SIGKILL.
  static constexpr double kSettleMarginS = 5.0;
  static constexpr double kKillMarginS = 2.0;

  HostsPolicy(std::size_t agents, double grace_period_s);

  HostsOrder on_agent_exit(std::size_t agent, const ExitStatus& status, Time now);
  HostsOrder on_signal(int signal, Time now);
  // Deadlines that passed, one order at a time (another one due comes with the next call).
  HostsOrder on_time(Time now);
  std::optional<Time> next_deadline() const;

  bool any_running() const;
  double settle_seconds() const { return grace_period_s_ + kSettleMarginS; }
  std::optional<int> launcher_signal() const { return launcher_signal_; }
  std::optional<std::size_t> first_failure() const { return first_failure_; }
  // After the launcher's signal N: 128+N, or 75 when every agent exited 75 (stopped_job_exit_code). Else the first
  // failed agent's code, else 75 when an agent saved and stopped on request, else 0. Meaningful once every agent ended.
  int exit_code() const;

 private:
  void stop(Time now);

  double grace_period_s_;
  std::vector<std::optional<ExitStatus>> ended_;  // per agent, once it exited
  std::optional<int> launcher_signal_;
  std::optional<std::size_t> first_failure_;
  std::optional<Time> settle_deadline_, kill_deadline_;
};

}  // namespace mgtrain
