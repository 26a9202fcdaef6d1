// The rendezvous round lifecycle (see rendezvous_rounds.hpp): the events, starting a round, its failures and
// ends, and what follows it (the job's end, a restart, gathering again).
#include "multinode/rendezvous_rounds.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"
#include "wire/tcp_socket.hpp"

namespace mgtrain::rdzv {
namespace {

// " (role trainer: 2 workers, role reader: 1)" when the round has more than one role, else "".
std::string roles_text(const std::vector<std::string>& roles, const std::vector<RoleRanks>& ranks) {
  std::vector<std::string> parts;
  std::set<std::string> seen;
  for (std::size_t node = 0; node < roles.size(); ++node) {
    if (!seen.insert(roles[node]).second) continue;
    parts.push_back(fmt::format("role {}: {}", roles[node], ranks[node].world_size));
  }
  if (parts.size() < 2) return "";
  return fmt::format(" ({})", fmt::join(parts, ", "));
}

// Why a failed round (`cause`, the root cause's summary) is not restarted, or nullopt when it may be: no restart
// left, or a worker's exit that means bad input, which a restart would only repeat.
std::optional<std::string> no_restart(const std::optional<NodeFailure>& root_cause, const std::string& cause,
                                      int restarts_used, const RoundsSettings& settings) {
  if (restarts_used >= settings.max_restarts) {
    return fmt::format("{}; no restart left (launch.max_restarts {})", cause, settings.max_restarts);
  }
  const bool worker_exit = root_cause && !root_cause->node_lost && !root_cause->hung && !root_cause->waiting;
  if (worker_exit && !restart_can_help(root_cause->status(), settings.personality)) {
    return fmt::format(
        "{}, which means bad input (config, arguments, data, a missing file: docs/exit-codes.md): not restarted, "
        "since a restart would fail the same way ({} of launch.max_restarts {} left unused)",
        cause, settings.max_restarts - restarts_used, settings.max_restarts);
  }
  return std::nullopt;
}

}  // namespace

SteadyTime SilenceRule::lost_at(SteadyTime last_heard) const { return last_heard + steady_seconds(limit_s()); }

bool SilenceRule::lost(SteadyTime last_heard, SteadyTime now) const {
  return seconds_between(last_heard, now) >= limit_s();  // in seconds, as shown: rounding never loses one early
}

std::string SilenceRule::describe(SteadyTime last_heard, SteadyTime now) const {
  return fmt::format("sent nothing for {}; a heartbeat was due every {}; launch.node_timeout {}",
                     format_seconds(seconds_between(last_heard, now)), format_seconds(heartbeat_interval_s),
                     format_seconds(node_timeout_s));
}

RendezvousRounds::RendezvousRounds(RoundsSettings settings, RoundsOutbox& outbox, SteadyTime now)
    : settings_(std::move(settings)),
      outbox_(outbox),
      silence_{settings_.heartbeat_interval_s, settings_.node_timeout_s},
      now_(now),
      table_(settings_.dynamic, outbox),
      joining_(settings_, table_, outbox),
      hang_(settings_.diagnose_timeout_s, table_, outbox),
      stacks_(table_),
      join_deadline_(now + steady_seconds(settings_.join_timeout_s)) {}

void RendezvousRounds::on_connect(ConnectionId connection, const std::string& peer_address, SteadyTime now) {
  now_ = now;
  if (phase_ == Phase::kFinished) {
    // An agent still trying to join hears the decision instead of retrying until its join timeout.
    if (final_message_ && answer_latecomers_) {
      outbox_.send(connection, *final_message_);
      outbox_.close(connection, true);
    } else {
      outbox_.close(connection, false);
    }
    return;
  }
  table_.add(connection, peer_address, now);
}

void RendezvousRounds::on_message(ConnectionId connection, const Message& message, SteadyTime now) {
  now_ = now;
  Node* node = table_.find(connection);
  if (!node || phase_ == Phase::kFinished) return;
  // Status reports travel beside the heartbeats and do not stand in for them (RendezvousClient::send_report): a node's
  // liveness is timed by the same messages with or without reports.
  if (message.type != MessageType::kNodeStatus) table_.heard(*node, now_);
  try {
    switch (message.type) {
      case MessageType::kHeartbeat:
        return;
      case MessageType::kJoin:
        if (node->join) throw ProtocolError("a second join on the same connection");
        handle_join(*node, message);
        return;
      case MessageType::kLeave: {
        if (!node->join) {
          outbox_.close(connection, false);
          table_.erase(connection);
          return;
        }
        int code = static_cast<int>(message.integer("exit_code"));
        lose_node(connection, message.text("reason"), code);
        return;
      }
      case MessageType::kWorkersFailed: {
        if (!node->join) throw ProtocolError("workers-failed before join");
        NodeFailure failure = NodeFailure::read_from(message, "cause.");
        if (failure.round != round_ || !node->member) return;
        mark_exited(failure);
        if (!hang_.diagnosing()) return handle_failure(*node, failure);
        // During a hang's diagnosis a failure answers for the node: the hang, found first, stays the cause.
        std::vector<NodeFailure> ranks;
        if (failure.hung || failure.waiting) ranks.push_back(failure);
        if (auto stop = hang_.answered(*node, ranks, round_)) stop_round(stop->root_cause, stop->line, nullptr);
        return;
      }
      case MessageType::kHangFound:
      case MessageType::kDiagnosed: {
        if (!node->join) throw ProtocolError(type_name(message.type) + " before join");
        if (message.integer("round") != round_ || !node->member) return;
        std::optional<HangStop> stop;
        if (message.type == MessageType::kDiagnosed) {
          stop = hang_.answered(*node, read_failures(message, "rank.", kMaxDiagnosedRanks), round_);
        } else if (phase_ == Phase::kRunning && !hang_.diagnosing()) {  // a second node's: its kDiagnosed will come
          NodeFailure hung = table_.failure_from(*node, NodeFailure::read_from(message, "cause."), round_);
          stop = hang_.found(*node, hung, round_, now_);
        }
        if (stop) stop_round(stop->root_cause, stop->line, nullptr);
        return;
      }
      case MessageType::kNodeStatus: {
        if (!node->join) throw ProtocolError("node-status before join");
        NodeStatus status = NodeStatus::from(message);
        if (status.round < round_) return note_late_steps(status);
        if (status.round != round_ || !node->member || status.node_rank != node->node_rank) return;
        note_progress(status);
        node_status_[status.node_rank] = std::move(status);
        return;
      }
      case MessageType::kStacksDumped:
        if (!node->join) throw ProtocolError("stacks-dumped before join");
        stacks_.answered(*node, NodeStacks::from(message), now_);
        return;
      case MessageType::kWorkersEnded:
        if (!node->join) throw ProtocolError("workers-ended before join");
        if (message.integer("round") == round_ && node->member) handle_ended(*node, message);
        return;
      default:
        throw ProtocolError("an agent sent a " + type_name(message.type) + " message, which only the server sends");
    }
  } catch (const ProtocolError& error) {
    outbox_.note(fmt::format("rendezvous: dropped {}: {}", table_.describe(*node), error.what()));
    lose_node(connection, std::string("sent a bad message: ") + error.what(), kNodeLostExitCode);
  }
}

// The failed rank shows as exited in the job-wide status at once, before its node's next report.
void RendezvousRounds::mark_exited(const NodeFailure& failure) {
  auto node = node_status_.find(failure.node_rank);
  if (node == node_status_.end()) return;
  for (RankRow& row : node->second.ranks) {
    if (row.rank == failure.global_rank) row.state = "exited";
  }
}

void RendezvousRounds::on_disconnect(ConnectionId connection, const std::string& why, SteadyTime now) {
  now_ = now;
  if (!table_.find(connection) || phase_ == Phase::kFinished) {
    table_.erase(connection);
    return;
  }
  lose_node(connection, why, kNodeLostExitCode);
}

// ---- joining and starting a round ----------------------------------------------------------

void RendezvousRounds::handle_join(Node& node, const Message& message) {
  const RendezvousJoining::Decision decision =
      joining_.admit(node, JoinRequest::from(message), phase_, round_, hang_.diagnosing(), now_);
  switch (decision.verdict) {
    case RendezvousJoining::Verdict::kGather:
      return check_gathering();
    case RendezvousJoining::Verdict::kScaleUp:
      // Every member was told to stop its workers; all of them and the newcomer meet again once they exited.
      if (!history_.empty() && !history_.back().detected) history_.back().detected = now_;
      phase_ = Phase::kStopping;
      scaling_up_ = true;
      return check_round_end();
    case RendezvousJoining::Verdict::kSettled:
      return;
    case RendezvousJoining::Verdict::kRejectAll:
      return broadcast_final(reject_message(exit_code::kUsage, decision.text), exit_code::kUsage, true);
  }
}

void RendezvousRounds::check_gathering() {
  if (phase_ != Phase::kGathering) return;
  if (std::optional<std::vector<Node*>> members = joining_.gathered(now_)) start_round(*members);
}

void RendezvousRounds::start_round(const std::vector<Node*>& members) {
  if (round_ >= 0 && !scaling_up_) ++restarts_used_;  // torchrun: "membership changes do not count as retries"
  const bool scale_up = scaling_up_;
  scaling_up_ = false;
  ++round_;
  end_history(scale_up ? "regroup" : "failure", root_cause_ ? root_cause_->summary()
                                                : scale_up  ? "a node arrived (elastic scale-up)"
                                                            : "");
  node_status_.clear();  // the ranks of the round before are gone
  joining_.reset_last_call();
  root_cause_.reset();
  hang_.reset();
  if (run_id_.empty()) {
    // Every explicit run id agrees (checked at join); nodes without one adopt it, else node 0's.
    for (Node* node : members) {
      if (!node->join->run_id_generated) run_id_ = node->join->run_id;
    }
    if (run_id_.empty()) run_id_ = members.front()->join->run_id;
  }
  table_.begin_round(members);
  Assignment assignment;
  assignment.round = round_;
  assignment.restart_count = restarts_used_;
  assignment.master_addr = settings_.master_addr;
  assignment.master_port = outbox_.pick_store_port();
  assignment.run_id = run_id_;
  assignment.max_restarts = settings_.max_restarts;
  std::vector<std::string> roles, cpu_keys;
  for (Node* node : members) {
    assignment.nproc_per_node.push_back(node->join->nproc);
    roles.push_back(node->join->role);
    cpu_keys.push_back(node->join->cpu_sharing);
  }
  const std::vector<RoleRanks> by_role = role_ranks(roles, assignment.nproc_per_node);
  const std::vector<int> sharing = workers_sharing_cpus(cpu_keys, assignment.nproc_per_node);
  // One message, its per-node fields changed for each member (building it anew per member is O(nodes^2)).
  Message message = assignment.to_message();
  for (std::size_t index = 0; index < members.size(); ++index) {
    Node* node = members[index];
    const RoleRanks& role = by_role[static_cast<std::size_t>(node->node_rank)];
    message.set("node_rank", node->node_rank).set("node_name", table_.describe(*node));
    // The ring of snapshot replicas: each node's buddy is the next node (docs/checkpoints.md#replicas-on-a-buddy-node).
    const Node& buddy = *members[(index + 1) % members.size()];
    const bool ring = members.size() > 1 && buddy.join->replica_port > 0;
    // An agent that reached the server over loopback is the server host's: the others reach it at the store's address.
    const bool local = is_loopback_host(buddy.address) && !is_loopback_host(node->address);
    const std::string& buddy_host = local ? settings_.master_addr : buddy.address;
    message.set("buddy_host", ring ? buddy_host : "").set("buddy_port", ring ? buddy.join->replica_port : 0);
    message.set("buddy_name", ring ? table_.describe(buddy) : "");
    message.set("role_first_rank", role.first_rank).set("role_world_size", role.world_size);
    message.set("workers_sharing_cpus", sharing[static_cast<std::size_t>(node->node_rank)]);
    table_.send(*node, message, now_);
  }
  const Message standby = wait_message(joining_.standby_text(round_));
  for (Node* node : table_.joined()) {
    if (!node->member) table_.send(*node, standby, now_);
  }
  RoundRecord record;
  record.round = round_;
  record.restart_count = restarts_used_;
  record.started_by = round_ == 0 ? "start" : scale_up ? "scale-up" : "restart";
  record.start = now_;
  record.world_size = assignment.world_size();
  for (Node* node : members) {
    record.members.push_back({node->node_rank, node->join->hostname, node->address,
                              assignment.first_rank(node->node_rank), node->join->nproc});
  }
  if (history_.size() >= kMaxRoundRecords) history_.erase(history_.begin() + kMaxRoundRecords / 2);
  history_.push_back(std::move(record));
  phase_ = Phase::kRunning;
  outbox_.note(fmt::format("rendezvous: round {} started{}: {}, {} workers{}, store {}:{}", round_,
                           scale_up ? " (scale-up)" : "", nodes_text(static_cast<int>(members.size())),
                           assignment.world_size(), roles_text(roles, by_role), assignment.master_addr,
                           assignment.master_port));
}

// ---- a running round -----------------------------------------------------------------------

void RendezvousRounds::stop_round(const NodeFailure& cause, const std::string& line, const Node* except) {
  root_cause_ = cause;
  if (!history_.empty() && !history_.back().detected) {
    history_.back().detected = now_;
    history_.back().fault_utc = cause.node_lost ? "" : cause.time_utc;
  }
  phase_ = Phase::kStopping;
  outbox_.note(line);
  table_.send_to_running(stop_message(round_, root_cause_->summary()), except, now_);
}

// A worker that failed by itself during a scale-up's stop, before the stop order reached it, counts (teardown exits
// are not reported as failures); while a hang is diagnosed a failure is an answer (JobHangDiagnosis).
bool RendezvousRounds::accepts_failures() const {
  if (hang_.diagnosing()) return false;
  return phase_ == Phase::kRunning || (phase_ == Phase::kStopping && scaling_up_ && !root_cause_);
}

void RendezvousRounds::handle_failure(Node& node, const NodeFailure& reported) {
  if (!accepts_failures()) return;
  const NodeFailure failure = table_.failure_from(node, reported, round_);
  stop_round(failure, fmt::format("rendezvous: {}; stopping the workers of every node", failure.summary()), &node);
}

void RendezvousRounds::handle_ended(Node& node, const Message& message) {
  if (node.ended) return;
  table_.mark_ended(node);
  node.outcome = message.text("outcome");
  // Its workers are gone: during a hang's diagnosis it has nothing more to collect.
  if (auto stop = hang_.answered(node, {}, round_)) stop_round(stop->root_cause, stop->line, nullptr);
  if (node.outcome == kEndedFailed && accepts_failures()) {
    NodeFailure failure;
    failure.exit_code = static_cast<int>(message.integer("exit_code"));
    failure.outcome = fmt::format("workers failed (exit code {})", failure.exit_code);
    failure.node_lost = true;
    handle_failure(node, failure);
  }
  check_round_end();
}

void RendezvousRounds::lose_node(ConnectionId connection, const std::string& why, int exit_code) {
  Node* found = table_.find(connection);
  if (!found) return;
  const Node node = *found;
  stacks_.forget(connection);
  table_.erase(connection);
  outbox_.close(connection, false);
  if (!node.join) return;
  if (phase_ == Phase::kGathering) {
    outbox_.note(fmt::format("rendezvous: {} left before the round started: {}", table_.describe(node), why));
    if (settings_.dynamic) check_gathering();
    return;
  }
  if (!node.member) return;  // a dynamic node waiting for the next round
  if (hang_.diagnosing()) {
    // It cannot answer now; the hang, found first, stays the cause (its workers' stacks may be missing).
    outbox_.note(fmt::format("rendezvous: {} is gone while the nodes collect a hang's diagnostics: {}",
                             table_.describe(node), why));
    if (auto stop = hang_.member_gone()) stop_round(stop->root_cause, stop->line, nullptr);
    check_round_end();
    return;
  }
  if (phase_ == Phase::kRunning && !node.ended) {
    NodeFailure lost;
    lost.node_lost = true;
    lost.exit_code = exit_code;
    lost.outcome = why;
    const NodeFailure failure = table_.failure_from(node, lost, round_);
    stop_round(failure, fmt::format("rendezvous: {}: {}; stopping the workers of every node", failure.node, why),
               nullptr);
  } else {
    outbox_.note(fmt::format("rendezvous: {} is gone: {}", table_.describe(node), why));
  }
  check_round_end();
}

// ---- after a round -------------------------------------------------------------------------

void RendezvousRounds::check_round_end() {
  if (phase_ != Phase::kRunning && phase_ != Phase::kStopping) return;
  if (table_.unended_members() > 0) return;  // a counter: every node's end would otherwise walk every node
  const bool scale_up = phase_ == Phase::kStopping && scaling_up_ && !root_cause_;
  if (!history_.empty() && !history_.back().stopped) history_.back().stopped = now_;  // every member's workers exited
  const std::vector<Node*> members = table_.members();
  const auto any_ended = [&](const char* outcome) {
    return std::any_of(members.begin(), members.end(), [&](const Node* n) { return n->outcome == outcome; });
  };
  // Every member ended well (a member that vanished after its workers succeeded does not matter now). After a
  // scale-up's stop, workers that finished on their own before the stop order reached them have ended the job:
  // starting them again would run the program twice.
  if (phase_ == Phase::kRunning || (scale_up && (any_ended(kEndedSuccess) || any_ended(kEndedCheckpoint)))) {
    scaling_up_ = false;
    if (any_ended(kEndedCheckpoint)) {
      return finish(exit_code::kStoppedAfterCheckpoint, "the workers saved a checkpoint and stopped on request");
    }
    return finish(exit_code::kSuccess, fmt::format("every node's workers of round {} finished", round_));
  }
  std::optional<std::string> failed;  // why the nodes gather again; none: after an elastic scale-up's stop
  if (!scale_up) {
    scaling_up_ = false;  // a worker failed during the scale-up's stop: an ordinary restart, counted
    const int code = root_cause_ ? root_cause_->exit_code : exit_code::kFailure;
    const std::string cause = root_cause_ ? root_cause_->summary() : "a node failed";
    if (std::optional<std::string> text = no_restart(root_cause_, cause, restarts_used_, settings_)) {
      return finish(code, *text);
    }
    if (!settings_.dynamic) {
      const std::vector<int> missing = joining_.missing_static_ranks();
      if (!missing.empty()) {
        return finish(code, fmt::format("{}; a static job restarts only with all {}, and node rank{} {} {} gone "
                                        "(elastic jobs: --rdzv-endpoint with --nnodes MIN:MAX)",
                                        cause, nodes_text(settings_.max_nodes), missing.size() == 1 ? "" : "s",
                                        fmt::join(missing, ", "), missing.size() == 1 ? "is" : "are"));
      }
      outbox_.note(fmt::format("rendezvous: restarting every node (restart {} of {})", restarts_used_ + 1,
                               settings_.max_restarts));
      return start_round(joining_.static_holders());
    }
    std::vector<Node*> candidates = joining_.ordered_candidates();
    bool host_here = !candidates.empty() && candidates.front()->join->agent_id == settings_.host_agent_id;
    if (host_here && static_cast<int>(candidates.size()) >= settings_.min_nodes) {
      outbox_.note(fmt::format("rendezvous: restarting with {} (restart {} of {})",
                               nodes_text(std::min<int>(candidates.size(), settings_.max_nodes)), restarts_used_ + 1,
                               settings_.max_restarts));
      candidates.resize(std::min<int>(candidates.size(), settings_.max_nodes));
      return start_round(candidates);
    }
    failed = cause;
  }
  phase_ = Phase::kGathering;
  join_deadline_ = now_ + steady_seconds(settings_.join_timeout_s);
  joining_.reset_last_call();
  if (!failed) check_gathering();  // after a scale-up: MAX nodes start at once, else the last call
  if (phase_ == Phase::kGathering) joining_.announce_gathering(failed, now_);
}

// ---- the end -------------------------------------------------------------------------------

void RendezvousRounds::broadcast_final(const Message& message, int code, bool answer_latecomers) {
  told_ranks_ = table_.send_final(message, settings_.dynamic ? 0 : settings_.max_nodes, now_);
  phase_ = Phase::kFinished;
  final_exit_code_ = code;  // every agent prints the outcome; nothing to note here
  final_message_ = message;
  answer_latecomers_ = answer_latecomers;
}

// A report's steps: the round's highest so far, and after a restart or regroup the first one with a step.
void RendezvousRounds::note_progress(const NodeStatus& status) {
  if (history_.empty()) return;
  RoundRecord& record = history_.back();
  std::optional<long long> resumed;   // the lowest start among ranks that made a step in this round
  std::optional<StartSource> source;  // what that start was, as the rank that had it said
  bool exact = true;
  for (const RankRow& row : status.ranks) {
    if (!row.step) continue;
    if (!record.last_step || *row.step > *record.last_step) record.last_step = *row.step;
    if (*row.step <= row.start_step.value_or(0)) continue;  // no step made yet (a trainer beats its start first)
    const long long start = row.start_step ? *row.start_step : *row.step - 1;
    exact = exact && row.start_step.has_value();
    if (!resumed || start < *resumed) {
      resumed = start;
      source = row.start_source;
    }
  }
  if (resumed && !record.first_step && record.started_by != "start") {
    record.first_step = now_;
    record.resumed_step = resumed;
    record.resumed_step_exact = exact;
    record.resumed_from = source;
  }
}

// A report of an earlier round (ranks that exited as it ended, sent once the next had begun): its steps still count
// for that round's last step, so the steps a restart lost are counted from the newest one any rank reached.
void RendezvousRounds::note_late_steps(const NodeStatus& status) {
  for (auto record = history_.rbegin(); record != history_.rend(); ++record) {
    if (record->round != status.round) continue;
    for (const RankRow& row : status.ranks) {
      if (row.step && (!record->last_step || *row.step > *record->last_step)) record->last_step = *row.step;
    }
    return;
  }
}

void RendezvousRounds::end_history(const std::string& ended_by, const std::string& cause) {
  if (history_.empty() || !history_.back().ended_by.empty()) return;
  history_.back().ended_by = ended_by;
  history_.back().cause = cause;
  history_.back().end = now_;
}

void RendezvousRounds::finish(int code, const std::string& text) {
  bool failed = code != exit_code::kSuccess && code != exit_code::kStoppedAfterCheckpoint;
  end_history(failed ? "failure" : "finished", root_cause_ ? root_cause_->summary() : text);
  Message message = finish_message(code, text, root_cause_);
  if (root_cause_ && root_cause_->hung) write_failures(message, "waiting.", hang_.others(), kMaxListedWaiting);
  broadcast_final(message, code, failed);
}

std::optional<StacksRefusal> RendezvousRounds::start_stacks(double timeout_s, SteadyTime now) {
  now_ = now;
  if (phase_ != Phase::kRunning) return StacksRefusal{false, "no round of the job runs now: nothing to dump"};
  return stacks_.start(round_, timeout_s, now);
}

std::optional<JobStacks> RendezvousRounds::take_stacks(SteadyTime now) { return stacks_.take(now); }

bool RendezvousRounds::abandon(int code, const std::string& text, SteadyTime now) {
  now_ = now;
  if (phase_ == Phase::kFinished) return true;
  if (phase_ != Phase::kGathering) return false;
  root_cause_.reset();
  end_history("abandoned", text);
  broadcast_final(finish_message(code, text, std::nullopt), code, false);
  return true;
}

bool RendezvousRounds::answers_latecomers() const {
  if (phase_ != Phase::kFinished || !answer_latecomers_) return false;
  if (settings_.dynamic) return true;
  return std::find(told_ranks_.begin(), told_ranks_.end(), false) != told_ranks_.end();
}

// ---- time ----------------------------------------------------------------------------------

void RendezvousRounds::on_time(SteadyTime now) {
  now_ = now;
  if (phase_ == Phase::kFinished) return;
  // Silent peers first: a dead node must not count as present below. Those that fell silent together are
  // reported in connection order.
  for (ConnectionId id : table_.silent_since(now - steady_seconds(silence_.limit_s()))) {
    const Node* node = table_.find(id);
    if (!node || !silence_.lost(node->last_heard, now)) continue;  // rounding at the boundary: not yet
    lose_node(id, silence_.describe(node->last_heard, now), kNodeLostExitCode);
    if (phase_ == Phase::kFinished) return;
  }
  if (auto stop = hang_.on_time(now)) stop_round(stop->root_cause, stop->line, nullptr);
  if (phase_ == Phase::kGathering) {
    check_gathering();
    if (phase_ == Phase::kGathering && now >= join_deadline_) {
      std::string text = joining_.join_timeout_text();
      if (root_cause_) {
        return finish(root_cause_->exit_code, fmt::format("{}; could not restart: {}", root_cause_->summary(), text));
      }
      return finish(kNodeLostExitCode, text);
    }
  }
  table_.send_heartbeats(settings_.heartbeat_interval_s, now_);
}

std::optional<SteadyTime> RendezvousRounds::next_deadline() const {
  if (phase_ == Phase::kFinished) return std::nullopt;
  std::optional<SteadyTime> next = table_.next_deadline(silence_.limit_s(), settings_.heartbeat_interval_s);
  auto consider = [&](SteadyTime when) {
    if (!next || when < *next) next = when;
  };
  if (phase_ == Phase::kGathering) consider(join_deadline_);
  if (auto diagnose = hang_.deadline()) consider(*diagnose);
  if (auto stacks = stacks_.deadline()) consider(*stacks);
  if (auto last_call = joining_.last_call_deadline()) consider(*last_call);
  return next;
}

}  // namespace mgtrain::rdzv
