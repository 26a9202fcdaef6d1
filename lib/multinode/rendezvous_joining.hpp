// Who joins the rendezvous, and when the nodes of the next round are all there (RendezvousJoining, which
// RendezvousRounds asks). A join is compared with the reference node (node 0 static, the server host's agent
// dynamic): the same mgtrain version, --nnodes, --nproc (unless uneven is allowed), run id, --max-restarts and
// config; a static node's rank must be its own. Before the first round a disagreement ends the job on every node;
// after it the joiner alone is refused and the job goes on (docs/multinode.md#a-joiner-that-does-not-match). The
// gathering closes with every node rank (static), or with MAX nodes or MIN after the last call (dynamic, the server
// host's agent first). A dynamic node that arrives while a round is under way scales it up (below MAX), waits as a
// standby (at MAX), or joins the round that follows (it is stopping). No I/O: notes and messages go to RoundsOutbox.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "multinode/node_table.hpp"
#include "multinode/rounds_outside.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

class RendezvousJoining {
 public:
  using Node = NodeTable::Node;

  // What a dynamic job does with a node that joins while a round is under way (torch's dynamic
  // rendezvous and agent: a round below MAX puts it on the wait list and the agents restart to admit
  // it, not counted against max_restarts; a full round makes it a standby, on the redundancy list).
  enum class Arrival {
    kScaleUp,    // the round runs with fewer than MAX nodes: stop it and start a larger one
    kStandby,    // the round runs with MAX nodes: wait for a restart (after a failure or a lost node)
    kNextRound,  // the round is stopping already: join the round that follows
  };
  static Arrival arrival_during(RoundPhase phase, int members, int max_nodes);

  // What the rounds do once a join is checked (admit).
  enum class Verdict {
    kGather,     // a node for the next round: the gathering may be complete now (gathered)
    kScaleUp,    // a dynamic node below MAX while a round runs: every member was told to stop its workers (regroup)
    kSettled,    // nothing more: the joiner was refused alone, or told to wait (standby, the next round)
    kRejectAll,  // before the first round the nodes disagree: the job ends, every agent hears `text`
  };
  struct Decision {
    Verdict verdict = Verdict::kSettled;
    std::string text;
  };

  RendezvousJoining(const RoundsSettings& settings, NodeTable& nodes, RoundsOutbox& outbox)
      : settings_(settings), nodes_(nodes), outbox_(outbox) {}

  // `node` joined with `join` while the rounds are in `phase` of `round` (-1 before the first); `diagnosing`: a
  // hang is being diagnosed, and the round is as good as stopping (a scale-up now would stop it before the stacks).
  Decision admit(Node& node, JoinRequest join, RoundPhase phase, int round, bool diagnosing, SteadyTime now);

  // The members of the next round by node rank once the gathering is complete (every static node rank; dynamic:
  // MAX nodes, or at least MIN with the server host's agent once the last call is over), else nullopt.
  std::optional<std::vector<Node*>> gathered(SteadyTime now);
  // Dynamic: MIN nodes are there; the round starts then with however many came.
  std::optional<SteadyTime> last_call_deadline() const { return last_call_deadline_; }
  void reset_last_call() { last_call_deadline_.reset(); }
  // Dynamic: the server host's agent first (its rank 0 worker hosts the store), then the last round's members
  // in their rank order, then the newcomers in arrival order.
  std::vector<Node*> ordered_candidates();
  // Static: the node holding each node rank (null where none does), and the node ranks that no node holds.
  std::vector<Node*> static_holders();
  std::vector<int> missing_static_ranks();
  // Why the gathering failed at launch.join_timeout: who arrived and who did not.
  std::string join_timeout_text();
  // The rounds gather again: after `failed` (why the round failed; the wait for MIN nodes), or after an elastic
  // scale-up's stop (nullopt; the wait for the last call). Every joined node hears it.
  void announce_gathering(const std::optional<std::string>& failed, SteadyTime now);
  // A dynamic node's wait while round `round` runs with MAX nodes.
  std::string standby_text(int round) const;

 private:
  bool is_reference(const JoinRequest& join) const;
  std::optional<std::string> check_agreement(const Node& joining);
  std::optional<std::string> disagreement(const Node& joining, const Node& reference) const;
  Decision admit_static(Node& node, RoundPhase phase, int round, SteadyTime now);
  Decision arrive_late(Node& node, RoundPhase phase, int round, bool diagnosing, SteadyTime now);
  Decision refuse(Node& node, const std::string& text, SteadyTime now);

  const RoundsSettings& settings_;
  NodeTable& nodes_;
  RoundsOutbox& outbox_;
  std::optional<SteadyTime> last_call_deadline_;
};

// "1 node", "3 nodes".
std::string nodes_text(int count);

}  // namespace mgtrain::rdzv
