// Who joins the rendezvous and when the next round is complete (see rendezvous_joining.hpp).
#include "multinode/rendezvous_joining.hpp"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "multinode/job_fingerprint.hpp"
#include "util/exit_status.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

namespace mgtrain::rdzv {

std::string nodes_text(int count) { return fmt::format("{} node{}", count, count == 1 ? "" : "s"); }

RendezvousJoining::Arrival RendezvousJoining::arrival_during(RoundPhase phase, int members, int max_nodes) {
  if (phase != RoundPhase::kRunning) return Arrival::kNextRound;
  return members < max_nodes ? Arrival::kScaleUp : Arrival::kStandby;
}

// ---- agreement -----------------------------------------------------------------------------

bool RendezvousJoining::is_reference(const JoinRequest& join) const {
  // Node 0 (static) or the server host's agent (dynamic): every other node is compared with it.
  return settings_.dynamic ? join.agent_id == settings_.host_agent_id : join.node_rank == 0;
}

// The first disagreement between the nodes and the reference node, always worded with the other
// node as the one that differs and the reference's value second. Nodes that arrive before the
// reference are compared once it joins (no round starts without it), in their arrival order.
std::optional<std::string> RendezvousJoining::check_agreement(const Node& joining) {
  if (const Node* reference = nodes_.reference(&joining)) return disagreement(joining, *reference);
  if (!is_reference(*joining.join)) return std::nullopt;
  std::vector<const Node*> earlier;
  for (const Node* node : nodes_.joined()) {
    if (node != &joining) earlier.push_back(node);
  }
  std::sort(earlier.begin(), earlier.end(), [](const Node* a, const Node* b) { return a->arrival < b->arrival; });
  for (const Node* node : earlier) {
    if (auto problem = disagreement(*node, joining)) return problem;
  }
  return std::nullopt;
}

std::optional<std::string> RendezvousJoining::disagreement(const Node& joining, const Node& reference) const {
  const JoinRequest& a = *joining.join;
  const JoinRequest& b = *reference.join;
  std::string A = nodes_.describe(joining), B = nodes_.describe(reference);
  if (a.version != b.version) {
    return fmt::format("{} runs mgtrain {}, {} runs mgtrain {}; install the same mgtrain version on every node", A,
                       a.version, B, b.version);
  }
  if (a.nnodes != b.nnodes) {
    return fmt::format("{} has --nnodes {}, {} has --nnodes {}; pass the same --nnodes on every node", A, a.nnodes, B,
                       b.nnodes);
  }
  if (a.allow_uneven_nproc != b.allow_uneven_nproc) {
    auto said = [](bool on) { return on ? "--allow-uneven-nproc" : "no --allow-uneven-nproc"; };
    return fmt::format("{} has {}, {} has {}; pass the same flags on every node", A, said(a.allow_uneven_nproc), B,
                       said(b.allow_uneven_nproc));
  }
  if (a.nproc != b.nproc && !a.allow_uneven_nproc) {
    return fmt::format(
        "{} has --nproc {}, {} has --nproc {}; pass the same --nproc on every node, or --allow-uneven-nproc", A,
        a.nproc, B, b.nproc);
  }
  if (a.run_id != b.run_id && !a.run_id_generated && !b.run_id_generated) {
    return fmt::format(
        "{} has --run-id {}, {} has --run-id {}; pass the same --run-id (--rdzv-id) on every node, or "
        "give it on node 0 only",
        A, a.run_id, B, b.run_id);
  }
  if (a.max_restarts != b.max_restarts) {
    return fmt::format("{} has --max-restarts {}, {} has --max-restarts {}; pass the same --max-restarts on every node",
                       A, a.max_restarts, B, b.max_restarts);
  }
  std::string lines_a = a.config_lines, lines_b = b.config_lines;
  if (a.run_id != b.run_id) {  // one of them adopts the other's run id: compare what it will then run
    if (a.run_id_generated)
      lines_a = with_adopted_run_id(lines_a, a.run_id, b.run_id);
    else if (b.run_id_generated)
      lines_b = with_adopted_run_id(lines_b, b.run_id, a.run_id);
  }
  if (lines_a != lines_b) {
    std::vector<std::string> keys = fingerprint_differences(lines_a, lines_b);
    return fmt::format(
        "{} runs a different config than {} ({}{}); pass the same config file and overrides on every node", A, B,
        keys.empty() ? "config hash " + a.config_hash + " vs " + b.config_hash
                     : fmt::format("{}", fmt::join(keys, "; ")),
        keys.empty() ? "" : fmt::format("; {}'s value first, {}'s second", A, B));
  }
  return std::nullopt;
}

// ---- joining ------------------------------------------------------------------------------

RendezvousJoining::Decision RendezvousJoining::admit(Node& node, JoinRequest join, RoundPhase phase, int round,
                                                     bool diagnosing, SteadyTime now) {
  const bool reference = is_reference(join);
  nodes_.add_join(node, std::move(join), reference);
  if (auto problem = check_agreement(node)) {
    // Before the first round every node hears the disagreement and the job fails; once the job runs, the
    // newcomer alone is refused and the running job goes on (docs/multinode.md#a-joiner-that-does-not-match).
    if (round < 0) return {Verdict::kRejectAll, *problem};
    return refuse(node, *problem, now);
  }
  if (!settings_.dynamic) return admit_static(node, phase, round, now);
  if (phase != RoundPhase::kGathering) return arrive_late(node, phase, round, diagnosing, now);
  outbox_.note(fmt::format("rendezvous: {} joined ({} waiting for round {}, {} to {} wanted)", nodes_.describe(node),
                           nodes_.joined_count(), round + 1, settings_.min_nodes, settings_.max_nodes));
  return {Verdict::kGather, {}};
}

RendezvousJoining::Decision RendezvousJoining::admit_static(Node& node, RoundPhase phase, int round, SteadyTime now) {
  const JoinRequest& join = *node.join;
  if (join.node_rank < 0 || join.node_rank >= settings_.max_nodes) {
    return refuse(node,
                  fmt::format("{} asked for node rank {}, outside 0..{} (--nnodes {})", nodes_.describe(node),
                              join.node_rank, settings_.max_nodes - 1, settings_.max_nodes),
                  now);
  }
  if (const Node* other = nodes_.static_holder(join.node_rank); other && other != &node && round >= 0) {
    return refuse(node,
                  fmt::format("{} claimed node rank {}, which {} holds in the running job; give each node its own "
                              "--node-rank",
                              node.host(), join.node_rank, other->host()),
                  now);
  }
  if (const Node* other = nodes_.static_holder(join.node_rank);
      other && other != &node && phase == RoundPhase::kGathering) {
    return {Verdict::kRejectAll,
            fmt::format("node rank {} was claimed twice: by {} and by {}; give each node its own --node-rank",
                        join.node_rank, other->host(), node.host())};
  }
  if (phase != RoundPhase::kGathering) {
    return refuse(node,
                  fmt::format("{} joined while round {} runs with all {}; a static job takes no new nodes",
                              nodes_.describe(node), round, nodes_text(settings_.max_nodes)),
                  now);
  }
  nodes_.claim_static_rank(node);
  outbox_.note(fmt::format("rendezvous: {} joined ({} of {})", nodes_.describe(node), nodes_.static_rank_count(),
                           settings_.max_nodes));
  return {Verdict::kGather, {}};
}

// The joining node alone hears `text` and goes (its agent exits 2); the job and every other node are untouched.
RendezvousJoining::Decision RendezvousJoining::refuse(Node& node, const std::string& text, SteadyTime now) {
  outbox_.note(fmt::format("rendezvous: refused {}: {}; the job goes on without it", node.host(), text));
  nodes_.send(node, reject_message(exit_code::kUsage, text), now);
  outbox_.close(node.id, true);
  nodes_.erase(node.id);
  return {Verdict::kSettled, {}};
}

// ---- gathering -----------------------------------------------------------------------------

std::vector<RendezvousJoining::Node*> RendezvousJoining::ordered_candidates() {
  std::vector<Node*> nodes = nodes_.joined();
  auto key = [&](const Node* node) {
    bool host = node->join->agent_id == settings_.host_agent_id;
    return std::make_tuple(host ? 0 : 1, node->member ? node->node_rank : 1 << 30, node->arrival);
  };
  std::sort(nodes.begin(), nodes.end(), [&](const Node* a, const Node* b) { return key(a) < key(b); });
  return nodes;
}

std::optional<std::vector<RendezvousJoining::Node*>> RendezvousJoining::gathered(SteadyTime now) {
  if (!settings_.dynamic) {
    if (nodes_.static_rank_count() < settings_.max_nodes) return std::nullopt;
    std::vector<Node*> members = static_holders();
    if (std::find(members.begin(), members.end(), nullptr) != members.end()) return std::nullopt;
    return members;
  }
  // Counted, not sorted: this runs at every join (the candidates are ordered once, when the round starts).
  bool host_here = nodes_.reference(nullptr) != nullptr;
  int count = nodes_.joined_count();
  if (!host_here || count < settings_.min_nodes) {
    last_call_deadline_.reset();
    return std::nullopt;
  }
  if (count >= settings_.max_nodes || (last_call_deadline_ && now >= *last_call_deadline_)) {
    std::vector<Node*> candidates = ordered_candidates();
    candidates.resize(std::min(count, settings_.max_nodes));
    return candidates;
  }
  if (!last_call_deadline_) last_call_deadline_ = now + steady_seconds(settings_.last_call_timeout_s);
  return std::nullopt;
}

std::vector<RendezvousJoining::Node*> RendezvousJoining::static_holders() {
  std::vector<Node*> holders(settings_.max_nodes, nullptr);
  for (int rank = 0; rank < settings_.max_nodes; ++rank) holders[rank] = nodes_.static_holder(rank);
  return holders;
}

std::vector<int> RendezvousJoining::missing_static_ranks() {
  const std::vector<Node*> holders = static_holders();
  std::vector<int> missing;
  for (int rank = 0; rank < settings_.max_nodes; ++rank) {
    if (!holders[rank]) missing.push_back(rank);
  }
  return missing;
}

std::string RendezvousJoining::join_timeout_text() {
  std::vector<std::string> arrived;
  if (!settings_.dynamic) {
    for (Node* node : nodes_.joined()) arrived.push_back(nodes_.describe(*node));
    const std::vector<int> missing = missing_static_ranks();
    return fmt::format(
        "not every node arrived within launch.join_timeout ({}): arrived: {}; missing: node rank{} {}. "
        "Start `mgtrain launch` on every node with the same --master-addr and --master-port, or raise "
        "--join-timeout",
        format_seconds(settings_.join_timeout_s),
        arrived.empty() ? std::string("none") : fmt::format("{}", fmt::join(arrived, ", ")),
        missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
  }
  for (Node* node : ordered_candidates()) arrived.push_back(node->host());
  return fmt::format(
      "only {} arrived within launch.join_timeout ({}), fewer than the minimum of {} (--nnodes {}:{}): "
      "arrived: {}. Start more nodes with the same --rdzv-endpoint and --rdzv-id, or raise --join-timeout",
      nodes_text(nodes_.joined_count()), format_seconds(settings_.join_timeout_s), settings_.min_nodes,
      settings_.min_nodes, settings_.max_nodes,
      arrived.empty() ? std::string("none") : fmt::format("{}", fmt::join(arrived, ", ")));
}

void RendezvousJoining::announce_gathering(const std::optional<std::string>& failed, SteadyTime now) {
  std::string text;
  if (!failed) {
    const int count = nodes_.joined_count();
    text = count < settings_.min_nodes
               ? fmt::format("the round restarts once at least {} are here", nodes_text(settings_.min_nodes))
               : fmt::format("the round restarts with {} after the last call ({}) unless more nodes come",
                             nodes_text(count), format_seconds(settings_.last_call_timeout_s));
    outbox_.note("rendezvous: " + text);
  } else {
    outbox_.note(fmt::format("rendezvous: {}; waiting up to {} for at least {} before restarting", *failed,
                             format_seconds(settings_.join_timeout_s), nodes_text(settings_.min_nodes)));
    text = fmt::format("{}; waiting for at least {} to restart", *failed, nodes_text(settings_.min_nodes));
  }
  const Message wait = wait_message(text);
  for (Node* node : nodes_.joined()) nodes_.send(*node, wait, now);
}

// ---- a dynamic node while a round is under way ---------------------------------------------

std::string RendezvousJoining::standby_text(int round) const {
  return fmt::format(
      "round {} runs with the maximum of {}; this node waits as a standby and joins when a round restarts "
      "(after a failure or a lost node)",
      round, nodes_text(settings_.max_nodes));
}

RendezvousJoining::Decision RendezvousJoining::arrive_late(Node& node, RoundPhase phase, int round, bool diagnosing,
                                                           SteadyTime now) {
  const int members = static_cast<int>(nodes_.members().size());
  switch (diagnosing ? Arrival::kNextRound : arrival_during(phase, members, settings_.max_nodes)) {
    case Arrival::kScaleUp: {
      // Every member stops its workers (SIGTERM, then SIGKILL after the grace period, as for a failure), then
      // all of them and the newcomer meet again: the next round has more nodes and uses no restart.
      const int next = std::min(nodes_.joined_count(), settings_.max_nodes);
      const std::string reason = fmt::format(
          "a new node ({}) arrived; restarting the round with {} (elastic scale-up, "
          "not counted against --max-restarts)",
          node.host(), nodes_text(next));
      outbox_.note("rendezvous: " + reason);
      nodes_.send(node,
                  wait_message(fmt::format("round {} runs with {} of at most {}; it restarts to admit this node", round,
                                           nodes_text(members), settings_.max_nodes)),
                  now);
      nodes_.send_to_running(regroup_message(round, next, reason), nullptr, now);
      return {Verdict::kScaleUp, {}};
    }
    case Arrival::kStandby:
      outbox_.note(fmt::format("rendezvous: {} joined as a standby (round {} has the maximum of {})",
                               nodes_.describe(node), round, nodes_text(settings_.max_nodes)));
      nodes_.send(node, wait_message(standby_text(round)), now);
      return {Verdict::kSettled, {}};
    case Arrival::kNextRound:
      outbox_.note(fmt::format("rendezvous: {} joined; it starts at the next round", nodes_.describe(node)));
      nodes_.send(
          node, wait_message(fmt::format("round {} is stopping; this node joins the round that follows", round)), now);
      return {Verdict::kSettled, {}};
  }
  return {Verdict::kSettled, {}};
}

}  // namespace mgtrain::rdzv
