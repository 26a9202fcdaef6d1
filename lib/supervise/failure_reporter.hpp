// The failure report of the node's worker group (failure_report.hpp): each failed worker of the policy's record
// described (rank, pid, status, stderr tail, error file, hints, the file timer or hang behind it) and the report of
// the last attempt. A view over the supervisor's parts, which it reads and never changes.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "supervise/failure_report.hpp"
#include "supervise/file_timer_watchdog.hpp"
#include "supervise/hang_response.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/store_ports.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/worker_group.hpp"
#include "supervise/worker_roster.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

class FailureReporter {
 public:
  // Every reference is the supervisor's and outlives this object; `file_timers` may hold nothing.
  FailureReporter(const LaunchPlan& plan, const WorkerRoster& workers, const SupervisionPolicy& policy,
                  const WorkerGroup& group, const StorePorts& ports, const HangResponse& hang,
                  const std::unique_ptr<FileTimerWatchdog>& file_timers, const ClockAnchor& started,
                  AttemptCoordinator* const& coordinator);

  // The report entry of one failure (of any attempt).
  FailedWorker describe(const WorkerFailure& failure) const;
  // The table and failure.json facts of the last attempt's failures, when it had any.
  std::optional<FailureReport> report() const;

 private:
  const LaunchPlan& plan_;
  const WorkerRoster& workers_;
  const SupervisionPolicy& policy_;
  const WorkerGroup& group_;
  const StorePorts& ports_;
  const HangResponse& hang_;
  const std::unique_ptr<FileTimerWatchdog>& file_timers_;
  const ClockAnchor& started_;
  AttemptCoordinator* const& coordinator_;
};

}  // namespace mgtrain
