// The supervisor's side of hang detection (see hang_response.hpp).
#include "supervise/hang_response.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>

#include "contract/log_layout.hpp"
#include "diagnose/process_facts.hpp"
#include "diagnose/top_frames.hpp"
#include "output/file_tail.hpp"
#include "process/worker_process.hpp"
#include "supervise/supervisor.hpp"
#include "util/fd.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain {
namespace {

using Clock = std::chrono::steady_clock;

Clock::duration probe_interval(double timeout_s) {
  return steady_seconds(std::min(1.0, std::max(0.01, timeout_s / 4)));
}

// "12:00:03.4Z"
std::string clock_text(long long unix_millis) {
  return format_utc(unix_millis / 1000, "%H:%M:%S") + "." + std::to_string((unix_millis % 1000) / 100) + "Z";
}

}  // namespace

HangResponse::HangResponse(const LaunchPlan& plan, WorkerRoster& workers, SupervisionPolicy& policy,
                           ConsoleWriter& console, const ClockAnchor& started, AttemptCoordinator* const& coordinator)
    : plan_(plan),
      workers_(workers),
      policy_(policy),
      console_(console),
      started_(started),
      coordinator_(coordinator) {}

void HangResponse::attempt_started(Clock::time_point now) {
  if (plan_.hang_timeout_s > 0) next_probe_ = now;
}

std::optional<Clock::time_point> HangResponse::next_deadline() const {
  std::optional<Clock::time_point> wake;
  if (!policy_.finished()) wake = next_probe_;
  if (policy_.diagnosing()) keep_earliest(wake, Clock::now() + steady_seconds(HangDiagnostics::kPollS));
  return wake;
}

void HangResponse::probe_progress(Clock::time_point now, bool force) {
  if (!next_probe_ || (!force && now < *next_probe_)) return;
  const double wall_now = unix_seconds_now();
  for (RosterWorker& worker : workers_.current()) {
    if (!worker.alive || !worker.heartbeat) continue;
    std::optional<ProgressChange> change = worker.heartbeat->poll();
    if (!change) continue;
    // The file's own time, on the steady clock: reports are ordered by when they were written, not read.
    const double age_s = std::max(0.0, wall_now - change->wall_time);
    policy_.on_progress(worker.local_rank, now - steady_seconds(age_s), change->step);
  }
  next_probe_ = now + probe_interval(plan_.hang_timeout_s);
}

bool HangResponse::worker_stopped(int local_rank) const {
  const RosterWorker* worker = workers_.running(local_rank);
  if (!worker) return false;
  return diagnose::is_stopped_state(diagnose::process_state(worker->pid).value_or('?'));
}

void HangResponse::kill_worker(int local_rank) {
  const RosterWorker* worker = workers_.running(local_rank);
  if (!worker) return;
  console_.message(log::Level::Info,
                   "rank {} (pid {}) is stopped (SIGSTOP or a debugger) and cannot act on the stop: killing it now "
                   "(SIGKILL) instead of waiting out --grace-period",
                   plan_.global_rank(local_rank), worker->pid);
  signal_process_group(worker->pid, SIGKILL);
}

void HangResponse::no_progress_yet(int local_rank) {
  console_.message(log::Level::Info,
                   "rank {} has reported no progress yet: hang detection for it starts at its first report (it "
                   "touches or writes MGTRAIN_HEARTBEAT_FILE; docs/diagnosis.md)",
                   plan_.global_rank(local_rank));
}

void HangResponse::hang_detected(const HangVerdict& verdict, Clock::time_point deadline) {
  const std::string activity = diagnostics_->activity();
  const double seconds = std::chrono::duration<double>(deadline - Clock::now()).count();
  const std::string next = activity.empty() ? "stopping the workers"
                                            : activity + " before stopping the workers (up to " +
                                                  format_seconds(std::max(0.0, seconds)) + ")";
  std::string found = describe_hang(
      verdict, [this](int local_rank) { return plan_.global_rank(local_rank); },
      [this](Clock::time_point time) { return clock_text(started_.unix_millis_at(time)); });
  if (!requested_diagnosis_.empty()) found = requested_diagnosis_ + (found.empty() ? "" : "; here " + found);
  console_.message(log::Level::Warning, "{}; {}", found, next);
  console_.flush();  // the line is out before anything is collected or signalled
  std::vector<HangDiagnostics::Target> targets;
  for (const RosterWorker& worker : workers_.current()) {
    if (!worker.alive) continue;
    HangDiagnostics::Target target;
    target.local_rank = worker.local_rank;
    target.global_rank = plan_.global_rank(worker.local_rank);
    target.pid = worker.pid;
    target.rank_directory = log_layout::rank_dir(plan_.run_dir, policy_.record().attempt(), target.global_rank);
    target.hung = std::any_of(verdict.hung.begin(), verdict.hung.end(),
                              [&](const HangRank& rank) { return rank.local_rank == worker.local_rank; });
    targets.push_back(std::move(target));
  }
  // The stacks may overrule progress (settle_tie_by_stacks), not a stopped process.
  tied_ranks_.clear();
  const bool process_stopped =
      std::any_of(verdict.hung.begin(), verdict.hung.end(), [](const HangRank& rank) { return rank.stopped; });
  if (!process_stopped) {
    for (const std::vector<HangRank>* group : {&verdict.hung, &verdict.waiting}) {
      for (const HangRank& rank : *group) tied_ranks_.push_back(rank.local_rank);
    }
  }
  diagnostics_->collect_diagnostics(policy_.record().attempt(), targets, deadline);
  if (coordinator_ && requested_diagnosis_.empty()) coordinator_->on_hang_detected();
}

void HangResponse::hang_diagnosed() {
  if (coordinator_) coordinator_->on_hang_diagnosed();
}

bool HangResponse::diagnose_on_request(const std::string& reason) {
  requested_diagnosis_ = reason;
  const bool started = policy_.diagnose_on_request(Clock::now());
  requested_diagnosis_.clear();
  return started;
}

void HangResponse::poll_diagnostics(Clock::time_point now) {
  if (!policy_.diagnosing() || !diagnostics_->done()) return;
  settle_tie_by_stacks();
  policy_.diagnosis_finished(now);
}

// The stacks name the hung rank where they are clear (settled_by_stacks), whatever progress said.
void HangResponse::settle_tie_by_stacks() {
  if (tied_ranks_.empty()) return;
  const std::vector<int> ranks = std::exchange(tied_ranks_, {});
  std::vector<std::vector<std::string>> frames;
  frames.reserve(ranks.size());
  for (int local_rank : ranks)
    frames.push_back(diagnostics_->top_frames_of(policy_.record().attempt(), plan_.global_rank(local_rank)));
  const std::optional<std::size_t> outside = settled_by_stacks(frames);
  if (!outside) return;
  const int hung = ranks[*outside];
  std::vector<int> waiting;
  for (int local_rank : ranks) {
    if (local_rank != hung) waiting.push_back(plan_.global_rank(local_rank));
  }
  console_.message(log::Level::Warning,
                   "the stacks settle it: rank {} is outside any collective ({}) while {} wait{} in one: rank {} is "
                   "the hung rank",
                   plan_.global_rank(hung), frames[*outside].front(), rank_list(waiting),
                   waiting.size() == 1 ? "s" : "", plan_.global_rank(hung));
  policy_.blame(hung);
}

void HangResponse::describe_hang_facts(const WorkerFailure& failure, const std::string& rank_directory,
                                       FailedWorker& worker) const {
  worker.last_step = failure.last_step;
  worker.last_progress_unix_ms = started_.unix_millis_at(failure.last_progress);
  worker.last_progress_utc = format_utc_millis(worker.last_progress_unix_ms);
  worker.process_stopped = failure.process_stopped;
  const std::string stacks = log_layout::stacks_file(rank_directory);
  std::error_code error;
  if (!std::filesystem::exists(stacks, error)) return;
  worker.stacks = stacks;
  worker.top_frames = diagnostics_->top_frames_of(failure.attempt, worker.global_rank);
}

}  // namespace mgtrain
