// Converting worker failures between the rendezvous and the failure report, and the report a node prints
// for the job's end (see node_failure.hpp).
#include "multinode/node_failure.hpp"

#include <algorithm>

#include "multinode/hang_across_nodes.hpp"
#include "util/exit_status.hpp"
#include "util/time_format.hpp"

namespace mgtrain {
namespace {

// Of a stalled rank's top frames, what travels to the other nodes (failure.json names the stacks file for the rest).
constexpr std::size_t kSentTopFrames = 8;
constexpr std::size_t kSentFrameChars = 300;

}  // namespace

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
  failure.waiting = worker.waiting;
  failure.last_progress_ms = worker.last_progress_unix_ms;
  failure.has_last_step = worker.last_step.has_value();
  failure.last_step = worker.last_step.value_or(0);
  failure.process_stopped = worker.process_stopped;
  failure.stacks = worker.stacks;
  for (const std::string& frame : worker.top_frames) {
    if (failure.top_frames.size() == kSentTopFrames) break;
    failure.top_frames.push_back(frame.substr(0, kSentFrameChars));
  }
  return failure;
}

std::vector<rdzv::NodeFailure> local_hang_ranks(const std::optional<FailureReport>& local, int round, int node_rank,
                                                const std::string& node) {
  std::vector<rdzv::NodeFailure> ranks;
  if (!local) return ranks;
  std::vector<const FailedWorker*> workers{&local->root_cause};
  for (const FailedWorker& other : local->other_failures) workers.push_back(&other);
  for (const FailedWorker* worker : workers) {
    if (!worker->hung && !worker->waiting) continue;
    rdzv::NodeFailure rank = node_failure_from(*worker, round, node_rank, node);
    rank.stderr_tail.clear();
    ranks.push_back(rank);
  }
  return ranks;
}

rdzv::Message hang_found_for(const Supervisor& supervisor, const LaunchPlan& plan, int round, const std::string& node) {
  const std::optional<FailureReport> local = supervisor.local_failure_report();
  std::vector<rdzv::NodeFailure> ranks = local_hang_ranks(local, round, plan.node_rank, node);
  return rdzv::hang_found_message(round, ranks.empty() ? rdzv::NodeFailure{} : ranks.front());  // the hung one first
}

rdzv::Message diagnosed_for(const Supervisor& supervisor, const LaunchPlan& plan, int round, const std::string& node) {
  const std::optional<FailureReport> local = supervisor.local_failure_report();
  return rdzv::diagnosed_message(round, local_hang_ranks(local, round, plan.node_rank, node));
}

std::optional<rdzv::Message> diagnose_for_server(Supervisor& supervisor, const rdzv::Message& diagnose, int round) {
  const SupervisionPolicy& policy = supervisor.policy();
  if (policy.diagnosing() || policy.hang_held()) return std::nullopt;  // found here too: its kDiagnosed comes
  if (supervisor.diagnose_on_request("another node found a hang: " + diagnose.text("reason"))) return std::nullopt;
  return rdzv::diagnosed_message(round, {});
}

FailedWorker failed_worker_from(const rdzv::NodeFailure& failure) {
  FailedWorker worker;
  worker.global_rank = failure.global_rank;
  worker.local_rank = failure.local_rank;
  worker.attempt = failure.round;
  worker.host = failure.host;
  worker.pid = failure.pid;
  worker.status = failure.status();
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
  worker.waiting = failure.waiting;
  worker.last_progress_unix_ms = failure.last_progress_ms;
  if (failure.last_progress_ms > 0) worker.last_progress_utc = format_utc_millis(failure.last_progress_ms);
  if (failure.has_last_step) worker.last_step = failure.last_step;
  worker.process_stopped = failure.process_stopped;
  worker.stacks = failure.stacks;
  worker.top_frames = failure.top_frames;
  return worker;
}

FailureReport job_failure_report(const rdzv::NodeFailure& cause, const std::vector<rdzv::NodeFailure>& waiting,
                                 const std::optional<FailureReport>& local, const LaunchPlan& plan,
                                 const std::string& node, int round, int exit_code) {
  FailureReport report;
  bool ours = !cause.node_lost && cause.node_rank == plan.node_rank && cause.round == round && local &&
              local->root_cause.global_rank == cause.global_rank;
  if (cause.hung && !cause.node_lost) {  // the job's verdict, made across nodes (hang_across_nodes.hpp)
    report.root_cause = failed_worker_from(cause);
    for (const rdzv::NodeFailure& other : waiting) report.other_failures.push_back(failed_worker_from(other));
  } else if (ours) {
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
