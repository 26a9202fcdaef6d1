// Converting worker failures between the rendezvous and the failure report, and the report a node prints
// for the job's end (see node_failure.hpp).
#include "multinode/node_failure.hpp"

#include <algorithm>

#include "util/exit_status.hpp"

namespace mgtrain {

rdzv::NodeFailure node_failure_from(const FailedWorker& worker, int round, int node_rank, const std::string& node) {
  rdzv::NodeFailure failure;
  failure.round = round;
  failure.node_rank = node_rank;
  failure.node = node;
  failure.host = worker.host;
  failure.global_rank = worker.global_rank;
  failure.local_rank = worker.local_rank;
  failure.pid = worker.pid;
  failure.hung = worker.hung;
  failure.silent_s = worker.silent_s;
  failure.exit_code = worker.hung ? kHungWorkerExitCode : worker.status.as_exit_code();
  failure.signal = !worker.hung && worker.status.signaled ? worker.status.value : 0;
  failure.outcome = worker.outcome();
  failure.time_utc = worker.time_utc;
  failure.stderr_log = worker.stderr_log;
  failure.stderr_tail = worker.stderr_tail;
  if (worker.error_file && worker.error_file->problem.empty()) failure.error_message = worker.error_file->message;
  return failure;
}

FailedWorker failed_worker_from(const rdzv::NodeFailure& failure) {
  FailedWorker worker;
  worker.global_rank = failure.global_rank;
  worker.local_rank = failure.local_rank;
  worker.attempt = failure.round;
  worker.host = failure.host;
  worker.pid = failure.pid;
  worker.status = failure.signal > 0 ? ExitStatus::killed_by(failure.signal) : ExitStatus::exited(failure.exit_code);
  worker.hung = failure.hung;
  worker.silent_s = failure.silent_s;
  worker.time_utc = failure.time_utc;
  worker.stderr_log = failure.stderr_log;
  worker.stderr_tail = failure.stderr_tail;
  worker.error_message = failure.error_message;
  worker.node_rank = failure.node_rank;
  worker.node = failure.node;
  worker.node_lost = failure.node_lost;
  worker.node_problem = failure.outcome;
  return worker;
}

FailureReport job_failure_report(const rdzv::NodeFailure& cause, const std::optional<FailureReport>& local,
                                 const LaunchPlan& plan, const std::string& node, int round, int exit_code) {
  FailureReport report;
  bool ours = !cause.node_lost && cause.node_rank == plan.node_rank && cause.round == round && local &&
              local->root_cause.global_rank == cause.global_rank;
  if (ours) {
    report = *local;
    report.root_cause.node_rank = cause.node_rank;
    report.root_cause.node = cause.node;
    for (FailedWorker& other : report.other_failures) {
      other.node_rank = plan.node_rank;
      other.node = node;
    }
  } else {
    report.root_cause = failed_worker_from(cause);
  }
  report.run_id = plan.run_id;
  report.run_dir = plan.run_dir;
  report.exit_code = exit_code;
  report.attempt = std::max(cause.round, 0);
  report.max_restarts = plan.max_restarts;
  return report;
}

}  // namespace mgtrain
