// Supervision decisions: group stop, escalation, restarts, root cause and exit code.
#include "supervise/supervision_policy.hpp"

#include <algorithm>
#include <csignal>

#include "util/error.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
bool stops_the_job(int signal) {
  return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGQUIT;
}

SignalResponse signal_response(int signal, Personality personality, const std::vector<int>& handled) {
  if (personality == Personality::Mgtrain)
    return stops_the_job(signal) ? SignalResponse::kStop : SignalResponse::kForward;
  if (std::find(handled.begin(), handled.end(), signal) != handled.end()) return SignalResponse::kStop;
  return SignalResponse::kStopAndDie;
}

int stopped_exit_code(int signal) { return ExitStatus::killed_by(signal).as_exit_code(); }

bool stopped_by_signal(int exit_code) {
  const int signal = exit_code - 128;  // stopped_exit_code's inverse
  return signal > 0 && stops_the_job(signal);
}

bool failed_exit(const ExitStatus& status) {
  return !status.success() && (status.signaled || status.value != exit_code::kStoppedAfterCheckpoint);
}

SupervisionPolicy::SupervisionPolicy(const Settings& settings, WorkerGroupControl& control)
    : settings_(settings), control_(control), running_(settings.nproc, false), last_heartbeat_(settings.nproc) {}

void SupervisionPolicy::start(SteadyTime now) {
  attempt_ = 0;
  if (settings_.coordinated) {
    phase_ = Phase::kWaiting;  // the node agent starts the attempt once the nodes have met
    return;
  }
  start_attempt(now);
}

void SupervisionPolicy::begin_attempt(int attempt, SteadyTime now) {
  if (phase_ != Phase::kWaiting) throw Error("internal: begin_attempt while the previous attempt still runs");
  attempt_ = attempt;
  try {
    start_attempt(now);
  } catch (...) {
    // The workers could not be started (start_workers killed the ones that were): still waiting, so the
    // agent can tell the other nodes and finish.
    phase_ = Phase::kWaiting;
    std::fill(running_.begin(), running_.end(), false);
    throw;
  }
}

void SupervisionPolicy::stop_on_request(SteadyTime now) {
  if (phase_ != Phase::kRunning) return;
  begin_stop(SIGTERM, now);
}

void SupervisionPolicy::finish_coordinated(int exit_code) {
  if (phase_ == Phase::kFinished) return;
  if (phase_ != Phase::kWaiting) throw Error("internal: finish_coordinated while workers run");
  coordinated_exit_code_ = exit_code;
  phase_ = Phase::kFinished;
}

void SupervisionPolicy::start_attempt(SteadyTime now) {
  phase_ = Phase::kRunning;
  stopping_for_failure_ = false;
  stopped_after_checkpoint_ = false;
  attempt_clean_ = false;
  kill_deadline_.reset();
  std::fill(running_.begin(), running_.end(), true);
  std::fill(last_heartbeat_.begin(), last_heartbeat_.end(), std::nullopt);
  control_.start_workers(attempt_);
  (void)now;
}

bool SupervisionPolicy::any_running() const {
  return std::find(running_.begin(), running_.end(), true) != running_.end();
}

void SupervisionPolicy::record_failure(WorkerFailure failure) {
  failure.attempt = attempt_;
  failure.during_teardown = phase_ == Phase::kStopping && failure.time > stop_started_;
  failures_.push_back(failure);
}

void SupervisionPolicy::begin_stop(int signal, SteadyTime now) {
  if (phase_ != Phase::kStopping) {
    phase_ = Phase::kStopping;
    stop_started_ = now;
    kill_deadline_ = now + steady_seconds(settings_.grace_period_s);
  }
  if (any_running()) control_.signal_running_workers(signal);
}

void SupervisionPolicy::on_worker_exit(int local_rank, ExitStatus status, SteadyTime now, bool killed_for_failure) {
  if (phase_ != Phase::kRunning && phase_ != Phase::kStopping) return;
  if (!running_.at(local_rank)) return;
  running_[local_rank] = false;
  bool stopped_as_asked = !killed_for_failure && phase_ == Phase::kStopping && now > stop_started_ && status.signaled &&
                          (status.value == SIGTERM || status.value == SIGKILL || status.value == launcher_signal_);
  // Saved a checkpoint and stopped on request: the other workers agreed to do the same at the same step.
  const bool checkpointed_stop = !status.signaled && status.value == exit_code::kStoppedAfterCheckpoint;
  if (checkpointed_stop) stopped_after_checkpoint_ = true;
  if (failed_exit(status) && !stopped_as_asked) {
    WorkerFailure failure;
    failure.local_rank = local_rank;
    failure.status = status;
    failure.time = now;
    record_failure(failure);
    if (phase_ == Phase::kRunning) stop_for_failure(failure, now);
  }
  finish_attempt_if_done(now);
}

void SupervisionPolicy::stop_for_failure(const WorkerFailure& first, SteadyTime now) {
  stopping_for_failure_ = true;
  begin_stop(SIGTERM, now);
  if (settings_.coordinated) control_.group_failing(first);
}

void SupervisionPolicy::finish_attempt_if_done(SteadyTime now) {
  if (any_running()) return;
  if (settings_.coordinated) {
    attempt_clean_ = phase_ == Phase::kRunning;  // nobody failed, nothing was stopped
    kill_deadline_.reset();
    phase_ = launcher_signal_ ? Phase::kFinished : Phase::kWaiting;
    control_.attempt_ended();
    return;
  }
  const bool failed = phase_ == Phase::kStopping && stopping_for_failure_ && !launcher_signal_;
  const std::optional<std::size_t> cause = root_cause();
  const bool port_retry =
      failed && cause && port_retries_ < settings_.max_port_retries && control_.store_port_taken(failures_[*cause]);
  if (port_retry) ++port_retries_;
  if (port_retry || (failed && restarts() < settings_.max_restarts)) {
    ++attempt_;
    start_attempt(now);
  } else {
    phase_ = Phase::kFinished;
    kill_deadline_.reset();
  }
}

void SupervisionPolicy::on_signal(int signal, SteadyTime now) {
  const SignalResponse response = signal_response(signal, settings_.personality, settings_.handled_signals);
  if (phase_ == Phase::kWaiting && response != SignalResponse::kForward) {  // coordinated, between attempts
    launcher_signal_ = signal;
    phase_ = Phase::kFinished;
    control_.attempt_ended();
    return;
  }
  if (phase_ != Phase::kRunning && phase_ != Phase::kStopping) return;
  if (response == SignalResponse::kForward) {
    control_.signal_running_workers(signal);
    return;
  }
  if (launcher_signal_) {  // the second Ctrl-C: no more patience
    control_.signal_running_workers(SIGKILL);
    kill_deadline_.reset();
    return;
  }
  launcher_signal_ = signal;
  begin_stop(response == SignalResponse::kStop ? signal : SIGTERM, now);
}

void SupervisionPolicy::forward_to_workers(int signal) {
  if (phase_ == Phase::kRunning || phase_ == Phase::kStopping) control_.signal_running_workers(signal);
}

void SupervisionPolicy::on_heartbeat(int local_rank, SteadyTime now) {
  if (phase_ == Phase::kRunning && running_.at(local_rank)) last_heartbeat_[local_rank] = now;
}

void SupervisionPolicy::on_time(SteadyTime now) {
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    if (any_running()) control_.signal_running_workers(SIGKILL);
  }
  if (phase_ != Phase::kRunning || settings_.heartbeat_timeout_s <= 0) return;
  bool hang_found = false;
  const std::size_t first_new = failures_.size();
  for (int rank = 0; rank < settings_.nproc; ++rank) {
    if (!running_[rank] || !last_heartbeat_[rank]) continue;
    if (now - *last_heartbeat_[rank] < steady_seconds(settings_.heartbeat_timeout_s)) continue;
    WorkerFailure failure;
    failure.local_rank = rank;
    failure.hung = true;
    failure.silent_s = std::chrono::duration<double>(now - *last_heartbeat_[rank]).count();
    failure.time = now;
    record_failure(failure);
    hang_found = true;
  }
  if (hang_found) stop_for_failure(failures_[first_new], now);
}

std::optional<SteadyTime> SupervisionPolicy::next_deadline() const {
  std::optional<SteadyTime> next = kill_deadline_;
  if (phase_ == Phase::kRunning && settings_.heartbeat_timeout_s > 0) {
    for (int rank = 0; rank < settings_.nproc; ++rank) {
      if (!running_[rank] || !last_heartbeat_[rank]) continue;
      SteadyTime due = *last_heartbeat_[rank] + steady_seconds(settings_.heartbeat_timeout_s);
      if (!next || due < *next) next = due;
    }
  }
  return next;
}

std::optional<std::size_t> SupervisionPolicy::root_cause() const {
  for (std::size_t index = 0; index < failures_.size(); ++index) {
    if (failures_[index].attempt == attempt_ && !failures_[index].during_teardown) return index;
  }
  return std::nullopt;
}

int SupervisionPolicy::exit_code() const {
  if (launcher_signal_) return stopped_exit_code(*launcher_signal_);
  if (coordinated_exit_code_) return *coordinated_exit_code_;
  std::optional<std::size_t> cause = root_cause();
  if (!cause) return stopped_after_checkpoint_ ? exit_code::kStoppedAfterCheckpoint : 0;
  const WorkerFailure& failure = failures_[*cause];
  return failure.hung ? kHungWorkerExitCode : failure.status.as_exit_code();
}

}  // namespace mgtrain
