// A hang across the nodes of a job (docs/diagnosis.md). When one node finds a hang it tells the
// rendezvous server (kHangFound) and keeps its workers running while it collects its ranks' stacks; the server asks
// every other node to do the same (kDiagnose); each answers with its stalled ranks' progress facts once its stacks
// are written (kDiagnosed). Only when every node answered, or launch.diagnose_timeout (+ kDiagnoseSlackS) passed,
// does the server pick the root cause across nodes (decide_job_hang) and stop every node. The messages and the
// verdict are pure and here; RendezvousRounds' side of it is in hang_across_nodes.cpp too.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "multinode/rendezvous_message.hpp"

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

}  // namespace mgtrain::rdzv
