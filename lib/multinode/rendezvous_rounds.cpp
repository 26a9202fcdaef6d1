// The rendezvous round state machine (see rendezvous_rounds.hpp).
#include "multinode/rendezvous_rounds.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "multinode/hang_across_nodes.hpp"
#include "multinode/job_fingerprint.hpp"
#include "multinode/tcp_socket.hpp"
#include "supervise/supervision_policy.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain::rdzv {
namespace {}  // namespace

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
      now_(now),
      join_deadline_(now + steady_seconds(settings_.join_timeout_s)) {}

RendezvousRounds::Node* RendezvousRounds::find(ConnectionId connection) {
  auto found = nodes_.find(connection);
  return found == nodes_.end() ? nullptr : &found->second;
}

void RendezvousRounds::erase_node(ConnectionId connection) {
  auto found = nodes_.find(connection);
  if (found == nodes_.end()) return;
  const Node& node = found->second;
  if (node.join) --joined_count_;
  if (node.member && !node.ended) --unended_members_;
  references_.erase(connection);
  heard_.remove(connection);
  sent_.remove(connection);
  nodes_.erase(found);
}

void RendezvousRounds::clear_nodes() {
  nodes_.clear();
  references_.clear();
  heard_.clear();
  sent_.clear();
  joined_count_ = 0;
  unended_members_ = 0;
}

void RendezvousRounds::heard(Node& node) {
  node.last_heard = now_;
  heard_.touch(node.id, now_);
}

std::string RendezvousRounds::host_part(const Node& node) const {
  std::string host = node.join ? node.join->hostname : "";
  if (host.empty()) return node.address;
  if (node.address.empty() || is_loopback_host(node.address) || node.address == host) return host;
  return host + ", " + node.address;
}

std::string RendezvousRounds::describe(const Node& node) const {
  int rank = node.member ? node.node_rank : (!settings_.dynamic && node.join ? node.join->node_rank : -1);
  if (rank >= 0) return fmt::format("node {} ({})", rank, host_part(node));
  return fmt::format("the agent on {}", host_part(node));
}

std::string RendezvousRounds::nodes_text(int count) const {
  return fmt::format("{} node{}", count, count == 1 ? "" : "s");
}

void RendezvousRounds::send(Node& node, const Message& message) {
  outbox_.send(node.id, message);
  node.last_sent = now_;
  sent_.touch(node.id, now_);
}

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
  Node node;
  node.id = connection;
  node.address = peer_address;
  node.last_heard = now;
  node.last_sent = now;
  nodes_[connection] = node;
  heard_.touch(connection, now);
  sent_.touch(connection, now);
}

void RendezvousRounds::on_message(ConnectionId connection, const Message& message, SteadyTime now) {
  now_ = now;
  Node* node = find(connection);
  if (!node || phase_ == Phase::kFinished) return;
  heard(*node);
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
          erase_node(connection);
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
        if (!diagnosing()) return handle_failure(*node, failure);
        // During a hang's diagnosis a failure answers for the node: the hang, found first, stays the cause.
        std::vector<NodeFailure> ranks;
        if (failure.hung || failure.waiting) ranks.push_back(failure);
        return handle_diagnosed(*node, ranks);
      }
      case MessageType::kHangFound:
      case MessageType::kDiagnosed:
        if (!node->join) throw ProtocolError(type_name(message.type) + " before join");
        if (message.integer("round") != round_ || !node->member) return;
        if (message.type == MessageType::kHangFound) return handle_hang_found(*node, message);
        return handle_diagnosed(*node, read_failures(message, "rank.", kMaxDiagnosedRanks));
      case MessageType::kWorkersEnded:
        if (!node->join) throw ProtocolError("workers-ended before join");
        if (message.integer("round") == round_ && node->member) handle_ended(*node, message);
        return;
      default:
        throw ProtocolError("an agent sent a " + type_name(message.type) + " message, which only the server sends");
    }
  } catch (const ProtocolError& error) {
    outbox_.note(fmt::format("rendezvous: dropped {}: {}", describe(*node), error.what()));
    lose_node(connection, std::string("sent a bad message: ") + error.what(), kNodeLostExitCode);
  }
}

void RendezvousRounds::on_disconnect(ConnectionId connection, const std::string& why, SteadyTime now) {
  now_ = now;
  if (!find(connection) || phase_ == Phase::kFinished) {
    erase_node(connection);
    return;
  }
  lose_node(connection, why, kNodeLostExitCode);
}

// ---- a running round -----------------------------------------------------------------------

void RendezvousRounds::stop_other_members(const Node* except, const std::string& reason) {
  for (auto& [id, node] : nodes_) {
    if (&node == except || !node.member || node.ended) continue;
    send(node, stop_message(round_, reason));
  }
}

// A failure counts while the round runs, and during a scale-up's stop when it is the first: a worker that
// failed by itself before the stop order reached it (teardown exits are not reported as failures).
bool RendezvousRounds::accepts_failures() const {
  if (diagnosing()) return false;
  return phase_ == Phase::kRunning || (phase_ == Phase::kStopping && scaling_up_ && !root_cause_);
}

void RendezvousRounds::handle_failure(Node& node, const NodeFailure& reported) {
  if (!accepts_failures()) return;
  NodeFailure failure = reported;
  failure.round = round_;
  failure.node_rank = node.node_rank;
  failure.node = describe(node);
  if (failure.host.empty()) failure.host = node.join->hostname;
  root_cause_ = failure;
  phase_ = Phase::kStopping;
  outbox_.note(fmt::format("rendezvous: {}; stopping the workers of every node", failure.summary()));
  stop_other_members(&node, failure.summary());
}

void RendezvousRounds::handle_ended(Node& node, const Message& message) {
  if (node.ended) return;
  node.ended = true;
  --unended_members_;
  node.outcome = message.text("outcome");
  if (diagnosing()) handle_diagnosed(node, {});  // its workers are gone: it has nothing more to collect
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
  Node* found = find(connection);
  if (!found) return;
  Node node = *found;
  erase_node(connection);
  if (node.join && !settings_.dynamic) {
    auto rank = static_ranks_.find(node.join->node_rank);
    if (rank != static_ranks_.end() && rank->second == connection) static_ranks_.erase(rank);
  }
  outbox_.close(connection, false);
  if (!node.join) return;
  if (phase_ == Phase::kGathering) {
    outbox_.note(fmt::format("rendezvous: {} left before the round started: {}", describe(node), why));
    if (settings_.dynamic) check_gathering();
    return;
  }
  if (!node.member) return;  // a dynamic node waiting for the next round
  if (diagnosing()) {
    // It cannot answer now; the hang, found first, stays the cause (its workers' stacks may be missing).
    outbox_.note(
        fmt::format("rendezvous: {} is gone while the nodes collect a hang's diagnostics: {}", describe(node), why));
    check_diagnosis();
    check_round_end();
    return;
  }
  if (phase_ == Phase::kRunning && !node.ended) {
    NodeFailure failure;
    failure.round = round_;
    failure.node_rank = node.node_rank;
    failure.node = describe(node);
    failure.host = node.join->hostname;
    failure.node_lost = true;
    failure.exit_code = exit_code;
    failure.outcome = why;
    failure.time_utc.clear();
    root_cause_ = failure;
    phase_ = Phase::kStopping;
    outbox_.note(fmt::format("rendezvous: {}: {}; stopping the workers of every node", failure.node, why));
    stop_other_members(nullptr, failure.summary());
  } else {
    outbox_.note(fmt::format("rendezvous: {} is gone: {}", describe(node), why));
  }
  check_round_end();
}

void RendezvousRounds::check_round_end() {
  if (phase_ != Phase::kRunning && phase_ != Phase::kStopping) return;
  if (unended_members_ > 0) return;  // a counter: every node's end would otherwise walk every node
  std::vector<Node*> members;
  for (auto& [id, node] : nodes_) {
    if (node.member) members.push_back(&node);
  }
  if (phase_ == Phase::kStopping) return decide_after_round();
  finish_round_well(members);
}

// Every member ended well (a member that vanished after its workers succeeded does not matter now).
void RendezvousRounds::finish_round_well(const std::vector<Node*>& members) {
  bool checkpoint = std::any_of(members.begin(), members.end(), [](Node* n) { return n->outcome == kEndedCheckpoint; });
  if (checkpoint) {
    finish(exit_code::kStoppedAfterCheckpoint, "the workers saved a checkpoint and stopped on request");
  } else {
    finish(exit_code::kSuccess, fmt::format("every node's workers of round {} finished", round_));
  }
}

void RendezvousRounds::decide_after_round() {
  if (scaling_up_ && !root_cause_) return after_scale_up_stop();
  scaling_up_ = false;  // a worker failed during the scale-up's stop: an ordinary restart, counted
  const int code = root_cause_ ? root_cause_->exit_code : exit_code::kFailure;
  const std::string cause = root_cause_ ? root_cause_->summary() : "a node failed";
  if (restarts_used_ >= settings_.max_restarts) {
    return finish(code, fmt::format("{}; no restart left (launch.max_restarts {})", cause, settings_.max_restarts));
  }
  const bool worker_exit = root_cause_ && !root_cause_->node_lost && !root_cause_->hung && !root_cause_->waiting;
  if (worker_exit && !restart_can_help(root_cause_->status(), settings_.personality)) {
    return finish(code, fmt::format("{}, which means bad input (config, arguments, data, a missing file: "
                                    "docs/exit-codes.md): not restarted, since a restart would fail the same way "
                                    "({} of launch.max_restarts {} left unused)",
                                    cause, settings_.max_restarts - restarts_used_, settings_.max_restarts));
  }
  if (!settings_.dynamic) {
    std::vector<Node*> present(settings_.max_nodes, nullptr);
    for (Node* node : joined_nodes()) present[node->join->node_rank] = node;
    std::vector<std::string> missing;
    for (int rank = 0; rank < settings_.max_nodes; ++rank) {
      if (!present[rank]) missing.push_back(std::to_string(rank));
    }
    if (!missing.empty()) {
      return finish(code,
                    fmt::format("{}; a static job restarts only with all {}, and node rank{} {} {} gone (elastic jobs: "
                                "--rdzv-endpoint with --nnodes MIN:MAX)",
                                cause, nodes_text(settings_.max_nodes), missing.size() == 1 ? "" : "s",
                                fmt::join(missing, ", "), missing.size() == 1 ? "is" : "are"));
    }
    outbox_.note(fmt::format("rendezvous: restarting every node (restart {} of {})", restarts_used_ + 1,
                             settings_.max_restarts));
    return start_round(present);
  }
  std::vector<Node*> candidates = ordered_candidates();
  bool host_here = !candidates.empty() && candidates.front()->join->agent_id == settings_.host_agent_id;
  if (host_here && static_cast<int>(candidates.size()) >= settings_.min_nodes) {
    outbox_.note(fmt::format("rendezvous: restarting with {} (restart {} of {})",
                             nodes_text(std::min<int>(candidates.size(), settings_.max_nodes)), restarts_used_ + 1,
                             settings_.max_restarts));
    candidates.resize(std::min<int>(candidates.size(), settings_.max_nodes));
    return start_round(candidates);
  }
  regather(cause);
}

void RendezvousRounds::regather(const std::string& why) {
  phase_ = Phase::kGathering;
  join_deadline_ = now_ + steady_seconds(settings_.join_timeout_s);
  last_call_deadline_.reset();
  outbox_.note(fmt::format("rendezvous: {}; waiting up to {} for at least {} before restarting", why,
                           format_seconds(settings_.join_timeout_s), nodes_text(settings_.min_nodes)));
  for (Node* node : joined_nodes()) {
    send(*node,
         wait_message(fmt::format("{}; waiting for at least {} to restart", why, nodes_text(settings_.min_nodes))));
  }
}

// ---- the end -------------------------------------------------------------------------------

void RendezvousRounds::broadcast_final(const Message& message, int code, bool answer_latecomers) {
  if (!settings_.dynamic) told_ranks_.assign(static_cast<std::size_t>(std::max(settings_.max_nodes, 0)), false);
  for (auto& [id, node] : nodes_) {
    send(node, message);
    outbox_.close(id, true);
    if (!settings_.dynamic && node.join && node.join->node_rank >= 0 && node.join->node_rank < settings_.max_nodes) {
      told_ranks_[node.join->node_rank] = true;
    }
  }
  clear_nodes();
  static_ranks_.clear();
  phase_ = Phase::kFinished;
  final_exit_code_ = code;  // every agent prints the outcome; nothing to note here
  final_message_ = message;
  answer_latecomers_ = answer_latecomers;
}

void RendezvousRounds::finish(int code, const std::string& text) {
  bool failed = code != exit_code::kSuccess && code != exit_code::kStoppedAfterCheckpoint;
  Message message = finish_message(code, text, root_cause_);
  if (root_cause_ && root_cause_->hung) write_failures(message, "waiting.", hang_others_, kMaxListedWaiting);
  broadcast_final(message, code, failed);
}

void RendezvousRounds::reject_all(const std::string& text) {
  broadcast_final(reject_message(exit_code::kUsage, text), exit_code::kUsage, true);
}

bool RendezvousRounds::abandon(int code, const std::string& text, SteadyTime now) {
  now_ = now;
  if (phase_ == Phase::kFinished) return true;
  if (phase_ != Phase::kGathering) return false;
  root_cause_.reset();
  broadcast_final(finish_message(code, text, std::nullopt), code, false);
  return true;
}

bool RendezvousRounds::answers_latecomers() const {
  if (phase_ != Phase::kFinished || !answer_latecomers_) return false;
  if (settings_.dynamic) return true;
  return std::find(told_ranks_.begin(), told_ranks_.end(), false) != told_ranks_.end();
}

std::string RendezvousRounds::join_timeout_text() {
  std::vector<Node*> joined = joined_nodes();
  if (!settings_.dynamic) {
    std::vector<std::string> arrived, missing;
    std::vector<bool> here(settings_.max_nodes, false);
    for (Node* node : joined) here[node->join->node_rank] = true;
    for (Node* node : joined) arrived.push_back(describe(*node));
    for (int rank = 0; rank < settings_.max_nodes; ++rank) {
      if (!here[rank]) missing.push_back(std::to_string(rank));
    }
    return fmt::format(
        "not every node arrived within launch.join_timeout ({}): arrived: {}; missing: node rank{} {}. "
        "Start `mgtrain launch` on every node with the same --master-addr and --master-port, or raise "
        "--join-timeout",
        format_seconds(settings_.join_timeout_s),
        arrived.empty() ? std::string("none") : fmt::format("{}", fmt::join(arrived, ", ")),
        missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
  }
  std::vector<std::string> arrived;
  for (Node* node : ordered_candidates()) arrived.push_back(host_part(*node));
  return fmt::format(
      "only {} arrived within launch.join_timeout ({}), fewer than the minimum of {} (--nnodes {}:{}): "
      "arrived: {}. Start more nodes with the same --rdzv-endpoint and --rdzv-id, or raise --join-timeout",
      nodes_text(static_cast<int>(joined.size())), format_seconds(settings_.join_timeout_s), settings_.min_nodes,
      settings_.min_nodes, settings_.max_nodes,
      arrived.empty() ? std::string("none") : fmt::format("{}", fmt::join(arrived, ", ")));
}

void RendezvousRounds::on_time(SteadyTime now) {
  now_ = now;
  if (phase_ == Phase::kFinished) return;
  // Silent peers first: a dead node must not count as present below. The oldest are at the front of
  // heard_; those that fell silent together are reported in connection order.
  const SilenceRule rule = silence_rule();
  std::vector<ConnectionId> silent = heard_.up_to(now - steady_seconds(rule.limit_s()));
  std::sort(silent.begin(), silent.end());
  for (ConnectionId id : silent) {
    const Node* node = find(id);
    if (!node || !rule.lost(node->last_heard, now)) continue;  // rounding at the boundary: not yet
    lose_node(id, rule.describe(node->last_heard, now), kNodeLostExitCode);
    if (phase_ == Phase::kFinished) return;
  }
  if (diagnose_deadline_ && now >= *diagnose_deadline_) stop_after_diagnosis();
  if (phase_ == Phase::kGathering) {
    check_gathering();
    if (phase_ == Phase::kGathering && now >= join_deadline_) {
      std::string text = join_timeout_text();
      if (root_cause_) {
        return finish(root_cause_->exit_code, fmt::format("{}; could not restart: {}", root_cause_->summary(), text));
      }
      return finish(kNodeLostExitCode, text);
    }
  }
  send_heartbeats();
}

// Heartbeats go out together: once one node is due, every node that has not heard from the server for
// half an interval gets one too. The agents answer at once (node_agent.cpp), so 10,000 agents cost the
// server a few bursts per interval instead of a wake-up per agent; sent_ keeps the oldest first, so
// finding them costs only the heartbeats sent.
void RendezvousRounds::send_heartbeats() {
  std::optional<SteadyTime> oldest = sent_.oldest();
  if (!oldest || seconds_between(*oldest, now_) < settings_.heartbeat_interval_s) return;
  const Message heartbeat = heartbeat_message();
  for (ConnectionId id : sent_.up_to(now_ - steady_seconds(settings_.heartbeat_interval_s / 2))) {
    Node* node = find(id);
    if (node && seconds_between(node->last_sent, now_) >= settings_.heartbeat_interval_s / 2) send(*node, heartbeat);
  }
}

std::optional<SteadyTime> RendezvousRounds::next_deadline() const {
  if (phase_ == Phase::kFinished) return std::nullopt;
  std::optional<SteadyTime> next;
  auto consider = [&](SteadyTime when) {
    if (!next || when < *next) next = when;
  };
  if (phase_ == Phase::kGathering) consider(join_deadline_);
  if (diagnose_deadline_) consider(*diagnose_deadline_);
  if (last_call_deadline_) consider(*last_call_deadline_);
  if (auto heard = heard_.oldest()) consider(silence_rule().lost_at(*heard));
  if (auto sent = sent_.oldest()) consider(*sent + steady_seconds(settings_.heartbeat_interval_s));
  return next;
}

}  // namespace mgtrain::rdzv
