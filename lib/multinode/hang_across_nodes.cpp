// A hang across nodes: its messages, the job's verdict, and the rendezvous server's side (RendezvousRounds: who has
// answered, the deadline, the stop once every node has its stacks). See hang_across_nodes.hpp.
#include "multinode/hang_across_nodes.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "multinode/rendezvous_rounds.hpp"
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
  // The stacks overrule progress as on one node (supervisor_hang.cpp), a stopped process excepted: the one rank
  // outside any collective while every other waits in one is hung.
  const bool process_stopped =
      std::any_of(verdict->hung.begin(), verdict->hung.end(), [](const HangRank& rank) { return rank.stopped; });
  if (!process_stopped) {
    std::vector<HangRank> stalled_ranks = verdict->hung;
    stalled_ranks.insert(stalled_ranks.end(), verdict->waiting.begin(), verdict->waiting.end());
    std::vector<std::string> main_frames;
    for (const HangRank& rank : stalled_ranks) {
      const std::vector<std::string>& frames = timed.at(static_cast<std::size_t>(rank.local_rank))->top_frames;
      main_frames.push_back(frames.empty() ? std::string() : frames.front());
    }
    if (const std::optional<std::size_t> outside = outside_collective(main_frames)) {
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

NodeFailure RendezvousRounds::from_node(const Node& node, NodeFailure failure) const {
  failure.round = round_;
  failure.node_rank = node.node_rank;
  failure.node = describe(node);
  if (failure.host.empty()) failure.host = node.join->hostname;
  return failure;
}

void RendezvousRounds::reset_hang() {
  diagnose_deadline_.reset();
  hang_found_.reset();
  hang_ranks_.clear();
  hang_others_.clear();
  for (auto& [id, node] : nodes_) node.diagnosed = false;
}

// The first node that found a hang: every other member collects its diagnostics too; nothing is stopped yet.
void RendezvousRounds::handle_hang_found(Node& node, const Message& message) {
  if (phase_ != Phase::kRunning || diagnosing()) return;  // a second node's hang: its kDiagnosed will come
  NodeFailure hung = from_node(node, NodeFailure::read_from(message, "cause."));
  hang_found_ = hung;
  if (hung.last_progress_ms > 0) hang_ranks_[hung.global_rank] = hung;
  diagnose_deadline_ = now_ + steady_seconds(std::max(0.0, settings_.diagnose_timeout_s) + kDiagnoseSlackS);
  int asked = 0;
  for (auto& [id, other] : nodes_) {
    other.diagnosed = other.ended || !other.member;
    if (&other == &node || !other.member || other.ended) continue;
    send(other, diagnose_message(round_, hung.summary()));
    ++asked;
  }
  outbox_.note(fmt::format("rendezvous: {}; {} collecting {} ranks' stacks before anything is stopped (up to {})",
                           hung.summary(), asked == 0 ? "its node is" : fmt::format("all {} nodes are", asked + 1),
                           asked == 0 ? "its" : "their", format_seconds(settings_.diagnose_timeout_s)));
  if (settings_.diagnose_timeout_s <= 0) stop_after_diagnosis();
}

void RendezvousRounds::handle_diagnosed(Node& node, const std::vector<NodeFailure>& ranks) {
  if (!diagnosing() || node.diagnosed) return;
  node.diagnosed = true;
  for (const NodeFailure& rank : ranks) hang_ranks_[rank.global_rank] = from_node(node, rank);
  check_diagnosis();
}

void RendezvousRounds::check_diagnosis() {
  if (!diagnosing()) return;
  for (const auto& [id, node] : nodes_) {
    if (node.member && !node.ended && !node.diagnosed) return;
  }
  stop_after_diagnosis();
}

// Every node has its diagnostics (or the time is up): the root cause across nodes, then the job-wide stop.
void RendezvousRounds::stop_after_diagnosis() {
  if (!diagnosing()) return;
  std::string silent;
  for (const auto& [id, node] : nodes_) {
    if (node.member && !node.ended && !node.diagnosed) silent += (silent.empty() ? "" : ", ") + describe(node);
  }
  if (!silent.empty()) {
    outbox_.note(fmt::format("rendezvous: no diagnostics from {} within launch.diagnose_timeout ({}); stopping anyway",
                             silent, format_seconds(settings_.diagnose_timeout_s)));
  }
  diagnose_deadline_.reset();
  std::vector<NodeFailure> ranks;
  for (const auto& [rank, failure] : hang_ranks_) ranks.push_back(failure);
  std::optional<JobHangVerdict> verdict = decide_job_hang(ranks);
  if (verdict) {
    root_cause_ = verdict->root_cause;
    hang_others_ = verdict->others;
  } else {
    root_cause_ = *hang_found_;
    root_cause_->exit_code = kHungWorkerExitCode;
  }
  phase_ = Phase::kStopping;
  outbox_.note(
      fmt::format("rendezvous: {} (its progress stopped first of {} stalled rank{}); stopping the workers of "
                  "every node",
                  root_cause_->summary(), ranks.size(), ranks.size() == 1 ? "" : "s"));
  stop_other_members(nullptr, root_cause_->summary());
}

}  // namespace mgtrain::rdzv
