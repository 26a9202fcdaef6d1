// The supervisor's side of hang detection (hang_watch.hpp decides, SupervisionPolicy orders): reading the workers'
// progress files, the evidence of a stopped process (and its SIGKILL when the group stops), the line printed at
// detection, the diagnostics collected before the stop (HangDiagnostics), the stacks settling a tie, and the hang's
// facts in the failure report (docs/diagnosis.md).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "output/console_writer.hpp"
#include "process/event_loop.hpp"
#include "supervise/failure_report.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/worker_roster.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

class AttemptCoordinator;

// What is collected when a hang is found, before any worker is signalled (docs/diagnosis.md): e.g. every rank's
// stacks into attempt_<n>/rank_<r>/stacks.txt (log_layout::stacks_file). This default collects nothing; an
// implementation is given to the supervisor with set_diagnostics.
// It takes part in the supervisor's event loop (set_diagnostics adds it): its work waits there, never on a thread.
class HangDiagnostics : public LoopParticipant {
 public:
  struct Target {
    int local_rank = 0;
    int global_rank = 0;
    pid_t pid = -1;
    std::string rank_directory;  // attempt_<n>/rank_<r>
    bool hung = false;           // the root cause; the others wait or go on
  };
  // Starts collecting for `ranks` (every running local rank of `attempt`) and returns at once; the work goes on as a
  // loop participant (the supervisor polls done() every kPollS) and ends by `deadline` (launch.diagnose_timeout after
  // the detection); the workers are stopped after that in any case.
  virtual void collect_diagnostics(int attempt, const std::vector<Target>& ranks,
                                   std::chrono::steady_clock::time_point deadline) {
    (void)attempt;
    (void)ranks;
    (void)deadline;
  }
  // Whether the collection has finished.
  virtual bool done() { return true; }
  // After done(): the rank's top frames in `attempt`, one line per thread, its main (or signalled) thread first
  // (diagnose/top_frames.hpp, computed once by the dump); empty when unknown. They settle a hang that progress alone
  // cannot, and go into the failure report.
  virtual std::vector<std::string> top_frames_of(int attempt, int global_rank) const {
    (void)attempt;
    (void)global_rank;
    return {};
  }
  // What the detection line announces, e.g. "collecting stacks"; "": nothing is collected.
  virtual std::string activity() const { return ""; }
  static constexpr double kPollS = 0.05;
};

class HangResponse {
 public:
  using Clock = std::chrono::steady_clock;

  // Every reference is the supervisor's and outlives this object; `coordinator` is its (null on a single node).
  HangResponse(const LaunchPlan& plan, WorkerRoster& workers, SupervisionPolicy& policy, ConsoleWriter& console,
               const ClockAnchor& started, AttemptCoordinator* const& coordinator);

  void set_diagnostics(HangDiagnostics& diagnostics) { diagnostics_ = &diagnostics; }
  // An attempt's workers started: progress files are read from now on (when hang detection is on).
  void attempt_started(Clock::time_point now);
  // Reads the changed progress files: every probe interval, and at once when `force` (a hang may be due).
  void probe_progress(Clock::time_point now, bool force);
  // The next probe, and the diagnostics' poll while they are collected.
  std::optional<Clock::time_point> next_deadline() const;
  // Once the diagnostics are collected: the stacks settle a tie, and the policy hears of it.
  void poll_diagnostics(Clock::time_point now);

  // The policy's orders and questions (WorkerGroupControl).
  bool worker_stopped(int local_rank) const;
  void kill_worker(int local_rank);
  void no_progress_yet(int local_rank);
  void hang_detected(const HangVerdict& verdict, Clock::time_point deadline);
  void hang_diagnosed();
  // Another node found a hang: collect this node's diagnostics as for its own hang (the detection line begins with
  // `reason`). False when the attempt is not running undiagnosed (policy diagnose_on_request).
  bool diagnose_on_request(const std::string& reason);

  // A hung or waiting rank's last step and report, whether its process was stopped, its stacks file.
  void describe_hang_facts(const WorkerFailure& failure, const std::string& rank_directory, FailedWorker& worker) const;

 private:
  // The stacks name the hung rank where they are clear: the one stopped rank outside any collective.
  void settle_tie_by_stacks();

  const LaunchPlan& plan_;
  WorkerRoster& workers_;
  SupervisionPolicy& policy_;
  ConsoleWriter& console_;
  const ClockAnchor& started_;
  AttemptCoordinator* const& coordinator_;
  HangDiagnostics default_diagnostics_;
  HangDiagnostics* diagnostics_ = &default_diagnostics_;
  std::optional<Clock::time_point> next_probe_;
  std::vector<int> tied_ranks_;      // the hang being diagnosed: its stopped ranks, for the stacks to settle
  std::string requested_diagnosis_;  // diagnose_on_request's reason, while it starts the diagnosis
};

}  // namespace mgtrain
