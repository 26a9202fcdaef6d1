// The rendezvous rounds: joining and gathering the nodes of the next round, starting it, and nodes
// that join a dynamic round under way (elastic scale-up or standby) (see rendezvous_rounds.hpp; the
// running round and the end are in rendezvous_rounds.cpp).
#include "multinode/rendezvous_rounds.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "multinode/job_fingerprint.hpp"
#include "util/error.hpp"
#include "util/exit_status.hpp"
#include "util/time_format.hpp"
#include "util/timespec.hpp"

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

}  // namespace

// ---- joining -------------------------------------------------------------------------------

bool RendezvousRounds::is_reference(const Node& node) const {
  // Node 0 (static) or the server host's agent (dynamic): every other node is compared with it.
  return node.join && (settings_.dynamic ? node.join->agent_id == settings_.host_agent_id : node.join->node_rank == 0);
}

const RendezvousRounds::Node* RendezvousRounds::reference_node(const Node& except) const {
  for (ConnectionId id : references_) {  // an index: a walk over every node per join is O(nodes^2) in all
    auto found = nodes_.find(id);
    if (found != nodes_.end() && &found->second != &except && is_reference(found->second)) return &found->second;
  }
  return nullptr;
}

// The first disagreement between the nodes and the reference node, always worded with the other
// node as the one that differs and the reference's value second. Nodes that arrive before the
// reference are compared once it joins (no round starts without it), in their arrival order.
std::optional<std::string> RendezvousRounds::check_agreement(const Node& joining) const {
  if (const Node* reference = reference_node(joining)) return disagreement(joining, *reference);
  if (!is_reference(joining)) return std::nullopt;
  std::vector<const Node*> earlier;
  for (const auto& [id, node] : nodes_) {
    if (&node != &joining && node.join) earlier.push_back(&node);
  }
  std::sort(earlier.begin(), earlier.end(), [](const Node* a, const Node* b) { return a->arrival < b->arrival; });
  for (const Node* node : earlier) {
    if (auto problem = disagreement(*node, joining)) return problem;
  }
  return std::nullopt;
}

std::optional<std::string> RendezvousRounds::disagreement(const Node& joining, const Node& reference) const {
  const JoinRequest& a = *joining.join;
  const JoinRequest& b = *reference.join;
  std::string A = describe(joining), B = describe(reference);
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

void RendezvousRounds::handle_join(Node& node, const Message& message) {
  node.join = JoinRequest::from(message);
  node.arrival = next_arrival_++;
  ++joined_count_;
  if (is_reference(node)) references_.insert(node.id);
  const JoinRequest& join = *node.join;
  if (auto problem = check_agreement(node)) {
    // Before the first round every node hears the disagreement and the job fails; once the job runs, the
    // newcomer alone is refused and the running job goes on (docs/multinode.md#a-joiner-that-does-not-match).
    if (round_ < 0) return reject_all(*problem);
    return refuse(node, *problem);
  }
  if (settings_.dynamic) {
    if (phase_ == Phase::kGathering) {
      outbox_.note(fmt::format("rendezvous: {} joined ({} waiting for round {}, {} to {} wanted)", describe(node),
                               joined_count_, round_ + 1, settings_.min_nodes, settings_.max_nodes));
      check_gathering();
    } else {
      handle_late_join(node);
    }
    return;
  }
  // static
  if (join.node_rank < 0 || join.node_rank >= settings_.max_nodes) {
    return refuse(node, fmt::format("{} asked for node rank {}, outside 0..{} (--nnodes {})", describe(node),
                                    join.node_rank, settings_.max_nodes - 1, settings_.max_nodes));
  }
  if (const Node* other = static_holder(join.node_rank); other && other != &node && round_ >= 0) {
    return refuse(node, fmt::format("{} claimed node rank {}, which {} holds in the running job; give each node its "
                                    "own --node-rank",
                                    host_part(node), join.node_rank, host_part(*other)));
  }
  if (const Node* other = static_holder(join.node_rank); other && other != &node && phase_ == Phase::kGathering) {
    return reject_all(fmt::format("node rank {} was claimed twice: by {} and by {}; give each node its own --node-rank",
                                  join.node_rank, host_part(*other), host_part(node)));
  }
  if (phase_ != Phase::kGathering) {
    return refuse(node, fmt::format("{} joined while round {} runs with all {}; a static job takes no new nodes",
                                    describe(node), round_, nodes_text(settings_.max_nodes)));
  }
  static_ranks_[join.node_rank] = node.id;
  outbox_.note(
      fmt::format("rendezvous: {} joined ({} of {})", describe(node), static_ranks_.size(), settings_.max_nodes));
  check_gathering();
}

// The joining node alone hears `text` and goes (its agent exits 2); the job and every other node are untouched.
void RendezvousRounds::refuse(Node& node, const std::string& text) {
  outbox_.note(fmt::format("rendezvous: refused {}: {}; the job goes on without it", host_part(node), text));
  send(node, reject_message(exit_code::kUsage, text));
  outbox_.close(node.id, true);
  erase_node(node.id);
}

// Static ranks are looked up through an index, so a join costs O(log nodes), not a walk over every node
// (10,000 joins would otherwise cost 10^8 steps).
RendezvousRounds::Node* RendezvousRounds::static_holder(int rank) {
  auto found = static_ranks_.find(rank);
  if (found == static_ranks_.end()) return nullptr;
  Node* node = find(found->second);
  return node && node->join && node->join->node_rank == rank ? node : nullptr;
}

std::vector<RendezvousRounds::Node*> RendezvousRounds::joined_nodes() {
  std::vector<Node*> joined;
  for (auto& [id, node] : nodes_) {
    if (node.join) joined.push_back(&node);
  }
  return joined;
}

// Dynamic: the server host's agent first (its rank 0 worker hosts the store), then the last round's
// members in their rank order, then the newcomers in arrival order.
std::vector<RendezvousRounds::Node*> RendezvousRounds::ordered_candidates() {
  std::vector<Node*> nodes = joined_nodes();
  auto key = [&](const Node* node) {
    bool host = node->join->agent_id == settings_.host_agent_id;
    return std::make_tuple(host ? 0 : 1, node->member ? node->node_rank : 1 << 30, node->arrival);
  };
  std::sort(nodes.begin(), nodes.end(), [&](const Node* a, const Node* b) { return key(a) < key(b); });
  return nodes;
}

void RendezvousRounds::check_gathering() {
  if (phase_ != Phase::kGathering) return;
  if (!settings_.dynamic) {
    if (static_cast<int>(static_ranks_.size()) < settings_.max_nodes) return;
    std::vector<Node*> members(settings_.max_nodes, nullptr);
    for (int rank = 0; rank < settings_.max_nodes; ++rank) members[rank] = static_holder(rank);
    if (std::find(members.begin(), members.end(), nullptr) == members.end()) start_round(members);
    return;
  }
  // Counted, not sorted: this runs at every join (the candidates are ordered once, when the round starts).
  bool host_here = !references_.empty();
  int count = joined_count_;
  if (!host_here || count < settings_.min_nodes) {
    last_call_deadline_.reset();
    return;
  }
  if (count >= settings_.max_nodes || (last_call_deadline_ && now_ >= *last_call_deadline_)) {
    std::vector<Node*> candidates = ordered_candidates();
    candidates.resize(std::min(count, settings_.max_nodes));
    start_round(candidates);
    return;
  }
  if (!last_call_deadline_)
    last_call_deadline_ = now_ + std::chrono::duration_cast<SteadyTime::duration>(
                                     std::chrono::duration<double>(settings_.last_call_timeout_s));
}

void RendezvousRounds::start_round(const std::vector<Node*>& members) {
  if (round_ >= 0 && !scaling_up_) ++restarts_used_;  // torchrun: "membership changes do not count as retries"
  const bool scale_up = scaling_up_;
  scaling_up_ = false;
  ++round_;
  last_call_deadline_.reset();
  root_cause_.reset();
  reset_hang();
  if (run_id_.empty()) {
    // Every explicit run id agrees (checked at join); nodes without one adopt it, else node 0's.
    for (Node* node : members) {
      if (!node->join->run_id_generated) run_id_ = node->join->run_id;
    }
    if (run_id_.empty()) run_id_ = members.front()->join->run_id;
  }
  for (auto& [id, node] : nodes_) node.member = false;
  unended_members_ = 0;
  Assignment assignment;
  assignment.round = round_;
  assignment.restart_count = restarts_used_;
  assignment.master_addr = settings_.master_addr;
  assignment.master_port = outbox_.pick_store_port();
  assignment.run_id = run_id_;
  assignment.max_restarts = settings_.max_restarts;
  std::vector<std::string> roles;
  for (std::size_t rank = 0; rank < members.size(); ++rank) {
    Node* node = members[rank];
    node->member = true;
    node->node_rank = static_cast<int>(rank);
    node->ended = false;
    node->outcome.clear();
    ++unended_members_;
    assignment.nproc_per_node.push_back(node->join->nproc);
    roles.push_back(node->join->role);
  }
  const std::vector<RoleRanks> by_role = role_ranks(roles, assignment.nproc_per_node);
  // One message, its per-node fields changed for each member (building it anew per member is O(nodes^2)).
  Message message = assignment.to_message();
  for (Node* node : members) {
    const RoleRanks& role = by_role[static_cast<std::size_t>(node->node_rank)];
    message.set("node_rank", node->node_rank).set("node_name", describe(*node));
    message.set("role_first_rank", role.first_rank).set("role_world_size", role.world_size);
    send(*node, message);
  }
  for (Node* node : joined_nodes()) {
    if (!node->member) send(*node, wait_message(standby_text()));
  }
  phase_ = Phase::kRunning;
  outbox_.note(fmt::format("rendezvous: round {} started{}: {}, {} workers{}, store {}:{}", round_,
                           scale_up ? " (scale-up)" : "", nodes_text(static_cast<int>(members.size())),
                           assignment.world_size(), roles_text(roles, by_role), assignment.master_addr,
                           assignment.master_port));
}

}  // namespace mgtrain::rdzv

// ---- elastic scale-up ----------------------------------------------------------------------

namespace mgtrain::rdzv {

RendezvousRounds::Arrival RendezvousRounds::arrival_during(Phase phase, int members, int max_nodes) {
  if (phase != Phase::kRunning) return Arrival::kNextRound;
  return members < max_nodes ? Arrival::kScaleUp : Arrival::kStandby;
}

int RendezvousRounds::member_count() const {
  return static_cast<int>(
      std::count_if(nodes_.begin(), nodes_.end(), [](const auto& entry) { return entry.second.member; }));
}

std::string RendezvousRounds::standby_text() const {
  return fmt::format(
      "round {} runs with the maximum of {}; this node waits as a standby and joins when a round restarts "
      "(after a failure or a lost node)",
      round_, nodes_text(settings_.max_nodes));
}

// A dynamic node that joined while a round is under way.
void RendezvousRounds::handle_late_join(Node& node) {
  // While a hang is diagnosed the round is as good as stopping: a scale-up now would stop it before the stacks.
  switch (diagnosing() ? Arrival::kNextRound : arrival_during(phase_, member_count(), settings_.max_nodes)) {
    case Arrival::kScaleUp:
      return scale_up(node);
    case Arrival::kStandby:
      outbox_.note(fmt::format("rendezvous: {} joined as a standby (round {} has the maximum of {})", describe(node),
                               round_, nodes_text(settings_.max_nodes)));
      send(node, wait_message(standby_text()));
      return;
    case Arrival::kNextRound:
      outbox_.note(fmt::format("rendezvous: {} joined; it starts at the next round", describe(node)));
      send(node, wait_message(fmt::format("round {} is stopping; this node joins the round that follows", round_)));
      return;
  }
}

// Every member stops its workers (SIGTERM, then SIGKILL after the grace period, as for a failure), then
// all of them and the newcomer meet again: the next round has more nodes and uses no restart.
void RendezvousRounds::scale_up(Node& newcomer) {
  const int members = member_count();
  const int next = std::min(static_cast<int>(joined_nodes().size()), settings_.max_nodes);
  phase_ = Phase::kStopping;
  scaling_up_ = true;
  const std::string reason = fmt::format(
      "a new node ({}) arrived; restarting the round with {} (elastic scale-up, "
      "not counted against --max-restarts)",
      host_part(newcomer), nodes_text(next));
  outbox_.note("rendezvous: " + reason);
  send(newcomer, wait_message(fmt::format("round {} runs with {} of at most {}; it restarts to admit this node", round_,
                                          nodes_text(members), settings_.max_nodes)));
  for (auto& [id, node] : nodes_) {
    if (node.member && !node.ended) send(node, regroup_message(round_, next, reason));
  }
  check_round_end();
}

// Every member's workers of the stopped round have exited: gather again (MAX at once, else the last call).
void RendezvousRounds::after_scale_up_stop() {
  std::vector<Node*> members;
  for (auto& [id, node] : nodes_) {
    if (node.member) members.push_back(&node);
  }
  // Workers that finished on their own before the stop order reached them have ended the job: starting
  // them again would run the program twice.
  if (std::any_of(members.begin(), members.end(),
                  [](Node* n) { return n->outcome == kEndedSuccess || n->outcome == kEndedCheckpoint; })) {
    scaling_up_ = false;
    return finish_round_well(members);
  }
  phase_ = Phase::kGathering;
  join_deadline_ = now_ + steady_seconds(settings_.join_timeout_s);
  last_call_deadline_.reset();
  check_gathering();
  if (phase_ != Phase::kGathering) return;
  const int count = static_cast<int>(joined_nodes().size());
  const std::string text =
      count < settings_.min_nodes
          ? fmt::format("the round restarts once at least {} are here", nodes_text(settings_.min_nodes))
          : fmt::format("the round restarts with {} after the last call ({}) unless more nodes come", nodes_text(count),
                        format_seconds(settings_.last_call_timeout_s));
  outbox_.note("rendezvous: " + text);
  for (Node* node : joined_nodes()) send(*node, wait_message(text));
}

}  // namespace mgtrain::rdzv
