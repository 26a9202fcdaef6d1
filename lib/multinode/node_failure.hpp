// A worker failure as the rendezvous carries it between nodes (rdzv::NodeFailure) and as the failure
// report shows it (FailedWorker): the node agent converts one into the other in both directions.
#pragma once

#include <string>

#include "multinode/rendezvous_message.hpp"
#include "supervise/failure_report.hpp"

namespace mgtrain {

// This node's failed `worker` of `round`, for the other nodes; `node` names this node ("node 1 (hostB, ...)").
rdzv::NodeFailure node_failure_from(const FailedWorker& worker, int round, int node_rank, const std::string& node);

// Another node's failure (or a lost node), for this node's failure report.
FailedWorker failed_worker_from(const rdzv::NodeFailure& failure);

}  // namespace mgtrain
