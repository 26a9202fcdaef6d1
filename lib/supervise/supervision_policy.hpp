// The supervisor's decisions, free of I/O: when to stop the worker group, when to escalate SIGTERM
// to SIGKILL, whether to restart (or start again on a new store port, uncounted). What it has seen (failures, the
// root cause, the exit code they give) is its SupervisionRecord (supervision_record.hpp). Hang detection
// (hang_watch.hpp) decides which rank hung and which wait; the policy then gives the supervisor up to
// launch.diagnose_timeout to collect diagnostics before the stop. The supervisor (supervisor.cpp, on the event loop)
// feeds it events with the current time and carries out its orders through WorkerGroupControl; unit tests drive it with
// a fake control and made-up times. Also the one rule of which signals stop a job and which exits fail it
// (stops_the_job, failed_exit), which failures a restart cannot help (restart_can_help), and the exit code of a job a
// signal stopped (stopped_job_exit_code).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "config/config_request.hpp"
#include "config/launch_defaults.hpp"
#include "supervise/hang_watch.hpp"
#include "supervise/supervision_record.hpp"
#include "util/exit_status.hpp"

namespace mgtrain {

// The one rule of which signals stop a job and which exits fail it, for the supervisor, the `--hosts`
// launcher (hosts/hosts_policy.hpp) and the run record (launch.cpp). SIGINT, SIGTERM, SIGHUP and
// SIGQUIT stop the job (a second one kills at once); SIGUSR1 (save and stop) and SIGUSR2 (save and go
// on) are only passed on to the workers.
bool stops_the_job(int signal);
// The exit code of a launcher (or a node agent leaving the rendezvous) that signal N stopped: 128+N, the shell's
// code for a death by N (ExitStatus::as_exit_code).
int stopped_exit_code(int signal);
// What the launcher does with a signal it receives, in either personality (signal_response).
enum class SignalResponse {
  kStop,        // stop the workers with the same signal (SIGKILL after the grace period); exit 128+N (torchrun: 1)
  kForward,     // `mgtrain launch`'s SIGUSR1 (save and stop) and SIGUSR2 (save and go on): passed to the workers
  kStopAndDie,  // torchrun personality, a signal not in --signals-to-handle: torchrun dies by Python's default
                // action and leaves its workers running; mgtrain stops them (SIGTERM, SIGKILL after the grace
                // period), then dies by the signal, so the shell sees the same status and no orphan is left
};
// `handled` is the torchrun personality's --signals-to-handle (LaunchPlan::handled_signals); `mgtrain launch`
// follows stops_the_job.
SignalResponse signal_response(int signal, Personality personality, const std::vector<int>& handled);
// An exit code stopped_exit_code gives for a signal that stops the job.
bool stopped_by_signal(int exit_code);
// The exit code of a launcher that signal N stopped: 75 (exit_code::kStoppedAfterCheckpoint) when every worker saved a
// checkpoint and exited 75 (the job can be resumed: the built-in trainer on SIGTERM), else stopped_exit_code(N). The
// torchrun personality turns either into 1 (apps/mgtrain/main.cpp), as torchrun does.
int stopped_job_exit_code(int signal, bool every_worker_saved);
// Whether starting the group again can help after a worker ended with `status`. Not in `mgtrain launch` after an exit
// 2: bad input (config, arguments, data, a script that is not there; docs/exit-codes.md) fails the same way every time,
// so the job ends at once, restarts left or not. The torchrun personality restarts after any failure, as torchrun does.
bool restart_can_help(const ExitStatus& status, Personality personality);
// Neither success nor exit_code::kStoppedAfterCheckpoint (75: saved a checkpoint and stopped on request).
bool failed_exit(const ExitStatus& status);

// The side effects the policy orders.
class WorkerGroupControl {
 public:
  virtual ~WorkerGroupControl() = default;
  // Start every local worker of `attempt` (0 first, then 1, 2, ... on restarts).
  virtual void start_workers(int attempt) = 0;
  // Send `signal` to the process group of every worker still running.
  virtual void signal_running_workers(int signal) = 0;
  // SIGKILL to one running worker's process group, at once: its process is stopped (worker_stopped) as the group's
  // stop begins, so it cannot act on the stop's signal before the grace period ends.
  virtual void kill_worker(int local_rank) { (void)local_rank; }
  // The group's stop has waited Settings::stop_notice_s (at most half the grace period) and `local_ranks` still run:
  // they got `signal` and get SIGKILL at `kill_at`. Said once per stop.
  virtual void waiting_for_exit(const std::vector<int>& local_ranks, int signal, SteadyTime kill_at) {
    (void)local_ranks;
    (void)signal;
    (void)kill_at;
  }
  // An attempt failed with restarts left, but its root cause is one a restart cannot help (restart_can_help): the
  // job ends now. Said once.
  virtual void not_restarted(const WorkerFailure& root) { (void)root; }
  // Coordinated mode (multi-node) only: the first failure of an attempt, as the group starts to stop.
  virtual void group_failing(const WorkerFailure& failure) { (void)failure; }
  // Coordinated mode only: every worker of the attempt has exited; the policy waits for
  // begin_attempt() or finish_coordinated() (or has finished, when the launcher got a signal).
  virtual void attempt_ended() {}
  // Asked when an attempt ended for `root` (its first failure) and a port retry is left: whether rank 0 failed
  // because the workers' store port it was given was taken (the supervisor reads rank 0's stderr). If so, the next
  // attempt starts at once, on a new port, and is not counted as a restart.
  virtual bool store_port_taken(const WorkerFailure& root) {
    (void)root;
    return false;
  }
  // Hang detection. Whether the worker's process is stopped (SIGSTOP, a debugger): evidence for the root cause.
  virtual bool worker_stopped(int local_rank) {
    (void)local_rank;
    return false;
  }
  // A running worker has reported no progress hang_timeout after its start; said once per local rank and run.
  virtual void no_progress_yet(int local_rank) { (void)local_rank; }
  // A hang was found (its failures are recorded: the hung ranks, then the waiting ones). The workers are left
  // running until diagnosis_finished() or `deadline` (launch.diagnose_timeout), then stopped as for any failure.
  virtual void hang_detected(const HangVerdict& verdict, SteadyTime deadline) {
    (void)verdict;
    (void)deadline;
  }
  // Coordinated mode only: a hang's diagnostics are collected (or their time is up). The workers keep running until
  // the agent stops them (stop_on_request), once every node has its diagnostics (docs/diagnosis.md).
  virtual void hang_diagnosed() {}
};

class SupervisionPolicy {
 public:
  struct Settings {
    int nproc = 1;
    int max_restarts = 0;
    double grace_period_s = launch_defaults::kGracePeriodS;  // SIGTERM -> SIGKILL
    // How long into a stop the console says which workers it still waits for (waiting_for_exit), at most half the
    // grace period; 0: never.
    double stop_notice_s = 0.0;
    double hang_timeout_s = 0.0;                                     // 0: hang detection off
    double diagnose_timeout_s = launch_defaults::kDiagnoseTimeoutS;  // a hang's diagnostics before the stop
    // Multi-node: the node agent decides when attempts start, restarts and the exit code; the policy
    // still stops the local group on a failure or signal (node_agent.hpp).
    bool coordinated = false;
    // Attempts started again on a new port after rank 0 found the store port taken (store_port_taken), on top of
    // max_restarts; 0: none (a port the user gave, or a multi-node job).
    int max_port_retries = 0;
    // Which signals stop the job and how (signal_response).
    Personality personality = Personality::Mgtrain;
    std::vector<int> handled_signals;
  };

  SupervisionPolicy(const Settings& settings, WorkerGroupControl& control);

  void start(SteadyTime now);
  // `timer_signal`: not 0 when the launcher itself sent the worker this signal because its file timer expired (a
  // fault of its own), so its death counts as a failure, and as the root cause, even while the group stops.
  void on_worker_exit(int local_rank, ExitStatus status, SteadyTime now, int timer_signal = 0);
  // The launcher has just sent a worker `signal` (> 0) because its file timer expired. torch 2.15's FileTimerServer
  // then sends the same signal to its own process, torchrun: so in the torchrun personality on one node the launcher
  // acts as if it got `signal` (signal_response: SIGKILL, which no launcher can handle, stops the other workers and
  // then the launcher dies by it, exit 137; torchrun leaves them running). Otherwise nothing more happens here: the
  // worker's death is a failure like any other, and restarts apply.
  void on_file_timer_fired(int signal, SteadyTime now);
  // Signals received by the launcher, as signal_response says: a stop (a second stopping signal kills at once), or
  // forwarded (mgtrain launch's USR1 and USR2).
  void on_signal(int signal, SteadyTime now);
  // The status API's save requests (SIGUSR2 save and go on, SIGUSR1 save and stop): passed to the running workers in
  // either personality, since they are not signals to the launcher (which the torchrun personality may die by).
  void forward_to_workers(int signal);
  // A worker reported progress (its progress file changed at `when`, reporting `step` when it writes one).
  void on_progress(int local_rank, SteadyTime when, std::optional<std::int64_t> step = std::nullopt);
  // Time passed: escalation to SIGKILL, hang detection, the end of a hang's diagnostics.
  void on_time(SteadyTime now);
  // The diagnostics of a hang (hang_detected) are complete: stop the workers now (coordinated: hang_diagnosed()).
  void diagnosis_finished(SteadyTime now);
  // While diagnosing: the diagnostics showed that `local_rank` (one of the hang's stopped ranks) is the hung one, not
  // the rank progress named (the stacks show the others waiting in a collective and this one not). It
  // becomes the root cause; the rank named before becomes waiting, unless its process is stopped.
  void blame(int local_rank);
  // Whether a hang's diagnostics are being collected (the workers still run, the stop is due).
  bool diagnosing() const { return phase_ == Phase::kDiagnosing && !diagnosis_reported_; }
  // Coordinated: a hang's diagnostics are collected here; the workers run until the agent stops them.
  bool hang_held() const { return phase_ == Phase::kDiagnosing && diagnosis_reported_; }
  // Coordinated: another node found a hang; diagnose this node's running ranks as for a hang of its own (every
  // reported rank waiting, hang_detected, then hang_diagnosed). False when the attempt is not kRunning (already
  // diagnosing, stopping, or between attempts).
  bool diagnose_on_request(SteadyTime now);

  // Coordinated mode. start() leaves the policy waiting; the agent then calls:
  // begin_attempt: start the workers of `attempt` (only while waiting). If starting them throws, the
  // policy is still waiting (no worker of the attempt is left running) and the error propagates.
  void begin_attempt(int attempt, SteadyTime now);
  // stop_on_request: another node failed: stop the local workers (SIGTERM, SIGKILL after the grace
  // period) without counting anything as a failure here.
  void stop_on_request(SteadyTime now);
  // finish_coordinated: the job is over with this exit code (only while waiting).
  void finish_coordinated(int exit_code);
  // Whether the policy waits for the agent (no workers running, not finished).
  bool waiting() const { return phase_ == Phase::kWaiting; }
  // Whether the current attempt is running (workers alive, no stop begun; a hang's diagnostics may be collected).
  bool attempt_running() const { return phase_ == Phase::kRunning || phase_ == Phase::kDiagnosing; }

  // When on_time must be called next; nullopt: only events can change anything.
  std::optional<SteadyTime> next_deadline() const;

  bool finished() const { return phase_ == Phase::kFinished; }
  // Attempts, failures, root cause, the launcher's signal and the exit code (supervision_record.hpp).
  const SupervisionRecord& record() const { return record_; }

 private:
  // kDiagnosing: a hang was found; the workers run until the diagnostics are collected, then kStopping.
  enum class Phase { kIdle, kRunning, kDiagnosing, kStopping, kWaiting, kFinished };

  void start_attempt(SteadyTime now);
  // Stop the group with `signal` (SIGKILL after the grace period). `failure`: the attempt's first failure, which the
  // stop is for (a restart may follow; coordinated: group_failing).
  void begin_stop(int signal, SteadyTime now, const WorkerFailure* failure = nullptr);
  void finish_attempt_if_done(SteadyTime now);
  bool workers_live() const {
    return phase_ == Phase::kRunning || phase_ == Phase::kDiagnosing || phase_ == Phase::kStopping;
  }
  void enter_diagnosis(const HangVerdict& verdict, SteadyTime now);

  Settings settings_;
  WorkerGroupControl& control_;
  Phase phase_ = Phase::kIdle;
  SupervisionRecord record_;
  std::vector<bool> running_;
  // The group's stop.
  bool stopping_for_failure_ = false;
  SteadyTime stop_started_{};
  std::optional<SteadyTime> kill_deadline_;
  std::optional<SteadyTime> notice_deadline_;  // waiting_for_exit is due
  int stop_signal_ = 0;                        // what the current stop sent
  // Hangs.
  HangWatch hang_watch_;
  std::optional<SteadyTime> diagnose_deadline_;
  std::size_t hang_failure_ = 0;     // index into the record's failures of the hang being diagnosed
  bool diagnosis_reported_ = false;  // coordinated: hang_diagnosed() was called; waiting for stop_on_request
};

}  // namespace mgtrain
