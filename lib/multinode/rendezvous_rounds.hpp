// The rendezvous server's decisions, free of I/O: who joins, whether the nodes agree, when a round
// closes (static: all N nodes; dynamic: MAX nodes, or MIN after the last call), the node ranks and
// the workers' store of each round, elastic scale-up (a node arriving while a dynamic round runs with
// fewer than MAX restarts it, uncounted), fate sharing (one node's failure stops every node), restarts
// counted for the whole job, dead nodes (SilenceRule), and the job's exit code. RendezvousRounds keeps the
// round lifecycle; the nodes (node_table.hpp), joining (rendezvous_joining.hpp) and a hang across nodes
// (hang_across_nodes.hpp) are classes of their own that it asks.
// The server (rendezvous_server.cpp) feeds it connections, decoded messages and the time, and
// carries out its orders through RoundsOutbox; unit tests drive it with a fake outbox and made-up times.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "config/launch_defaults.hpp"
#include "multinode/hang_across_nodes.hpp"
#include "multinode/node_table.hpp"
#include "multinode/recency_list.hpp"
#include "multinode/rendezvous_joining.hpp"
#include "multinode/rounds_outside.hpp"
#include "multinode/stacks_across_nodes.hpp"
#include "wire/node_status.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

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

// One round of the job as the rounds saw it, for run.json (the job's history): who took part, why it started and
// how it ended.
struct RoundRecord {
  struct Member {
    int node_rank = 0;
    std::string host;
    std::string address;
    int first_rank = 0;
    int nproc = 0;
  };
  int round = 0;
  int restart_count = 0;
  std::string started_by;  // "start", "restart" (after a failure), "scale-up" (a node arrived)
  SteadyTime start{};
  std::optional<SteadyTime> end;
  std::vector<Member> members;
  int world_size = 0;
  std::string ended_by;  // "" while it runs; "finished", "failure", "regroup" (a node arrived), "abandoned"
  std::string cause;     // the root cause's summary, or why the round ended
  // Recovery (docs/monitoring.md#recovery): when the failure was decided (the stop order), when every member's
  // workers had exited, and the failed worker's exit time as its node reported it (UTC; "" for a lost node).
  std::optional<SteadyTime> detected;
  std::optional<SteadyTime> stopped;
  std::string fault_utc;
  // From the nodes' status reports: the highest step any rank reported in this round, and, after a restart or
  // regroup, when the first report of a step made in this round arrived and the step the round resumed from (the
  // lowest "start" the workers said; for programs that do not say, the first step seen minus one: an estimate).
  std::optional<long long> last_step;
  std::optional<SteadyTime> first_step;
  std::optional<long long> resumed_step;
  bool resumed_step_exact = false;
  std::optional<StartSource> resumed_from;  // what the rank that resumed from resumed_step said it was ("from")
};
// The history keeps this many rounds, the first and the newest (a job that restarts without end stays bounded).
inline constexpr std::size_t kMaxRoundRecords = 200;

// The round lifecycle: it takes every event, keeps the phase, the round, the restarts and the root cause, and
// asks the classes it delegates to: NodeTable (the nodes and their indexes), RendezvousJoining (who joins, when
// a round is complete, elastic arrivals) and JobHangDiagnosis (a hang across nodes).
class RendezvousRounds {
 public:
  using Phase = RoundPhase;
  using Arrival = RendezvousJoining::Arrival;
  // RendezvousJoining's, for the callers of the rounds.
  static constexpr auto arrival_during = &RendezvousJoining::arrival_during;

  RendezvousRounds(RoundsSettings settings, RoundsOutbox& outbox, SteadyTime now);
  RendezvousRounds(const RendezvousRounds&) = delete;  // its parts refer to each other
  RendezvousRounds& operator=(const RendezvousRounds&) = delete;

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
  // Every round so far, oldest first (at most kMaxRoundRecords: the first ones and the newest), and the job's run id
  // once the first round fixed it.
  const std::vector<RoundRecord>& history() const { return history_; }
  const std::string& run_id() const { return run_id_; }
  // Each member's latest status report of the current round (kNodeStatus), by node rank: the job-wide status API.
  const std::map<int, NodeStatus>& node_status() const { return node_status_; }
  // POST /stacks on the job's host (stacks_across_nodes.hpp): every member whose workers run dumps them within
  // `timeout_s`; why not, when a round does not run or a request is in flight. take_stacks: what was gathered, once
  // every asked member answered or the deadline passed.
  std::optional<StacksRefusal> start_stacks(double timeout_s, SteadyTime now);
  std::optional<JobStacks> take_stacks(SteadyTime now);
  // The exit code sent with kFinish (or kReject), once finished.
  std::optional<int> final_exit_code() const { return final_exit_code_; }

 private:
  using Node = NodeTable::Node;

  void handle_join(Node& node, const Message& message);
  void check_gathering();
  void start_round(const std::vector<Node*>& members);
  void handle_failure(Node& node, const NodeFailure& failure);
  void mark_exited(const NodeFailure& failure);
  // A failure counts while the round runs, and during a scale-up's stop when it is the first.
  bool accepts_failures() const;
  void handle_ended(Node& node, const Message& message);
  void lose_node(ConnectionId connection, const std::string& why, int exit_code);
  // Once every member's workers have exited: the job ends well, the round restarts, or the nodes gather again.
  void check_round_end();
  // `cause` ends the round: every member but `except` (null: none) stops its workers; `line` goes to the console.
  void stop_round(const NodeFailure& cause, const std::string& line, const Node* except);
  void finish(int exit_code, const std::string& text);
  void broadcast_final(const Message& message, int exit_code, bool answer_latecomers);

  RoundsSettings settings_;
  RoundsOutbox& outbox_;
  SilenceRule silence_;
  SteadyTime now_;
  Phase phase_ = Phase::kGathering;
  NodeTable table_;
  RendezvousJoining joining_;
  JobHangDiagnosis hang_;
  JobStacksRequest stacks_;
  int round_ = -1;  // -1 before the first round
  int restarts_used_ = 0;
  bool scaling_up_ = false;  // the current stop (and the gathering after it) admits new nodes: no restart used
  std::string run_id_;       // fixed by the first round
  std::optional<NodeFailure> root_cause_;  // of the current round
  SteadyTime join_deadline_{};
  std::optional<int> final_exit_code_;
  std::optional<Message> final_message_;  // the finish or reject every agent got
  bool answer_latecomers_ = false;
  std::vector<bool> told_ranks_;           // static: node ranks that got the final message
  std::map<int, NodeStatus> node_status_;  // of the current round, by node rank
  std::vector<RoundRecord> history_;
  void end_history(const std::string& ended_by, const std::string& cause);  // the current round's end, once
  void note_progress(const NodeStatus& status);
  void note_late_steps(const NodeStatus& status);
};

}  // namespace mgtrain::rdzv
