// One node's worker group on the event loop (event_loop.hpp): starts the workers as the loop's children,
// has their output pumped into logs and the console, reacts to worker exits, signals, progress files, file
// timers and deadlines as they happen, carries out SupervisionPolicy's orders, and gathers the failure
// report. A multi-node job's node agent drives the attempts (AttemptCoordinator). Hang detection's side of it
// (progress files, the detection line, HangDiagnostics) is in supervisor_hang.cpp.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "elastic/file_timer_pipe.hpp"
#include "output/console_writer.hpp"
#include "output/line_prefix.hpp"
#include "supervise/event_loop.hpp"
#include "supervise/failure_report.hpp"
#include "supervise/heartbeat_file.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/port_probe.hpp"
#include "supervise/supervision_policy.hpp"
#include "supervise/worker_env.hpp"

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

// What is collected when a hang is found, before any worker is signalled (docs/diagnosis.md): e.g. every rank's
// stacks into attempt_<n>/rank_<r>/stacks.txt (log_layout::stacks_file). This default collects nothing; an
// implementation is given to the supervisor with set_diagnostics.
class HangDiagnostics {
 public:
  struct Target {
    int local_rank = 0;
    int global_rank = 0;
    pid_t pid = -1;
    std::string rank_directory;  // attempt_<n>/rank_<r>
    bool hung = false;           // the root cause; the others wait or go on
  };
  virtual ~HangDiagnostics() = default;
  // Starts collecting for `ranks` (every running local rank of `attempt`). It may return at once and go on in the
  // background (the supervisor polls done() every kPollS) or block, but never beyond `deadline`
  // (launch.diagnose_timeout after the detection); the workers are stopped after that in any case.
  virtual void collect_diagnostics(int attempt, const std::vector<Target>& ranks,
                                   std::chrono::steady_clock::time_point deadline) {
    (void)attempt;
    (void)ranks;
    (void)deadline;
  }
  // Whether the collection has finished.
  virtual bool done() { return true; }
  // After done(): the rank's top frames, one line per thread, its main (or signalled) thread first
  // (diagnose/top_frames.hpp); empty when unknown. They settle a hang that progress alone cannot.
  virtual std::vector<std::string> top_frames_of(int global_rank) const {
    (void)global_rank;
    return {};
  }
  // What the detection line announces, e.g. "collecting stacks"; "": nothing is collected.
  virtual std::string activity() const { return ""; }
  static constexpr double kPollS = 0.05;
};

class Supervisor : private WorkerGroupControl, private LoopHandler, private LoopParticipant {
 public:
  // Port retries of a single-node job whose store port the launcher picked (supervision_policy.hpp).
  static constexpr int kMaxPortRetries = 5;
  // How soon after its start rank 0 must fail for an "address already in use" to count as its store's start.
  static constexpr double kStoreStartWindowS = 120.0;
  // How long into a stop the console says which workers it still waits for (at most half the grace period).
  static constexpr double kStopNoticeS = 3.0;

  // `first_port` is the master port of attempt 0 (already checked or picked, and reserved by `ports`). Later
  // attempts pick a fresh port through `ports` when plan.picks_port() (the probe's reservation moves to it); when
  // rank 0 then finds the picked port taken, the group starts again on a new one, uncounted, up to
  // kMaxPortRetries times. The supervisor keeps its own copy of `plan`.
  Supervisor(LaunchPlan plan, EnvMap parent_environment, std::string config_file, PortProbe& ports, int first_port,
             int console_stdout_fd = 1, int console_stderr_fd = 2);
  // Whatever still runs (after an exception) is killed and reaped.
  ~Supervisor() override;

  // Runs the job to its end. Throws UsageError when the command cannot be executed.
  SupervisionResult run();

  // Multi-node (the policy must be in coordinated mode; see AttemptCoordinator).
  void set_coordinator(AttemptCoordinator* coordinator) { coordinator_ = coordinator; }
  // What to collect when a hang is found (kept by the caller, outliving run()); default: nothing.
  void set_diagnostics(HangDiagnostics& diagnostics) { diagnostics_ = &diagnostics; }
  // Joins the loop (the node agent's sockets, the status API and resource sampler) until removed.
  void add_participant(LoopParticipant& participant) { loop_.add(participant); }
  void remove_participant(LoopParticipant& participant) { loop_.remove(participant); }
  // Starts `attempt` (a rendezvous round) with that round's plan (node rank, ranks, world size, workers'
  // store, run directory) and config file, which replace the supervisor's from now on.
  void begin_attempt(int attempt, LaunchPlan round_plan, std::string config_file);
  void stop_workers_on_request();
  // Another node found a hang: collect this node's diagnostics as for its own hang (the detection line begins with
  // `reason`), then on_hang_diagnosed. False when the attempt is not running undiagnosed (policy diagnose_on_request).
  bool diagnose_on_request(const std::string& reason);
  void finish(int exit_code);
  const SupervisionPolicy& policy() const { return policy_; }
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
  // The report entry of a failure of the current attempt (stderr tail, error file, ...).
  void announce_restart(int attempt);  // one console line: which attempt, after what, where the logs are
  FailedWorker describe_failure(const WorkerFailure& failure) const;
  // The table and failure.json facts of the last attempt's failures, when it had any.
  std::optional<FailureReport> local_failure_report() const;

 private:
  using Clock = std::chrono::steady_clock;
  bool finished_and_drained(Clock::time_point now);
  SupervisionResult result();

  struct Worker {
    int local_rank = 0;
    pid_t pid = -1;
    bool alive = false;
    std::unique_ptr<HeartbeatFile> heartbeat;
  };

  void start_workers(int attempt) override;
  void signal_running_workers(int signal) override;
  void waiting_for_exit(const std::vector<int>& local_ranks, int signal, Clock::time_point kill_at) override;
  void not_restarted(const WorkerFailure& root) override;
  void group_failing(const WorkerFailure& failure) override;
  void attempt_ended() override;
  bool store_port_taken(const WorkerFailure& root) override;
  // Hang detection (supervisor_hang.cpp).
  bool worker_stopped(int local_rank) override;
  void kill_worker(int local_rank) override;
  void no_progress_yet(int local_rank) override;
  void hang_detected(const HangVerdict& verdict, Clock::time_point deadline) override;
  void hang_diagnosed() override {
    if (coordinator_) coordinator_->on_hang_diagnosed();
  }
  void poll_diagnostics(Clock::time_point now);
  // The stacks name the hung rank where they are clear: the one stopped rank outside any collective.
  void settle_tie_by_stacks();
  // A hung or waiting rank's last step and report, whether its process was stopped, its stacks file.
  void describe_hang_facts(const WorkerFailure& failure, const std::string& rank_directory, FailedWorker& worker) const;
  // The wall clock (Unix milliseconds) of a steady time of this launch.
  long long unix_millis_at(Clock::time_point time) const;
  void announce_port_retry(int attempt, int port);
  std::string store_port_hint(int attempt) const;

  // LoopHandler
  void on_child_exits(const std::vector<ChildExit>& exits, Clock::time_point now) override;
  void on_signal(int signal, Clock::time_point now) override;
  // LoopParticipant: stdin (--hosts agents), the file timer pipe, heartbeats, the policy's deadlines.
  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, Clock::time_point now) override;
  std::optional<Clock::time_point> next_deadline() const override;
  void on_time(Clock::time_point now) override;

  // Reads the changed progress files: every probe interval, and at once when `force` (a hang may be due).
  void probe_heartbeats(Clock::time_point now, bool force);
  void read_file_timers();
  void check_file_timers();
  FailureReport build_failure_report() const;

  LaunchPlan plan_;  // the current attempt's
  EnvMap parent_environment_;
  std::string config_file_;
  PortProbe& ports_;
  int first_port_;
  std::vector<int> port_by_attempt_;  // the workers' store port of each attempt
  int port_retries_announced_ = 0;

  ConsoleWriter console_;
  LinePrefix line_prefix_;  // the console prefix of worker lines (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)
  // PET_DUPLICATE_STDOUT_FILTERS / PET_DUPLICATE_STDERR_FILTERS (output/duplicate_filter.hpp); none: no file.
  std::optional<std::vector<std::string>> duplicate_filters_[2];
  SupervisionPolicy policy_;
  EventLoop loop_;  // after console_: its outputs show on it
  bool watch_stdin_ = false;

  std::vector<Worker> workers_;                      // the current attempt's
  std::vector<std::vector<pid_t>> pids_by_attempt_;  // for the report
  std::chrono::steady_clock::time_point started_steady_;
  std::chrono::system_clock::time_point started_wall_;
  std::optional<std::chrono::steady_clock::time_point> next_heartbeat_probe_;
  std::unique_ptr<FileTimerWatch> file_timers_;                  // TORCHELASTIC_ENABLE_FILE_TIMER=1 (plan_.timer_file)
  std::map<std::pair<int, int>, ExpiredFileTimer> timer_kills_;  // (attempt, local rank) -> the timer that fired
  std::chrono::steady_clock::time_point attempt_started_;
  AttemptCoordinator* coordinator_ = nullptr;
  HangDiagnostics default_diagnostics_;
  HangDiagnostics* diagnostics_ = &default_diagnostics_;
  std::vector<int> tied_ranks_;      // the hang being diagnosed: its stopped ranks, for the stacks to settle
  std::string requested_diagnosis_;  // diagnose_on_request's reason, while it starts the diagnosis
};

}  // namespace mgtrain
