// The node agent: `mgtrain launch` on one node of a multi-node job (docs/multinode.md). It hosts the
// rendezvous server when it is node 0 (static) or can bind the endpoint (dynamic), joins the
// rendezvous like every other node, and then runs each round's workers under the supervisor, whose event
// loop carries its sockets (a LoopParticipant) and which it drives as its AttemptCoordinator: the
// server's assignment gives the node rank, the ranks and the workers' store; a local failure is
// reported at once and a stop order from the server tears the local workers down, so every node
// stops within seconds; restarts and the exit code are the server's decisions, for the whole job.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "config/config_loader.hpp"
#include "config/config_request.hpp"
#include "multinode/frame_auth.hpp"
#include "supervise/failure_report.hpp"
#include "supervise/launch_plan.hpp"
#include "supervise/port_probe.hpp"
#include "supervise/supervisor.hpp"
#include "util/environment.hpp"

namespace mgtrain {

// What the agent takes from the launch around it (launch/launch_environment.hpp has the whole set).
struct NodeAgentOutside {
  int stdout_fd = 1;  // the console
  int stderr_fd = 2;
  // The config loaded again with another run id, for a node that was started without one and adopts
  // node 0's (so ${run_id} expands to it). Unset: only launch.run_id changes.
  std::function<LoadedConfig(const std::string& run_id)> reload_with_run_id;
  // The job's rendezvous secret (launch/rendezvous_secret.hpp); none: frames are not authenticated.
  rdzv::RendezvousToken token;
  // What this node collects about its ranks when a hang is found (launch/rank_diagnostics.hpp); none: nothing.
  HangDiagnostics* diagnostics = nullptr;
};

// How this node's part of the job ended.
struct NodeAgentResult {
  int exit_code = 0;                       // the launcher's exit code (docs/exit-codes.md)
  int node_rank = 0;                       // this node's rank in the last round (dynamic: assigned on arrival)
  bool workers_saved_and_stopped = false;  // this node's workers of the last round all exited 75, none failed:
                                           // on node 0 that means global rank 0 finished writing its checkpoint
  std::optional<FailureReport> failure;    // the failure report this node printed (its own workers' or the job's)
  std::optional<int> launcher_signal;      // this agent was stopped by this signal (SIGTERM: a SLURM time limit?)
};

// Runs this node's part of the job described by `plan` (plan.multi_node()). Each round's plan (node
// rank, ranks, workers' store, run directory) is made from it and handed to the supervisor; with
// plan.builtin_trainer the workers get the run's config file (worker_command). Messages go to
// outside's descriptors.
NodeAgentResult run_node_agent(const LaunchPlan& plan, const LoadedConfig& loaded, const EnvMap& environment,
                               const NodeAgentOutside& outside, PortProbe& ports);

}  // namespace mgtrain
