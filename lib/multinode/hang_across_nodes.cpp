// A hang across nodes: its messages, the job's verdict, and the rendezvous server's side (JobHangDiagnosis: who has
// answered, the deadline, the stop once every node has its stacks). See hang_across_nodes.hpp.
#include "multinode/hang_across_nodes.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "supervise/failure_report.hpp"
#include "supervise/hang_watch.hpp"
#include "util/exit_status.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain::rdzv {
namespace {

// What the failure report says of a stalled rank ("hung: no progress for 6 s (last step 14)").
std::string stalled_outcome(const NodeFailure& rank) {
  FailedWorker worker;
  worker.hung = rank.hung;
  worker.waiting = rank.waiting;
  worker.silent_s = rank.silent_s;
  if (rank.has_last_step) worker.last_step = rank.last_step;
  worker.process_stopped = rank.process_stopped;
  return worker.outcome();
}

}  // namespace

Message hang_found_message(int round, const NodeFailure& hung) {
  Message m = Message::of(MessageType::kHangFound);
  m.set("round", round);
  hung.write_to(m, "cause.");
  return m;
}

Message diagnose_message(int round, const std::string& reason) {
  return Message::of(MessageType::kDiagnose).set("round", round).set("reason", reason);
}

Message diagnosed_message(int round, const std::vector<NodeFailure>& ranks) {
  Message m = Message::of(MessageType::kDiagnosed);
  m.set("round", round);
  write_failures(m, "rank.", ranks, kMaxDiagnosedRanks);
  return m;
}

std::optional<JobHangVerdict> decide_job_hang(const std::vector<NodeFailure>& ranks) {
  std::vector<const NodeFailure*> timed;
  for (const NodeFailure& rank : ranks) {
    if (rank.last_progress_ms > 0) timed.push_back(&rank);
  }
  if (timed.empty()) return std::nullopt;
  // decide_hang on a made-up steady clock: Unix milliseconds as its time, "now" past every report, every rank
  // stalled (any positive timeout is due).
  std::vector<RankProgress> progress;
  long long latest = 0;
  for (std::size_t index = 0; index < timed.size(); ++index) {
    RankProgress rank;
    rank.local_rank = static_cast<int>(index);
    rank.running = true;
    rank.reported = true;
    rank.last_progress = SteadyTime(std::chrono::milliseconds(timed[index]->last_progress_ms));
    if (timed[index]->has_last_step) rank.last_step = timed[index]->last_step;
    rank.stopped = timed[index]->process_stopped;
    progress.push_back(rank);
    latest = std::max(latest, timed[index]->last_progress_ms);
  }
  const SteadyTime now = SteadyTime(std::chrono::milliseconds(latest)) + std::chrono::seconds(1);
  std::optional<HangVerdict> verdict = decide_hang(progress, now, 1e-3);
  if (!verdict || verdict->hung.empty()) return std::nullopt;
  // The stacks overrule progress as on one node (settled_by_stacks), a stopped process excepted.
  const bool process_stopped =
      std::any_of(verdict->hung.begin(), verdict->hung.end(), [](const HangRank& rank) { return rank.stopped; });
  if (!process_stopped) {
    std::vector<HangRank> stalled_ranks = verdict->hung;
    stalled_ranks.insert(stalled_ranks.end(), verdict->waiting.begin(), verdict->waiting.end());
    std::vector<std::vector<std::string>> frames;
    frames.reserve(stalled_ranks.size());
    for (const HangRank& rank : stalled_ranks) {
      frames.push_back(timed.at(static_cast<std::size_t>(rank.local_rank))->top_frames);
    }
    if (const std::optional<std::size_t> outside = settled_by_stacks(frames)) {
      verdict->hung = {stalled_ranks[*outside]};
      stalled_ranks.erase(stalled_ranks.begin() + static_cast<std::ptrdiff_t>(*outside));
      verdict->waiting = stalled_ranks;
    }
  }
  const auto stalled = [&](const HangRank& rank, bool hung) {
    NodeFailure failure = *timed.at(static_cast<std::size_t>(rank.local_rank));
    failure.hung = hung;
    failure.waiting = !hung;
    failure.node_lost = false;
    failure.exit_code = kHungWorkerExitCode;
    failure.signal = 0;
    failure.outcome = stalled_outcome(failure);
    return failure;
  };
  JobHangVerdict job;
  job.root_cause = stalled(verdict->hung.front(), true);
  for (std::size_t index = 1; index < verdict->hung.size(); ++index) {
    job.others.push_back(stalled(verdict->hung[index], true));
  }
  for (const HangRank& rank : verdict->waiting) job.others.push_back(stalled(rank, false));
  return job;
}

// ---- the rendezvous server's side ---------------------------------------------------------------

void JobHangDiagnosis::reset() {
  deadline_.reset();
  found_.reset();
  owing_.clear();
  ranks_.clear();
  others_.clear();
}

std::optional<HangStop> JobHangDiagnosis::found(NodeTable::Node& node, const NodeFailure& hung, int round,
                                                SteadyTime now) {
  found_ = hung;
  if (hung.last_progress_ms > 0) ranks_[hung.global_rank] = hung;
  deadline_ = now + steady_seconds(std::max(0.0, diagnose_timeout_s_) + kDiagnoseSlackS);
  const Message diagnose = diagnose_message(round, hung.summary());
  int asked = 0;
  for (NodeTable::Node* other : nodes_.members()) {
    if (other->ended) continue;
    owing_.insert(other->id);
    if (other == &node) continue;
    nodes_.send(*other, diagnose, now);
    ++asked;
  }
  outbox_.note(fmt::format("rendezvous: {}; {} collecting {} ranks' stacks before anything is stopped (up to {})",
                           hung.summary(), asked == 0 ? "its node is" : fmt::format("all {} nodes are", asked + 1),
                           asked == 0 ? "its" : "their", format_seconds(diagnose_timeout_s_)));
  if (diagnose_timeout_s_ <= 0) return conclude();
  return std::nullopt;
}

std::optional<HangStop> JobHangDiagnosis::answered(NodeTable::Node& node, const std::vector<NodeFailure>& ranks,
                                                   int round) {
  if (!diagnosing() || owing_.erase(node.id) == 0) return std::nullopt;
  for (const NodeFailure& rank : ranks) ranks_[rank.global_rank] = nodes_.failure_from(node, rank, round);
  if (!complete()) return std::nullopt;
  return conclude();
}

std::optional<HangStop> JobHangDiagnosis::member_gone() {
  if (!diagnosing() || !complete()) return std::nullopt;
  return conclude();
}

std::optional<HangStop> JobHangDiagnosis::on_time(SteadyTime now) {
  if (!deadline_ || now < *deadline_) return std::nullopt;
  return conclude();
}

bool JobHangDiagnosis::complete() {
  return std::none_of(owing_.begin(), owing_.end(), [&](ConnectionId id) {
    const NodeTable::Node* node = nodes_.find(id);
    return node && node->member && !node->ended;
  });
}

// Every node has its diagnostics (or the time is up): the root cause across nodes, for the job-wide stop.
HangStop JobHangDiagnosis::conclude() {
  std::string silent;
  for (ConnectionId id : owing_) {
    const NodeTable::Node* node = nodes_.find(id);
    if (node && node->member && !node->ended) silent += (silent.empty() ? "" : ", ") + nodes_.describe(*node);
  }
  if (!silent.empty()) {
    outbox_.note(fmt::format("rendezvous: no diagnostics from {} within launch.diagnose_timeout ({}); stopping anyway",
                             silent, format_seconds(diagnose_timeout_s_)));
  }
  deadline_.reset();
  std::vector<NodeFailure> ranks;
  for (const auto& [rank, failure] : ranks_) ranks.push_back(failure);
  HangStop stop;
  if (std::optional<JobHangVerdict> verdict = decide_job_hang(ranks)) {
    stop.root_cause = verdict->root_cause;
    others_ = verdict->others;
  } else {
    stop.root_cause = *found_;
    stop.root_cause.exit_code = kHungWorkerExitCode;
  }
  stop.line = fmt::format(
      "rendezvous: {} (its progress stopped first of {} stalled rank{}); stopping the workers of every node",
      stop.root_cause.summary(), ranks.size(), ranks.size() == 1 ? "" : "s");
  return stop;
}

}  // namespace mgtrain::rdzv
