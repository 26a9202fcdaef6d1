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

int stopped_job_exit_code(int signal, bool every_worker_saved) {
  return every_worker_saved ? exit_code::kStoppedAfterCheckpoint : stopped_exit_code(signal);
}

bool restart_can_help(const ExitStatus& status, Personality personality) {
  return personality == Personality::Torchrun || status.signaled || status.value != exit_code::kUsage;
}

bool failed_exit(const ExitStatus& status) {
  return !status.success() && (status.signaled || status.value != exit_code::kStoppedAfterCheckpoint);
}

namespace {
bool any_running(const std::vector<bool>& running) {
  return std::find(running.begin(), running.end(), true) != running.end();
}
}  // namespace

SupervisionPolicy::SupervisionPolicy(const Settings& settings, WorkerGroupControl& control)
    : settings_(settings),
      control_(control),
      record_(settings.nproc),
      running_(settings.nproc, false),
      hang_watch_(settings.nproc, settings.hang_timeout_s) {}

void SupervisionPolicy::start(SteadyTime now) {
  if (settings_.coordinated) {
    phase_ = Phase::kWaiting;  // the node agent starts the attempt once the nodes have met
    return;
  }
  record_.start_attempt(0);
  start_attempt(now);
}

void SupervisionPolicy::begin_attempt(int attempt, SteadyTime now) {
  if (phase_ != Phase::kWaiting) throw Error("internal: begin_attempt while the previous attempt still runs");
  record_.start_attempt(attempt);
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
  if (phase_ != Phase::kRunning && phase_ != Phase::kDiagnosing) return;
  begin_stop(SIGTERM, now);
}

void SupervisionPolicy::finish_coordinated(int exit_code) {
  if (phase_ == Phase::kFinished) return;
  if (phase_ != Phase::kWaiting) throw Error("internal: finish_coordinated while workers run");
  record_.finish_coordinated(exit_code);
  phase_ = Phase::kFinished;
}

// The record's attempt number is already the new one.
void SupervisionPolicy::start_attempt(SteadyTime now) {
  phase_ = Phase::kRunning;
  stopping_for_failure_ = false;
  kill_deadline_.reset();
  notice_deadline_.reset();
  diagnose_deadline_.reset();
  diagnosis_reported_ = false;
  std::fill(running_.begin(), running_.end(), true);
  hang_watch_.start_attempt(now);
  control_.start_workers(record_.attempt());
}

void SupervisionPolicy::begin_stop(int signal, SteadyTime now, const WorkerFailure* failure) {
  if (failure) stopping_for_failure_ = true;
  const bool first = phase_ != Phase::kStopping;
  if (first) {
    phase_ = Phase::kStopping;
    stop_started_ = now;
    stop_signal_ = signal;
    kill_deadline_ = now + steady_seconds(settings_.grace_period_s);
    const double notice_s = std::min(settings_.stop_notice_s, settings_.grace_period_s / 2);
    if (notice_s > 0) notice_deadline_ = now + steady_seconds(notice_s);
    diagnose_deadline_.reset();
  }
  if (any_running(running_)) control_.signal_running_workers(signal);
  // A stopped process (SIGSTOP, a debugger) acts on the stop's signal only once it runs again, so the stop would wait
  // the whole grace period for it. A hang's stacks are taken before the stop begins: nothing more is to be had from it.
  for (int local_rank = 0; first && local_rank < settings_.nproc; ++local_rank) {
    if (running_[local_rank] && control_.worker_stopped(local_rank)) control_.kill_worker(local_rank);
  }
  if (failure && settings_.coordinated) control_.group_failing(*failure);
}

void SupervisionPolicy::on_worker_exit(int local_rank, ExitStatus status, SteadyTime now, int timer_signal) {
  const bool killed_for_failure = timer_signal != 0;
  if (!workers_live()) return;
  if (!running_.at(local_rank)) return;
  running_[local_rank] = false;
  hang_watch_.on_exit(local_rank);
  const bool stopping = phase_ == Phase::kStopping && now > stop_started_;
  const std::optional<int> launcher_signal = record_.launcher_signal();
  const bool stopped_as_asked = !killed_for_failure && stopping && status.signaled &&
                                (status.value == SIGTERM || status.value == SIGKILL || status.value == launcher_signal);
  // Saved a checkpoint and stopped on request: the other workers agreed to do the same at the same step.
  if (!status.signaled && status.value == exit_code::kStoppedAfterCheckpoint) record_.worker_saved();
  if (failed_exit(status) && !stopped_as_asked) {
    WorkerFailure failure;
    failure.local_rank = local_rank;
    failure.status = status;
    failure.time = now;
    // An expired file timer is a fault of the launcher's own, never a consequence of the group's stop.
    record_.add_failure(failure, !killed_for_failure && stopping);
    // The failure as recorded (its attempt set): a node agent reports it, naming the attempt's worker.
    const WorkerFailure recorded = record_.failures().back();
    if (phase_ == Phase::kRunning) begin_stop(SIGTERM, now, &recorded);
  }
  finish_attempt_if_done(now);
}

void SupervisionPolicy::finish_attempt_if_done(SteadyTime now) {
  if (any_running(running_)) return;
  // Every worker ended while a hang was diagnosed: the stop is over before it began.
  if (phase_ == Phase::kDiagnosing) {
    const std::vector<WorkerFailure>& failures = record_.failures();
    // Diagnosed on request with no rank that had reported: nothing failed here.
    begin_stop(SIGTERM, now, hang_failure_ < failures.size() ? &failures[hang_failure_] : nullptr);
  }
  if (settings_.coordinated) {
    record_.attempt_ended(phase_ == Phase::kRunning);  // nobody failed, nothing was stopped
    kill_deadline_.reset();
    notice_deadline_.reset();
    phase_ = record_.launcher_signal() ? Phase::kFinished : Phase::kWaiting;
    control_.attempt_ended();
    return;
  }
  const bool failed = phase_ == Phase::kStopping && stopping_for_failure_ && !record_.launcher_signal();
  const std::optional<std::size_t> cause = record_.root_cause();
  const WorkerFailure* root = cause ? &record_.failures()[*cause] : nullptr;
  const bool port_retry =
      failed && root && record_.port_retries() < settings_.max_port_retries && control_.store_port_taken(*root);
  if (port_retry) record_.count_port_retry();
  const bool restart_left = failed && record_.restarts() < settings_.max_restarts;
  const bool restart_helps =
      !root || root->hung || root->waiting || restart_can_help(root->status, settings_.personality);
  if (port_retry || (restart_left && restart_helps)) {
    record_.start_attempt(record_.attempt() + 1);
    start_attempt(now);
  } else {
    phase_ = Phase::kFinished;
    kill_deadline_.reset();
    notice_deadline_.reset();
    if (restart_left && root) control_.not_restarted(*root);
  }
}

void SupervisionPolicy::on_signal(int signal, SteadyTime now) {
  const SignalResponse response = signal_response(signal, settings_.personality, settings_.handled_signals);
  if (phase_ == Phase::kWaiting && response != SignalResponse::kForward) {  // coordinated, between attempts
    record_.stopped_by(signal);
    phase_ = Phase::kFinished;
    control_.attempt_ended();
    return;
  }
  if (!workers_live()) return;
  if (response == SignalResponse::kForward) {
    control_.signal_running_workers(signal);
    return;
  }
  if (record_.launcher_signal()) {  // the second Ctrl-C: no more patience
    control_.signal_running_workers(SIGKILL);
    kill_deadline_.reset();
    notice_deadline_.reset();
    return;
  }
  record_.stopped_by(signal);
  begin_stop(response == SignalResponse::kStop ? signal : SIGTERM, now);
}

void SupervisionPolicy::on_file_timer_fired(int signal, SteadyTime now) {
  if (settings_.personality != Personality::Torchrun || settings_.coordinated || signal <= 0) return;
  if (!workers_live() || record_.launcher_signal()) return;
  record_.file_timer_fired();
  on_signal(signal, now);
}

void SupervisionPolicy::forward_to_workers(int signal) {
  if (workers_live()) control_.signal_running_workers(signal);
}

void SupervisionPolicy::on_progress(int local_rank, SteadyTime when, std::optional<std::int64_t> step) {
  if (phase_ == Phase::kRunning && running_.at(local_rank)) hang_watch_.on_progress(local_rank, when, step);
}

void SupervisionPolicy::on_time(SteadyTime now) {
  if (notice_deadline_ && now >= *notice_deadline_) {
    notice_deadline_.reset();
    // Also when this call is late and the SIGKILL below is due as well: once per stop.
    std::vector<int> awaited;
    for (int local_rank = 0; local_rank < settings_.nproc; ++local_rank) {
      if (running_[local_rank]) awaited.push_back(local_rank);
    }
    if (!awaited.empty() && kill_deadline_) control_.waiting_for_exit(awaited, stop_signal_, *kill_deadline_);
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    notice_deadline_.reset();
    if (any_running(running_)) control_.signal_running_workers(SIGKILL);
  }
  if (phase_ == Phase::kDiagnosing && diagnose_deadline_ && now >= *diagnose_deadline_) {
    diagnosis_finished(now);  // the diagnostics ran out of time
  }
  if (phase_ != Phase::kRunning) return;
  // The hung rank(s) are recorded first (the root cause), then the ranks waiting for them; the group is stopped once
  // the diagnostics are collected (diagnosis_finished) or launch.diagnose_timeout has passed.
  for (int local_rank : hang_watch_.take_unreported(now)) control_.no_progress_yet(local_rank);
  std::optional<HangVerdict> verdict =
      hang_watch_.check(now, [this](int local_rank) { return control_.worker_stopped(local_rank); });
  if (verdict) enter_diagnosis(*verdict, now);
}

bool SupervisionPolicy::diagnose_on_request(SteadyTime now) {
  if (!settings_.coordinated || phase_ != Phase::kRunning) return false;
  enter_diagnosis(hang_watch_.all_waiting(now, [this](int local_rank) { return control_.worker_stopped(local_rank); }),
                  now);
  return true;
}

void SupervisionPolicy::enter_diagnosis(const HangVerdict& verdict, SteadyTime now) {
  hang_failure_ = record_.add_hang(verdict, now);
  phase_ = Phase::kDiagnosing;
  diagnosis_reported_ = false;
  diagnose_deadline_ = now + steady_seconds(std::max(0.0, settings_.diagnose_timeout_s));
  control_.hang_detected(verdict, *diagnose_deadline_);
  if (phase_ == Phase::kDiagnosing && settings_.diagnose_timeout_s <= 0) diagnosis_finished(now);
}

void SupervisionPolicy::blame(int local_rank) {
  if (phase_ == Phase::kDiagnosing) record_.blame(hang_failure_, local_rank);
}

// Alone, the node stops its workers now. Coordinated, the other nodes may still be dumping their ranks' stacks:
// stopping these workers would end the others' collectives with errors before that, so the agent decides.
void SupervisionPolicy::diagnosis_finished(SteadyTime now) {
  if (!diagnosing()) return;
  if (!settings_.coordinated) return begin_stop(SIGTERM, now, &record_.failures().at(hang_failure_));
  diagnose_deadline_.reset();
  diagnosis_reported_ = true;
  control_.hang_diagnosed();
}

std::optional<SteadyTime> SupervisionPolicy::next_deadline() const {
  std::optional<SteadyTime> next = kill_deadline_;
  const auto keep = [&next](const std::optional<SteadyTime>& due) {
    if (due && (!next || *due < *next)) next = due;
  };
  keep(notice_deadline_);
  if (phase_ == Phase::kRunning) keep(hang_watch_.next_deadline());
  if (phase_ == Phase::kDiagnosing) keep(diagnose_deadline_);
  return next;
}

}  // namespace mgtrain
