// The failure report of the node's worker group (see failure_reporter.hpp).
#include "supervise/failure_reporter.hpp"

#include "contract/log_layout.hpp"
#include "elastic/torch_error_file.hpp"
#include "output/file_tail.hpp"
#include "util/time_format.hpp"

namespace mgtrain {

FailureReporter::FailureReporter(const LaunchPlan& plan, const WorkerRoster& workers, const SupervisionPolicy& policy,
                                 const WorkerGroup& group, const StorePorts& ports, const HangResponse& hang,
                                 const std::unique_ptr<FileTimerWatchdog>& file_timers, const ClockAnchor& started,
                                 AttemptCoordinator* const& coordinator)
    : plan_(plan),
      workers_(workers),
      policy_(policy),
      group_(group),
      ports_(ports),
      hang_(hang),
      file_timers_(file_timers),
      started_(started),
      coordinator_(coordinator) {}

FailedWorker FailureReporter::describe(const WorkerFailure& failure) const {
  FailedWorker worker;
  worker.local_rank = failure.local_rank;
  worker.global_rank = plan_.global_rank(failure.local_rank);
  worker.attempt = failure.attempt;
  worker.host = plan_.hostname;
  worker.pid = workers_.pid_of(failure.attempt, failure.local_rank);
  worker.status = failure.status;
  worker.hung = failure.hung;
  worker.waiting = failure.waiting;
  worker.silent_s = failure.silent_s;
  worker.during_teardown = failure.during_teardown;
  if (failure.attempt == policy_.record().attempt()) {
    worker.after_start_s = seconds_between(group_.attempt_started(), failure.time);
  }
  const ExpiredFileTimer* timer = file_timers_ ? file_timers_->fired_at(failure.attempt, failure.local_rank) : nullptr;
  if (timer && !failure.hung) {
    worker.expired_timer_scope = timer->scope_id;
    worker.expired_timer_pid = timer->pid;
  }
  worker.time_utc = format_utc_millis(started_.unix_millis_at(failure.time));
  std::string rank_directory = log_layout::rank_dir(plan_.run_dir, failure.attempt, worker.global_rank);
  if (failure.hung || failure.waiting) hang_.describe_hang_facts(failure, rank_directory, worker);
  worker.stderr_log = log_layout::stderr_log(rank_directory);
  worker.stderr_tail = read_last_lines(worker.stderr_log, kStderrTailLines);
  if (!plan_.python.empty()) {  // a Python program that died at once because its interpreter has no torch
    std::string stderr_text;
    for (const std::string& line : worker.stderr_tail) stderr_text += line + "\n";
    worker.hint = missing_torch_hint(stderr_text, worker.after_start_s, plan_.python, plan_.python_source);
  }
  if (worker.hint.empty() && !coordinator_ && worker.global_rank == 0 && says_address_in_use(worker.stderr_tail)) {
    worker.hint = ports_.hint(failure.attempt);
  }
  if (std::optional<std::string> error_text = read_small_file(log_layout::error_file(rank_directory))) {
    worker.error_file = parse_torch_error_file(*error_text);
  }
  return worker;
}

std::optional<FailureReport> FailureReporter::report() const {
  if (!policy_.record().root_cause()) return std::nullopt;
  const std::size_t cause = *policy_.record().root_cause();
  FailureReport report;
  report.run_id = plan_.run_id;
  report.run_dir = plan_.run_dir;
  report.exit_code = policy_.record().exit_code();
  report.attempt = policy_.record().attempt();
  report.max_restarts = plan_.max_restarts;
  report.port_retries = coordinator_ ? 0 : policy_.record().port_retries();
  const std::vector<WorkerFailure>& failures = policy_.record().failures();
  report.root_cause = describe(failures[cause]);
  for (std::size_t index = 0; index < failures.size(); ++index) {
    if (index != cause && failures[index].attempt == policy_.record().attempt()) {
      report.other_failures.push_back(describe(failures[index]));
    }
  }
  return report;
}

}  // namespace mgtrain
