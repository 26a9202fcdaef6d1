// A worker failure as the rendezvous carries it between nodes (rdzv::NodeFailure) and as the failure
// report shows it (FailedWorker): the node agent converts one into the other in both directions.
#pragma once

#include <optional>
#include <string>

#include "multinode/rendezvous_message.hpp"
#include "supervise/failure_report.hpp"
#include "supervise/launch_plan.hpp"

namespace mgtrain {

// This node's failed `worker` of `round`, for the other nodes; `node` names this node ("node 1 (hostB, ...)").
rdzv::NodeFailure node_failure_from(const FailedWorker& worker, int round, int node_rank, const std::string& node);

// Another node's failure (or a lost node), for this node's failure report.
FailedWorker failed_worker_from(const rdzv::NodeFailure& failure);

// The report this node prints for a job that `cause` ended with `exit_code`: this node's own (`local`, its
// supervisor's) when the cause is one of its workers in this `round`, with the job's node names; else the
// cause alone. `plan` is this node's (run, node rank), `node` its name in the round.
FailureReport job_failure_report(const rdzv::NodeFailure& cause, const std::optional<FailureReport>& local,
                                 const LaunchPlan& plan, const std::string& node, int round, int exit_code);

}  // namespace mgtrain
