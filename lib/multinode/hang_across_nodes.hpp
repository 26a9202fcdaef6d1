// A hang across the nodes of a job (docs/diagnosis.md). When one node finds a hang it tells the
// rendezvous server (kHangFound) and keeps its workers running while it collects its ranks' stacks; the server asks
// every other node to do the same (kDiagnose); each answers with its stalled ranks' progress facts once its stacks
// are written (kDiagnosed). Only when every node answered, or launch.diagnose_timeout (+ kDiagnoseSlackS) passed,
// does the server pick the root cause across nodes (decide_job_hang) and stop every node. The messages, the
// verdict and the server's side of it (JobHangDiagnosis, which RendezvousRounds asks) are here; no I/O.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "multinode/node_table.hpp"
#include "multinode/rounds_outside.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

// The most ranks one kDiagnosed lists (a node's stalled ranks; more are left out, the frame stays bounded).
inline constexpr int kMaxDiagnosedRanks = 256;
// The most waiting ranks kFinish lists besides the root cause (failure.json of a job of thousands of ranks).
inline constexpr int kMaxListedWaiting = 64;
// How long past launch.diagnose_timeout the server waits for the nodes' answers (they started a little later and
// the answers travel).
inline constexpr double kDiagnoseSlackS = 2.0;

// `hung`: the rank this node found hung (its local verdict), for the server's lines.
Message hang_found_message(int round, const NodeFailure& hung);
// `reason`: "rank 3 (local rank 1) on node 1 (hostB): hung: no progress for 6 s (last step 14)".
Message diagnose_message(int round, const std::string& reason);
// `ranks`: this node's stalled ranks (hung or waiting), with last progress, step, stacks and top frames.
Message diagnosed_message(int round, const std::vector<NodeFailure>& ranks);

struct JobHangVerdict {
  NodeFailure root_cause;           // hung: its progress stopped first across the nodes
  std::vector<NodeFailure> others;  // every other stalled rank: hung too (a stopped process), else waiting
};

// The hang's root cause across nodes, by the single-node rule (supervise/hang_watch.hpp, decide_hang) on the ranks'
// last progress times (Unix milliseconds, so the nodes' clocks must agree to well under the hang timeout; within
// kTieWindowS the lowest step decides) and their stopped processes. Ranks without a progress time are left out;
// nullopt when none is left. Each rank's hung/waiting flags, outcome and exit code are set by the verdict.
std::optional<JobHangVerdict> decide_job_hang(const std::vector<NodeFailure>& ranks);

// What ends a hang's diagnosis: the root cause across nodes that stops the round, and the server's line about it.
struct HangStop {
  NodeFailure root_cause;
  std::string line;
};

// The rendezvous server's side of a hang across nodes, for one round at a time: which members still owe their
// diagnostics, the stalled ranks they reported, the deadline. Each event returns the stop once it is due (every
// member answered, or the deadline passed); RendezvousRounds then stops the round with it.
class JobHangDiagnosis {
 public:
  // `diagnose_timeout_s`: launch.diagnose_timeout; `nodes`: the server's nodes (asked and named through it).
  JobHangDiagnosis(double diagnose_timeout_s, NodeTable& nodes, RoundsOutbox& outbox)
      : diagnose_timeout_s_(diagnose_timeout_s), nodes_(nodes), outbox_(outbox) {}

  // While diagnosing, the workers run and failures are answers.
  bool diagnosing() const { return deadline_.has_value(); }
  std::optional<SteadyTime> deadline() const { return deadline_; }
  // The stalled ranks besides the root cause, for kFinish (empty unless the last diagnosis found some).
  const std::vector<NodeFailure>& others() const { return others_; }
  // A new round: no hang.
  void reset();

  // `node` found `hung` (its kHangFound, named by the server) in `round`: every other member collects its
  // diagnostics too; nothing is stopped yet. A second node's hang is not a new one: its kDiagnosed will come.
  std::optional<HangStop> found(NodeTable::Node& node, const NodeFailure& hung, int round, SteadyTime now);
  // `node`'s stalled ranks (its kDiagnosed; empty: a failure or end answers for it).
  std::optional<HangStop> answered(NodeTable::Node& node, const std::vector<NodeFailure>& ranks, int round);
  // A member went away: it can no longer answer.
  std::optional<HangStop> member_gone();
  std::optional<HangStop> on_time(SteadyTime now);

 private:
  // Every member that still runs workers has answered.
  bool complete();
  // The root cause across nodes (or the first node's hung rank, when no rank has a progress time); ends the diagnosis.
  HangStop conclude();

  double diagnose_timeout_s_;
  NodeTable& nodes_;
  RoundsOutbox& outbox_;
  std::optional<SteadyTime> deadline_;  // a hang is being diagnosed on every node until then
  std::optional<NodeFailure> found_;    // the first node's hung rank
  std::set<ConnectionId> owing_;        // members (of the round, workers running) whose diagnostics have not come
  std::map<int, NodeFailure> ranks_;    // by global rank: the stalled ranks the nodes reported
  std::vector<NodeFailure> others_;     // the job's verdict besides the root cause
};

}  // namespace mgtrain::rdzv
