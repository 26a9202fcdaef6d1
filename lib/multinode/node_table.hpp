// The nodes the rendezvous server knows, one per agent connection, with the indexes that keep each message
// O(log nodes) with 10,000 agents (docs/PERFORMANCE.md): the static node ranks, the reference nodes, the last time
// each node was heard from and sent to (RecencyList), and counters of joined nodes and of members whose workers
// still run. Every change of a node that an index follows goes through here, and so does every message to a node
// (its last-sent time). Used by RendezvousRounds and the classes it delegates to; no I/O but RoundsOutbox.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "multinode/recency_list.hpp"
#include "multinode/rounds_outside.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

class NodeTable {
 public:
  struct Node {
    ConnectionId id = 0;
    std::string address;
    SteadyTime last_heard{};
    SteadyTime last_sent{};
    std::optional<JoinRequest> join;
    long arrival = 0;     // join order
    bool member = false;  // in the current round
    int node_rank = -1;   // in the current round (static: from the join)
    bool ended = false;   // its workers of the current round have all exited
    std::string outcome;

    // "hostB, 10.77.0.2": the host it joined with and the address it connects from (one of them when they agree
    // or the address is loopback).
    std::string host() const;
  };

  // `dynamic`: node ranks are assigned by the rounds, not claimed at the join.
  NodeTable(bool dynamic, RoundsOutbox& outbox) : dynamic_(dynamic), outbox_(outbox) {}

  // A new connection from `address`, heard from and sent to `now`.
  void add(ConnectionId connection, const std::string& address, SteadyTime now);
  Node* find(ConnectionId connection);
  // Every removal of a node goes through here: the indexes and counters follow the nodes.
  void erase(ConnectionId connection);
  void heard(Node& node, SteadyTime now);
  void send(Node& node, const Message& message, SteadyTime now);
  // To every member of the round whose workers have not all exited, `except` left out (null: none).
  void send_to_running(const Message& message, const Node* except, SteadyTime now);
  // The job's last message to every node, each connection closed once it has left, and the table emptied.
  // Returns which of the node ranks 0 .. `ranks` - 1 had a node that joined with it (static jobs).
  std::vector<bool> send_final(const Message& message, int ranks, SteadyTime now);

  // "node 1 (hostB, 10.77.0.2)" once it has a node rank, else "the agent on hostB".
  std::string describe(const Node& node) const;
  // `failure`, reported by `node` or found by the server, with the node's name and rank in `round`.
  NodeFailure failure_from(const Node& node, NodeFailure failure, int round) const;

  // `node` joined with `join` (the next in the join order); `reference`: every other node is compared with it.
  void add_join(Node& node, JoinRequest join, bool reference);
  // A joined reference node other than `except` (null: any).
  const Node* reference(const Node* except) const;
  // Static: `node` holds the node rank it joined with.
  void claim_static_rank(const Node& node);
  Node* static_holder(int rank);
  int static_rank_count() const { return static_cast<int>(static_ranks_.size()); }

  std::vector<Node*> joined();   // in connection order
  std::vector<Node*> members();  // of the current round, in connection order
  int joined_count() const { return joined_count_; }
  int unended_members() const { return unended_members_; }

  // `members` (by node rank) make up a new round; every other node is no member.
  void begin_round(const std::vector<Node*>& members);
  // Its workers of the round have all exited.
  void mark_ended(Node& node);

  // The nodes not heard from since `cutoff` or earlier, in connection order.
  std::vector<ConnectionId> silent_since(SteadyTime cutoff) const;
  // Heartbeats go out together: once one node is due (nothing sent for `interval_s`), every node that has not
  // been sent anything for half of it gets one too.
  void send_heartbeats(double interval_s, SteadyTime now);
  // The earliest of: the oldest node's silence limit (`silence_limit_s` after it was last heard), and the next
  // heartbeat due (`interval_s` after the oldest send).
  std::optional<SteadyTime> next_deadline(double silence_limit_s, double interval_s) const;

 private:
  bool dynamic_;
  RoundsOutbox& outbox_;
  std::map<ConnectionId, Node> nodes_;
  std::map<int, ConnectionId> static_ranks_;  // static: node rank -> the connection that joined with it
  RecencyList heard_;                         // nodes by the last time the server heard from them
  RecencyList sent_;                          // nodes by the last time the server sent them anything
  std::set<ConnectionId> references_;         // joined nodes that every other node is compared with
  int joined_count_ = 0;                      // nodes with a join
  int unended_members_ = 0;                   // members of the current round whose workers have not all exited
  long next_arrival_ = 0;
};

}  // namespace mgtrain::rdzv
