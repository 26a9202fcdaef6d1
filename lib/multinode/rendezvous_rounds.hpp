// The rendezvous server's decisions, free of I/O: who joins, whether the nodes agree, when a round
// closes (static: all N nodes; dynamic: MAX nodes, or MIN after the last call), the node ranks and
// the workers' store of each round, elastic scale-up (a node arriving while a dynamic round runs with
// fewer than MAX restarts it, uncounted), fate sharing (one node's failure stops every node), restarts
// counted for the whole job, dead nodes (SilenceRule), and the job's exit code.
// The server (rendezvous_server.cpp) feeds it connections, decoded messages and the time, and
// carries out its orders through RoundsOutbox; unit tests drive it with a fake outbox and made-up times.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config_request.hpp"
#include "config/launch_defaults.hpp"
#include "multinode/recency_list.hpp"
#include "multinode/rendezvous_message.hpp"

namespace mgtrain::rdzv {

struct RoundsSettings {
  bool dynamic = false;
  int min_nodes = 1;  // static: min == max == nnodes
  int max_nodes = 1;
  double join_timeout_s = launch_defaults::kJoinTimeoutS;
  double last_call_timeout_s = launch_defaults::kLastCallTimeoutS;         // dynamic: more nodes once MIN are there
  double node_timeout_s = launch_defaults::kNodeTimeoutS;                  // silent this long past due: dead
  double heartbeat_interval_s = launch_defaults::kNodeHeartbeatIntervalS;  // the server's heartbeats to each agent
  double diagnose_timeout_s = launch_defaults::kDiagnoseTimeoutS;  // a hang: every node's diagnostics before the stop
  int max_restarts = 0;                                            // new rounds after failures, for the whole job
  Personality personality = Personality::Mgtrain;  // which failures a restart cannot help (restart_can_help)
  std::string master_addr;    // MASTER_ADDR for the workers: the server's host as the others reach it
  std::string host_agent_id;  // dynamic: the agent on the server's host gets node rank 0 (its rank 0
                              // worker hosts the store on a port the server picked there)
};

// When a silent peer counts as lost, the one rule for the server (a node) and the agent (the server):
// after node_timeout of silence beyond the moment its next heartbeat was due, i.e. heartbeat_interval
// + node_timeout after the last time it was heard. A blip shorter than that is only a blip.
struct SilenceRule {
  double heartbeat_interval_s = launch_defaults::kNodeHeartbeatIntervalS;
  double node_timeout_s = launch_defaults::kNodeTimeoutS;

  double limit_s() const { return heartbeat_interval_s + node_timeout_s; }
  SteadyTime lost_at(SteadyTime last_heard) const;
  bool lost(SteadyTime last_heard, SteadyTime now) const;
  // "sent nothing for 17.2 s; a heartbeat was due every 5 s; launch.node_timeout 10"
  std::string describe(SteadyTime last_heard, SteadyTime now) const;
};

// The side effects RendezvousRounds orders.
class RoundsOutbox {
 public:
  virtual ~RoundsOutbox() = default;
  virtual void send(ConnectionId connection, const Message& message) = 0;
  // Read nothing more from the connection. `flush`: close it once what was sent has left (the agent
  // reads to the end); otherwise drop it now (a dead or misbehaving peer).
  virtual void close(ConnectionId connection, bool flush) = 0;
  // A free port on this host for the workers' store (TCPStore of global rank 0).
  virtual int pick_store_port() = 0;
  // A line for the console of the server's host, e.g. "node 1 (hostB) joined (2 of 2)".
  virtual void note(const std::string& line) = 0;
};

class RendezvousRounds {
 public:
  enum class Phase { kGathering, kRunning, kStopping, kFinished };

  // What a dynamic job does with a node that joins while a round is under way (torch's dynamic
  // rendezvous and agent: a round below MAX puts it on the wait list and the agents restart to admit
  // it, not counted against max_restarts; a full round makes it a standby, on the redundancy list).
  enum class Arrival {
    kScaleUp,    // the round runs with fewer than MAX nodes: stop it and start a larger one
    kStandby,    // the round runs with MAX nodes: wait for a restart (after a failure or a lost node)
    kNextRound,  // the round is stopping already: join the round that follows
  };
  static Arrival arrival_during(Phase phase, int members, int max_nodes);

  RendezvousRounds(RoundsSettings settings, RoundsOutbox& outbox, SteadyTime now);

  void on_connect(ConnectionId connection, const std::string& peer_address, SteadyTime now);
  // A decoded message. Throws nothing: a message that makes no sense closes its connection.
  void on_message(ConnectionId connection, const Message& message, SteadyTime now);
  // The connection ended (EOF, reset) or sent bytes that are not this protocol (`why` says which).
  void on_disconnect(ConnectionId connection, const std::string& why, SteadyTime now);
  // Time passed: join timeout, last call, heartbeats, silent nodes.
  void on_time(SteadyTime now);
  std::optional<SteadyTime> next_deadline() const;

  // The hosting agent goes away (it got a signal): before a round runs, every agent is told at once
  // (`exit_code`, `text`) and the job is over; during a round its leave message stops the others as
  // a lost node does. Returns whether the job is now finished.
  bool abandon(int exit_code, const std::string& text, SteadyTime now);
  // Finished by a refusal or failure that agents still trying to join must hear too: the server keeps
  // accepting for a short while and answers each new connection with the final message (on_connect).
  // False once every node rank of a static job was told, and after a success or abandon().
  bool answers_latecomers() const;

  Phase phase() const { return phase_; }
  bool finished() const { return phase_ == Phase::kFinished; }
  int round() const { return round_; }
  int restarts_used() const { return restarts_used_; }  // after failures; scale-ups are not counted
  bool scaling_up() const { return scaling_up_; }       // between a scale-up's stop order and its round
  // The exit code sent with kFinish (or kReject), once finished.
  std::optional<int> final_exit_code() const { return final_exit_code_; }

 private:
  struct Node {
    ConnectionId id = 0;
    std::string address;
    SteadyTime last_heard{};
    SteadyTime last_sent{};
    std::optional<JoinRequest> join;
    long arrival = 0;        // join order
    bool member = false;     // in the current round
    int node_rank = -1;      // in the current round (static: from the join)
    bool ended = false;      // its workers of the current round have all exited
    bool diagnosed = false;  // a hang: it answered kDiagnosed (or can no longer: failed, ended)
    std::string outcome;
  };

  SilenceRule silence_rule() const { return {settings_.heartbeat_interval_s, settings_.node_timeout_s}; }
  Node* find(ConnectionId connection);
  // Every removal of a node goes through here: the indexes and counters below follow nodes_.
  void erase_node(ConnectionId connection);
  void clear_nodes();
  void heard(Node& node);
  std::string describe(const Node& node) const;
  std::string host_part(const Node& node) const;
  void send(Node& node, const Message& message);
  void handle_join(Node& node, const Message& message);
  void refuse(Node& node, const std::string& text);
  std::optional<std::string> disagreement(const Node& joining, const Node& reference) const;
  bool is_reference(const Node& node) const;
  const Node* reference_node(const Node& except) const;
  std::optional<std::string> check_agreement(const Node& joining) const;
  std::vector<Node*> joined_nodes();
  Node* static_holder(int rank);
  std::vector<Node*> ordered_candidates();
  void check_gathering();
  void start_round(const std::vector<Node*>& members);
  void handle_failure(Node& node, const NodeFailure& failure);
  // A hang across nodes (hang_across_nodes.cpp): while diagnosing(), the workers run and failures are answers.
  bool diagnosing() const { return diagnose_deadline_.has_value(); }
  void handle_hang_found(Node& node, const Message& message);
  void handle_diagnosed(Node& node, const std::vector<NodeFailure>& ranks);
  void check_diagnosis();
  void stop_after_diagnosis();
  void reset_hang();
  NodeFailure from_node(const Node& node, NodeFailure failure) const;  // the server's node name and rank on it
  bool accepts_failures() const;
  int member_count() const;
  void handle_late_join(Node& node);
  void scale_up(Node& newcomer);
  void after_scale_up_stop();
  void finish_round_well(const std::vector<Node*>& members);
  std::string standby_text() const;
  void handle_ended(Node& node, const Message& message);
  void lose_node(ConnectionId connection, const std::string& why, int exit_code);
  void check_round_end();
  void send_heartbeats();
  void decide_after_round();
  void regather(const std::string& why);
  void stop_other_members(const Node* except, const std::string& reason);
  void finish(int exit_code, const std::string& text);
  void broadcast_final(const Message& message, int exit_code, bool answer_latecomers);
  void reject_all(const std::string& text);
  std::string join_timeout_text();
  std::string nodes_text(int count) const;

  RoundsSettings settings_;
  RoundsOutbox& outbox_;
  SteadyTime now_;
  Phase phase_ = Phase::kGathering;
  std::map<ConnectionId, Node> nodes_;
  std::map<int, ConnectionId> static_ranks_;  // static: node rank -> the connection that joined with it
  // Indexes that keep each message O(log nodes) with 10,000 agents (docs/PERFORMANCE.md):
  RecencyList heard_;                  // nodes by the last time the server heard from them
  RecencyList sent_;                   // nodes by the last time the server sent them anything
  std::set<ConnectionId> references_;  // joined nodes that every other node is compared with (is_reference)
  int joined_count_ = 0;               // nodes with a join
  int unended_members_ = 0;            // members of the current round whose workers have not all exited
  long next_arrival_ = 0;
  int round_ = -1;  // -1 before the first round
  int restarts_used_ = 0;
  bool scaling_up_ = false;  // the current stop (and the gathering after it) admits new nodes: no restart used
  std::string run_id_;       // fixed by the first round
  std::optional<NodeFailure> root_cause_;        // of the current round
  std::optional<SteadyTime> diagnose_deadline_;  // a hang is being diagnosed on every node until then
  std::optional<NodeFailure> hang_found_;        // the first node's hung rank
  std::map<int, NodeFailure> hang_ranks_;        // by global rank: the stalled ranks the nodes reported
  std::vector<NodeFailure> hang_others_;         // the job's verdict besides root_cause_, for kFinish
  SteadyTime join_deadline_{};
  std::optional<SteadyTime> last_call_deadline_;
  std::optional<int> final_exit_code_;
  std::optional<Message> final_message_;  // the finish or reject every agent got
  bool answer_latecomers_ = false;
  std::vector<bool> told_ranks_;  // static: node ranks that got the final message
};

}  // namespace mgtrain::rdzv
