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

SupervisionPolicy::SupervisionPolicy(const Settings& settings, WorkerGroupControl& control)
    : settings_(settings),
      control_(control),
      running_(settings.nproc, false),
      hang_watch_(settings.nproc, settings.hang_timeout_s) {}

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
  if (phase_ != Phase::kRunning && phase_ != Phase::kDiagnosing) return;
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
  saved_workers_ = 0;
  attempt_clean_ = false;
  kill_deadline_.reset();
  notice_deadline_.reset();
  diagnose_deadline_.reset();
  diagnosis_reported_ = false;
  std::fill(running_.begin(), running_.end(), true);
  hang_watch_.start_attempt(now);
  control_.start_workers(attempt_);
}

bool SupervisionPolicy::any_running() const {
  return std::find(running_.begin(), running_.end(), true) != running_.end();
}

// `launcher_fault`: the launcher killed the worker for a fault of its own (an expired file timer), never a consequence
// of the group's stop.
void SupervisionPolicy::record_failure(WorkerFailure failure, bool launcher_fault) {
  failure.attempt = attempt_;
  failure.during_teardown = !launcher_fault && phase_ == Phase::kStopping && failure.time > stop_started_;
  failures_.push_back(failure);
}

void SupervisionPolicy::begin_stop(int signal, SteadyTime now) {
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
  if (any_running()) control_.signal_running_workers(signal);
  if (first) kill_stopped_workers();
}

// A stopped process (SIGSTOP, a debugger) acts on the stop's signal only once it runs again, so the stop would wait the
// whole grace period for it. A hang's stacks are taken before the stop begins, so nothing more is to be had from it.
void SupervisionPolicy::kill_stopped_workers() {
  for (int local_rank = 0; local_rank < settings_.nproc; ++local_rank) {
    if (running_[local_rank] && control_.worker_stopped(local_rank)) control_.kill_worker(local_rank);
  }
}

void SupervisionPolicy::say_who_is_awaited() {
  std::vector<int> awaited;
  for (int local_rank = 0; local_rank < settings_.nproc; ++local_rank) {
    if (running_[local_rank]) awaited.push_back(local_rank);
  }
  if (!awaited.empty() && kill_deadline_) control_.waiting_for_exit(awaited, stop_signal_, *kill_deadline_);
}

void SupervisionPolicy::on_worker_exit(int local_rank, ExitStatus status, SteadyTime now, int timer_signal) {
  const bool killed_for_failure = timer_signal != 0;
  if (!workers_live()) return;
  if (!running_.at(local_rank)) return;
  running_[local_rank] = false;
  hang_watch_.on_exit(local_rank);
  bool stopped_as_asked = !killed_for_failure && phase_ == Phase::kStopping && now > stop_started_ && status.signaled &&
                          (status.value == SIGTERM || status.value == SIGKILL || status.value == launcher_signal_);
  // Saved a checkpoint and stopped on request: the other workers agreed to do the same at the same step.
  const bool checkpointed_stop = !status.signaled && status.value == exit_code::kStoppedAfterCheckpoint;
  if (checkpointed_stop) ++saved_workers_;
  if (failed_exit(status) && !stopped_as_asked) {
    WorkerFailure failure;
    failure.local_rank = local_rank;
    failure.status = status;
    failure.time = now;
    record_failure(failure, killed_for_failure);
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
  // Every worker ended while a hang was diagnosed: the stop is over before it began.
  if (phase_ == Phase::kDiagnosing) {
    if (hang_failure_ < failures_.size()) {
      stop_for_failure(failures_[hang_failure_], now);
    } else {
      begin_stop(SIGTERM, now);  // diagnosed on request with no rank that had reported: nothing failed here
    }
  }
  if (settings_.coordinated) {
    attempt_clean_ = phase_ == Phase::kRunning;  // nobody failed, nothing was stopped
    kill_deadline_.reset();
    notice_deadline_.reset();
    phase_ = launcher_signal_ ? Phase::kFinished : Phase::kWaiting;
    control_.attempt_ended();
    return;
  }
  const bool failed = phase_ == Phase::kStopping && stopping_for_failure_ && !launcher_signal_;
  const std::optional<std::size_t> cause = root_cause();
  const bool port_retry =
      failed && cause && port_retries_ < settings_.max_port_retries && control_.store_port_taken(failures_[*cause]);
  if (port_retry) ++port_retries_;
  const bool restart_left = failed && restarts() < settings_.max_restarts;
  const bool restart_helps = !cause || failures_[*cause].hung || failures_[*cause].waiting ||
                             restart_can_help(failures_[*cause].status, settings_.personality);
  if (port_retry || (restart_left && restart_helps)) {
    ++attempt_;
    start_attempt(now);
  } else {
    phase_ = Phase::kFinished;
    kill_deadline_.reset();
    notice_deadline_.reset();
    if (restart_left && cause) control_.not_restarted(failures_[*cause]);
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
  if (!workers_live()) return;
  if (response == SignalResponse::kForward) {
    control_.signal_running_workers(signal);
    return;
  }
  if (launcher_signal_) {  // the second Ctrl-C: no more patience
    control_.signal_running_workers(SIGKILL);
    kill_deadline_.reset();
    notice_deadline_.reset();
    return;
  }
  launcher_signal_ = signal;
  begin_stop(response == SignalResponse::kStop ? signal : SIGTERM, now);
}

void SupervisionPolicy::on_file_timer_fired(int signal, SteadyTime now) {
  if (settings_.personality != Personality::Torchrun || settings_.coordinated || signal <= 0) return;
  if (!workers_live() || launcher_signal_) return;
  stopped_by_file_timer_ = true;
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
    say_who_is_awaited();  // also when this call is late and the SIGKILL below is due as well: once per stop
  }
  if (kill_deadline_ && now >= *kill_deadline_) {
    kill_deadline_.reset();
    notice_deadline_.reset();
    if (any_running()) control_.signal_running_workers(SIGKILL);
  }
  if (phase_ == Phase::kDiagnosing && diagnose_deadline_ && now >= *diagnose_deadline_) {
    end_diagnosis(now);  // the diagnostics ran out of time
  }
  if (phase_ == Phase::kRunning) check_hang(now);
}

// The hung rank(s) are recorded first (the root cause), then the ranks waiting for them; the group is stopped once
// the diagnostics are collected (diagnosis_finished) or launch.diagnose_timeout has passed.
void SupervisionPolicy::check_hang(SteadyTime now) {
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
  hang_failure_ = failures_.size();
  for (const std::vector<HangRank>* group : {&verdict.hung, &verdict.waiting}) {
    for (const HangRank& rank : *group) {
      WorkerFailure failure;
      failure.local_rank = rank.local_rank;
      failure.hung = group == &verdict.hung;
      failure.waiting = !failure.hung;
      failure.silent_s = rank.silent_s;
      failure.last_progress = rank.last_progress;
      failure.last_step = rank.last_step;
      failure.process_stopped = rank.stopped;
      failure.time = now;
      record_failure(failure);
    }
  }
  phase_ = Phase::kDiagnosing;
  diagnosis_reported_ = false;
  diagnose_deadline_ = now + steady_seconds(std::max(0.0, settings_.diagnose_timeout_s));
  control_.hang_detected(verdict, *diagnose_deadline_);
  if (phase_ == Phase::kDiagnosing && settings_.diagnose_timeout_s <= 0) diagnosis_finished(now);
}

void SupervisionPolicy::blame(int local_rank) {
  if (phase_ != Phase::kDiagnosing) return;
  auto first = failures_.begin() + static_cast<std::ptrdiff_t>(hang_failure_);
  auto chosen = std::find_if(first, failures_.end(), [&](const WorkerFailure& failure) {
    return failure.attempt == attempt_ && failure.local_rank == local_rank && (failure.hung || failure.waiting);
  });
  if (chosen == failures_.end() || chosen->hung) return;
  for (auto failure = first; failure != failures_.end(); ++failure) {
    if (failure->hung && !failure->process_stopped) {
      failure->hung = false;
      failure->waiting = true;
    }
  }
  chosen->hung = true;
  chosen->waiting = false;
  std::rotate(first, chosen, chosen + 1);  // the root cause is the hang's first failure
}

void SupervisionPolicy::diagnosis_finished(SteadyTime now) {
  if (diagnosing()) end_diagnosis(now);
}

// Alone, the node stops its workers now. Coordinated, the other nodes may still be dumping their ranks' stacks:
// stopping these workers would end the others' collectives with errors before that, so the agent decides.
void SupervisionPolicy::end_diagnosis(SteadyTime now) {
  if (!settings_.coordinated) return stop_for_failure(failures_.at(hang_failure_), now);
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

std::optional<std::size_t> SupervisionPolicy::root_cause() const {
  for (std::size_t index = 0; index < failures_.size(); ++index) {
    if (failures_[index].attempt == attempt_ && !failures_[index].during_teardown) return index;
  }
  return std::nullopt;
}

int SupervisionPolicy::exit_code() const {
  if (launcher_signal_) return stopped_job_exit_code(*launcher_signal_, saved_workers_ == settings_.nproc);
  if (coordinated_exit_code_) return *coordinated_exit_code_;
  std::optional<std::size_t> cause = root_cause();
  if (!cause) return stopped_after_checkpoint() ? exit_code::kStoppedAfterCheckpoint : 0;
  const WorkerFailure& failure = failures_[*cause];
  return failure.hung || failure.waiting ? kHungWorkerExitCode : failure.status.as_exit_code();
}

}  // namespace mgtrain
