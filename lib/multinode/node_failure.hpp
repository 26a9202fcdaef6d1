// A worker failure as the rendezvous carries it between nodes (rdzv::NodeFailure) and as the failure
// report shows it (FailedWorker): the node agent converts one into the other in both directions; and the agent's
// side of a hang across nodes (its hang-found, diagnosed and answer to diagnose).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "supervise/failure_report.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/supervisor.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain {

// This node's failed `worker` of `round`, for the other nodes; `node` names this node ("node 1 (hostB, ...)").
rdzv::NodeFailure node_failure_from(const FailedWorker& worker, int round, int node_rank, const std::string& node);

// Another node's failure (or a lost node), for this node's failure report.
FailedWorker failed_worker_from(const rdzv::NodeFailure& failure);

// A hang (hang_across_nodes.hpp), the agent's messages: kHangFound when this node found one (its hung rank),
// kDiagnosed once its diagnostics are collected (its stalled ranks); `node` names this node in `round`.
rdzv::Message hang_found_for(const Supervisor& supervisor, const LaunchPlan& plan, int round, const std::string& node);
rdzv::Message diagnosed_for(const Supervisor& supervisor, const LaunchPlan& plan, int round, const std::string& node);
// The server's kDiagnose (another node found a hang): this node's diagnosis starts, its workers left running, and
// its kDiagnosed follows (on_hang_diagnosed); nothing when it is diagnosing already; with no running workers to
// diagnose, the answer to send now.
std::optional<rdzv::Message> diagnose_for_server(Supervisor& supervisor, const rdzv::Message& diagnose, int round);

// This node's stalled ranks of a hang (the hung and waiting ones of its `local` report), for kDiagnosed and
// kHangFound: progress facts, stacks path and a few top frames (the frame stays small), no stderr tail.
std::vector<rdzv::NodeFailure> local_hang_ranks(const std::optional<FailureReport>& local, int round, int node_rank,
                                                const std::string& node);

// The report this node prints for a job that `cause` ended with `exit_code`. A hang: the job's verdict across
// nodes, `cause` hung and `waiting` (kFinish's list) the others. Otherwise this node's own (`local`, its
// supervisor's) when the cause is one of its workers in this `round`, with the job's node names; else the
// cause alone. `plan` is this node's (run, node rank), `node` its name in the round.
FailureReport job_failure_report(const rdzv::NodeFailure& cause, const std::vector<rdzv::NodeFailure>& waiting,
                                 const std::optional<FailureReport>& local, const LaunchPlan& plan,
                                 const std::string& node, int round, int exit_code);

}  // namespace mgtrain
