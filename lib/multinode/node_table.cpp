// The rendezvous server's nodes and their indexes (see node_table.hpp).
#include "multinode/node_table.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "util/timespec.hpp"
#include "wire/tcp_socket.hpp"

namespace mgtrain::rdzv {

std::string NodeTable::Node::host() const {
  std::string hostname = join ? join->hostname : "";
  if (hostname.empty()) return address;
  if (address.empty() || is_loopback_host(address) || address == hostname) return hostname;
  return hostname + ", " + address;
}

void NodeTable::add(ConnectionId connection, const std::string& address, SteadyTime now) {
  Node node;
  node.id = connection;
  node.address = address;
  node.last_heard = now;
  node.last_sent = now;
  nodes_[connection] = node;
  heard_.touch(connection, now);
  sent_.touch(connection, now);
}

NodeTable::Node* NodeTable::find(ConnectionId connection) {
  auto found = nodes_.find(connection);
  return found == nodes_.end() ? nullptr : &found->second;
}

void NodeTable::erase(ConnectionId connection) {
  auto found = nodes_.find(connection);
  if (found == nodes_.end()) return;
  const Node& node = found->second;
  if (node.join) --joined_count_;
  if (node.member && !node.ended) --unended_members_;
  if (node.join && !dynamic_) {
    auto rank = static_ranks_.find(node.join->node_rank);
    if (rank != static_ranks_.end() && rank->second == connection) static_ranks_.erase(rank);
  }
  references_.erase(connection);
  heard_.remove(connection);
  sent_.remove(connection);
  nodes_.erase(found);
}

void NodeTable::heard(Node& node, SteadyTime now) {
  node.last_heard = now;
  heard_.touch(node.id, now);
}

void NodeTable::send(Node& node, const Message& message, SteadyTime now) {
  outbox_.send(node.id, message);
  node.last_sent = now;
  sent_.touch(node.id, now);
}

void NodeTable::send_to_running(const Message& message, const Node* except, SteadyTime now) {
  for (auto& [id, node] : nodes_) {
    if (&node == except || !node.member || node.ended) continue;
    send(node, message, now);
  }
}

std::vector<bool> NodeTable::send_final(const Message& message, int ranks, SteadyTime now) {
  std::vector<bool> told(static_cast<std::size_t>(std::max(ranks, 0)), false);
  for (auto& [id, node] : nodes_) {
    send(node, message, now);
    outbox_.close(id, true);
    if (node.join && node.join->node_rank >= 0 && node.join->node_rank < ranks) told[node.join->node_rank] = true;
  }
  nodes_.clear();
  static_ranks_.clear();
  references_.clear();
  heard_.clear();
  sent_.clear();
  joined_count_ = 0;
  unended_members_ = 0;
  return told;
}

std::string NodeTable::describe(const Node& node) const {
  int rank = node.member ? node.node_rank : (!dynamic_ && node.join ? node.join->node_rank : -1);
  if (rank >= 0) return fmt::format("node {} ({})", rank, node.host());
  return fmt::format("the agent on {}", node.host());
}

NodeFailure NodeTable::failure_from(const Node& node, NodeFailure failure, int round) const {
  failure.round = round;
  failure.node_rank = node.node_rank;
  failure.node = describe(node);
  if (failure.host.empty()) failure.host = node.join->hostname;
  return failure;
}

void NodeTable::add_join(Node& node, JoinRequest join, bool reference) {
  node.join = std::move(join);
  node.arrival = next_arrival_++;
  ++joined_count_;
  if (reference) references_.insert(node.id);
}

const NodeTable::Node* NodeTable::reference(const Node* except) const {
  for (ConnectionId id : references_) {  // an index: a walk over every node per join is O(nodes^2) in all
    auto found = nodes_.find(id);
    if (found != nodes_.end() && &found->second != except) return &found->second;
  }
  return nullptr;
}

void NodeTable::claim_static_rank(const Node& node) { static_ranks_[node.join->node_rank] = node.id; }

// Static ranks are looked up through an index, so a join costs O(log nodes), not a walk over every node
// (10,000 joins would otherwise cost 10^8 steps).
NodeTable::Node* NodeTable::static_holder(int rank) {
  auto found = static_ranks_.find(rank);
  if (found == static_ranks_.end()) return nullptr;
  Node* node = find(found->second);
  return node && node->join && node->join->node_rank == rank ? node : nullptr;
}

std::vector<NodeTable::Node*> NodeTable::joined() {
  std::vector<Node*> joined;
  for (auto& [id, node] : nodes_) {
    if (node.join) joined.push_back(&node);
  }
  return joined;
}

std::vector<NodeTable::Node*> NodeTable::members() {
  std::vector<Node*> members;
  for (auto& [id, node] : nodes_) {
    if (node.member) members.push_back(&node);
  }
  return members;
}

void NodeTable::begin_round(const std::vector<Node*>& members) {
  for (auto& [id, node] : nodes_) node.member = false;
  unended_members_ = 0;
  for (std::size_t rank = 0; rank < members.size(); ++rank) {
    Node* node = members[rank];
    node->member = true;
    node->node_rank = static_cast<int>(rank);
    node->ended = false;
    node->outcome.clear();
    ++unended_members_;
  }
}

void NodeTable::mark_ended(Node& node) {
  node.ended = true;
  --unended_members_;
}

std::vector<ConnectionId> NodeTable::silent_since(SteadyTime cutoff) const {
  std::vector<ConnectionId> silent = heard_.up_to(cutoff);
  std::sort(silent.begin(), silent.end());
  return silent;
}

// The agents answer at once (RendezvousLink), so 10,000 agents cost the server a few bursts per interval instead
// of a wake-up per agent; sent_ keeps the oldest first, so finding them costs only the heartbeats sent.
void NodeTable::send_heartbeats(double interval_s, SteadyTime now) {
  std::optional<SteadyTime> oldest = sent_.oldest();
  if (!oldest || seconds_between(*oldest, now) < interval_s) return;
  const Message heartbeat = heartbeat_message();
  for (ConnectionId id : sent_.up_to(now - steady_seconds(interval_s / 2))) {
    Node* node = find(id);
    if (node && seconds_between(node->last_sent, now) >= interval_s / 2) send(*node, heartbeat, now);
  }
}

std::optional<SteadyTime> NodeTable::next_deadline(double silence_limit_s, double interval_s) const {
  std::optional<SteadyTime> next;
  if (auto heard = heard_.oldest()) next = *heard + steady_seconds(silence_limit_s);
  if (auto sent = sent_.oldest()) {
    const SteadyTime due = *sent + steady_seconds(interval_s);
    if (!next || due < *next) next = due;
  }
  return next;
}

}  // namespace mgtrain::rdzv
