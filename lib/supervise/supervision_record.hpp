// What a node's supervision has seen so far: its attempts (restarts and store-port retries), every worker failure and
// the root cause of the last attempt, the signal that stopped the launcher, the workers that saved a checkpoint and
// stopped, and the exit code all of that gives. SupervisionPolicy keeps it (the only writer) and decides from it; the
// supervisor, the failure report, the node agent and the tests read it through SupervisionPolicy::record().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "supervise/hang_watch.hpp"
#include "util/exit_status.hpp"
#include "util/timespec.hpp"

namespace mgtrain {

// A worker that failed: exited non-zero, died by a signal, or stopped making progress (hung, or waiting for a
// hung rank). A worker that dies during teardown by the very signal the launcher sent (SIGTERM, SIGKILL or the
// forwarded one) did what it was asked: that is not a failure and is not recorded.
struct WorkerFailure {
  int local_rank = 0;
  int attempt = 0;
  ExitStatus status;                      // unused when `hung` or `waiting`
  bool hung = false;                      // the root cause of a hang: its progress stopped first
  bool waiting = false;                   // its progress stopped after the hung rank's: presumably waiting for it
  double silent_s = 0.0;                  // hung or waiting: seconds without progress
  SteadyTime last_progress{};             // hung or waiting: its last report
  std::optional<std::int64_t> last_step;  // hung or waiting: the step it last reported
  bool process_stopped = false;           // hung: its process was stopped (SIGSTOP)
  SteadyTime time{};
  bool during_teardown = false;  // failed after the launcher had begun stopping the group
};

class SupervisionRecord {
 public:
  // `nproc`: the node's workers (exit 75 only when every one of them saved a checkpoint).
  explicit SupervisionRecord(int nproc) : nproc_(nproc) {}

  // The current attempt's number (attempt_<n>/ of the logs): restarts plus port retries.
  int attempt() const { return attempt_; }
  // Restarts after failures so far (TORCHELASTIC_RESTART_COUNT; port retries are not counted).
  int restarts() const { return attempt_ - port_retries_; }
  int port_retries() const { return port_retries_; }
  // Every failure of every attempt, in the order seen (a hang's: the hung ranks first, then the waiting ones).
  const std::vector<WorkerFailure>& failures() const { return failures_; }
  // Index into failures() of the root cause of the last attempt: its earliest failure that was not caused by the
  // launcher's own teardown.
  std::optional<std::size_t> root_cause() const;
  // The signal that stopped the launcher (or, stopped_by_file_timer, the one an expired file timer sent).
  std::optional<int> launcher_signal() const { return launcher_signal_; }
  bool stopped_by_file_timer() const { return stopped_by_file_timer_; }
  // Whether workers of the last attempt stopped on request after saving a checkpoint (exit 75).
  bool stopped_after_checkpoint() const { return saved_workers_ > 0; }
  // Coordinated: whether the last attempt's workers all exited 0 (or 75) by themselves.
  bool attempt_succeeded() const { return attempt_clean_; }
  // The launcher's exit code: the stopping signal's (or 75), the job's (coordinated), or the root cause's.
  int exit_code() const;

  // The policy's writes.
  // Attempt `attempt` starts (the next one after a failure, or the one the node agent names).
  void start_attempt(int attempt);
  // The attempt that ends now is started again on a new store port: not a restart.
  void count_port_retry() { ++port_retries_; }
  // `during_teardown`: it failed after the launcher began stopping the group, for the stop's sake.
  void add_failure(WorkerFailure failure, bool during_teardown);
  // A hang's failures, hung ranks first; returns the index of the first.
  std::size_t add_hang(const HangVerdict& verdict, SteadyTime now);
  // The stacks showed `local_rank` (among the hang's failures from `first_hang`) hung, not the rank progress named:
  // it becomes the root cause; a rank named before becomes waiting, unless its process is stopped.
  void blame(std::size_t first_hang, int local_rank);
  // A worker saved a checkpoint and exited 75.
  void worker_saved() { ++saved_workers_; }
  // The launcher stops the job for `signal`: one it received, or (after file_timer_fired) an expired file timer's.
  void stopped_by(int signal) { launcher_signal_ = signal; }
  void file_timer_fired() { stopped_by_file_timer_ = true; }
  // Coordinated: the attempt ended; `clean` when nobody failed and nothing was stopped.
  void attempt_ended(bool clean) { attempt_clean_ = clean; }
  // Coordinated: the node agent decided the job's exit code.
  void finish_coordinated(int exit_code) { coordinated_exit_code_ = exit_code; }

 private:
  int nproc_;
  int attempt_ = 0;
  int port_retries_ = 0;
  std::vector<WorkerFailure> failures_;
  std::optional<int> launcher_signal_;
  bool stopped_by_file_timer_ = false;
  int saved_workers_ = 0;  // how many workers of this attempt exited kStoppedAfterCheckpoint
  bool attempt_clean_ = false;
  std::optional<int> coordinated_exit_code_;
};

}  // namespace mgtrain
