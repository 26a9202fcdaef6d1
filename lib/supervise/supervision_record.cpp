// The record of a node's supervision: attempts, failures and their root cause, the exit code they give.
#include "supervise/supervision_record.hpp"

#include <algorithm>
#include <iterator>

#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"

namespace mgtrain {

void SupervisionRecord::start_attempt(int attempt) {
  attempt_ = attempt;
  saved_workers_ = 0;
  attempt_clean_ = false;
}

void SupervisionRecord::add_failure(WorkerFailure failure, bool during_teardown) {
  failure.attempt = attempt_;
  failure.during_teardown = during_teardown;
  failures_.push_back(failure);
}

std::size_t SupervisionRecord::add_hang(const HangVerdict& verdict, SteadyTime now) {
  const std::size_t first = failures_.size();
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
      add_failure(failure, false);
    }
  }
  return first;
}

void SupervisionRecord::blame(std::size_t first_hang, int local_rank) {
  auto first = failures_.begin() + static_cast<std::ptrdiff_t>(first_hang);
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
  std::rotate(first, chosen, std::next(chosen));  // the root cause is the hang's first failure
}

std::optional<std::size_t> SupervisionRecord::root_cause() const {
  for (std::size_t index = 0; index < failures_.size(); ++index) {
    if (failures_[index].attempt == attempt_ && !failures_[index].during_teardown) return index;
  }
  return std::nullopt;
}

int SupervisionRecord::exit_code() const {
  if (launcher_signal_) return stopped_job_exit_code(*launcher_signal_, saved_workers_ == nproc_);
  if (coordinated_exit_code_) return *coordinated_exit_code_;
  const std::optional<std::size_t> cause = root_cause();
  if (!cause) return stopped_after_checkpoint() ? exit_code::kStoppedAfterCheckpoint : 0;
  const WorkerFailure& failure = failures_[*cause];
  return failure.hung || failure.waiting ? kHungWorkerExitCode : failure.status.as_exit_code();
}

}  // namespace mgtrain
