// One node's worker group on the event loop (process/event_loop.hpp): the loop's owner, which hands worker exits,
// signals and deadlines to SupervisionPolicy as they happen, and the parts that carry out its orders: WorkerGroup
// (starting and signalling the workers), HangResponse (progress files, hang diagnostics), FileTimerWatchdog (torch's
// file timers), StorePorts (the workers' store port and its retries) and FailureReporter (the failure report). A
// multi-node job's node agent drives the attempts (AttemptCoordinator).
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host/port_probe.hpp"
#include "output/console_writer.hpp"
#include "process/event_loop.hpp"
#include "supervise/failure_report.hpp"
#include "supervise/failure_reporter.hpp"
#include "supervise/file_timer_watchdog.hpp"
#include "supervise/hang_response.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/store_ports.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/worker_group.hpp"
#include "supervise/worker_roster.hpp"

namespace mgtrain {

struct SupervisionResult {
  int exit_code = 0;
  std::optional<int> launcher_signal;     // the launcher was stopped by this signal
  bool stopped_by_file_timer = false;     // ... sent by an expired file timer (SupervisionPolicy::on_file_timer_fired)
  bool stopped_after_checkpoint = false;  // the workers saved a checkpoint and stopped on request (exit 75)
  int attempts = 1;                       // attempts started
  std::optional<FailureReport> failure;   // set when a worker failed in the last attempt
};

// The node agent of a multi-node job (node_agent.hpp) drives the attempts through begin_attempt /
// stop_workers_on_request / finish and hears of the group's first failure and of each attempt's end. Its
// sockets and deadlines join the loop as a LoopParticipant (add_participant). Absent on a single node.
class AttemptCoordinator {
 public:
  virtual ~AttemptCoordinator() = default;
  virtual void on_group_failing(const WorkerFailure& failure) = 0;
  virtual void on_attempt_ended() = 0;
  // Once the policy has finished: whether the loop may end (nothing left to send).
  virtual bool done(std::chrono::steady_clock::time_point now) const = 0;
  // A signal that stops the job (stops_the_job) after the policy has finished (the job is decided; only
  // teardown is left): stop lingering now. The exit code stays the job's.
  virtual void on_signal_during_teardown(int /*signal*/) {}
  // Hang detection: this node found a hang (its failures are recorded, its diagnostics started; not called for
  // diagnose_on_request), and its diagnostics are collected: the workers run until stop_workers_on_request.
  virtual void on_hang_detected() {}
  virtual void on_hang_diagnosed() {}
};

class Supervisor : private LoopHandler, private LoopParticipant {
 public:
  // How long into a stop the console says which workers it still waits for (at most half the grace period).
  static constexpr double kStopNoticeS = 3.0;

  // `first_port` is the master port of attempt 0 (already checked or picked, and reserved by `ports`; see
  // StorePorts). The supervisor keeps its own copy of `plan`. Throws UsageError when the file timer's pipe cannot
  // be made.
  Supervisor(LaunchPlan plan, EnvMap parent_environment, std::string config_file, PortProbe& ports, int first_port,
             int console_stdout_fd = 1, int console_stderr_fd = 2);
  // Whatever still runs (after an exception) is killed and reaped.
  ~Supervisor() override;

  // Runs the job to its end. Throws UsageError when the command cannot be executed.
  SupervisionResult run();

  // Multi-node (the policy must be in coordinated mode; see AttemptCoordinator).
  void set_coordinator(AttemptCoordinator* coordinator) { coordinator_ = coordinator; }
  // What to collect when a hang is found (kept by the caller, outliving run()); default: nothing.
  // `diagnostics` joins the loop and must outlive the supervisor.
  void set_diagnostics(HangDiagnostics& diagnostics) {
    hang_.set_diagnostics(diagnostics);
    loop_.add(diagnostics);
  }
  // Joins the loop (the node agent's sockets, the status API and resource sampler) until removed.
  void add_participant(LoopParticipant& participant) { loop_.add(participant); }
  void remove_participant(LoopParticipant& participant) { loop_.remove(participant); }
  // Starts `attempt` (a rendezvous round) with that round's plan (node rank, ranks, world size, workers'
  // store, run directory) and config file, which replace the supervisor's from now on.
  void begin_attempt(int attempt, LaunchPlan round_plan, std::string config_file);
  void stop_workers_on_request();
  // Another node found a hang: collect this node's diagnostics as for its own hang (the detection line begins with
  // `reason`), then on_hang_diagnosed. False when the attempt is not running undiagnosed (policy diagnose_on_request).
  bool diagnose_on_request(const std::string& reason) { return hang_.diagnose_on_request(reason); }
  void finish(int exit_code);
  const SupervisionPolicy& policy() const { return policy_; }
  // The current attempt's plan (begin_attempt replaces it each round).
  const LaunchPlan& plan() const { return plan_; }
  // The status API's requests: SIGUSR2 = save a checkpoint and go on, SIGUSR1 = save and stop with exit 75; both are
  // forwarded to every worker's process group, in either personality (SupervisionPolicy::forward_to_workers).
  void act_on_signal(int signal) { policy_.forward_to_workers(signal); }
  // The current attempt's workers, for the status API.
  struct WorkerView {
    int local_rank = 0;
    int global_rank = 0;
    pid_t pid = -1;
    bool alive = false;
  };
  std::vector<WorkerView> worker_views() const;
  ConsoleWriter& console() { return console_; }
  // The workers' snapshot stores and the replicas of another node's (snapshot replication reads and fills them).
  SnapshotStores& snapshot_stores() { return group_.snapshot_stores(); }
  // The report entry of a failure of the current attempt (stderr tail, error file, ...).
  FailedWorker describe_failure(const WorkerFailure& failure) const { return reporter_.describe(failure); }
  // The table and failure.json facts of the last attempt's failures, when it had any.
  std::optional<FailureReport> local_failure_report() const { return reporter_.report(); }

 private:
  using Clock = std::chrono::steady_clock;
  bool finished_and_drained(Clock::time_point now);
  SupervisionResult result() const;

  // LoopHandler
  void on_child_exits(const std::vector<ChildExit>& exits, Clock::time_point now) override;
  void on_signal(int signal, Clock::time_point now) override;
  // LoopParticipant: stdin (--hosts agents), the policy's and hang detection's deadlines.
  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, Clock::time_point now) override;
  std::optional<Clock::time_point> next_deadline() const override;
  void on_time(Clock::time_point now) override;

  LaunchPlan plan_;  // the current attempt's
  EnvMap parent_environment_;
  std::string config_file_;
  ConsoleWriter console_;
  ClockAnchor started_;
  AttemptCoordinator* coordinator_ = nullptr;
  WorkerRoster workers_;
  SupervisionPolicy policy_;  // orders group_, declared below: the policy only keeps the reference until start()
  EventLoop loop_;            // after console_: its outputs show on it
  StorePorts ports_;
  HangResponse hang_;
  std::unique_ptr<FileTimerWatchdog> file_timers_;  // TORCHELASTIC_ENABLE_FILE_TIMER=1 (plan_.timer_file)
  WorkerGroup group_;
  FailureReporter reporter_;
  bool watch_stdin_ = false;
};

}  // namespace mgtrain
