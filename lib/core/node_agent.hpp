// The node agent: `mgtrain launch` on one node of a multi-node job (docs/multinode.md). It hosts the
// rendezvous server when it is node 0 (static) or can bind the endpoint (dynamic), joins the
// rendezvous like every other node, and then runs each round's workers under the supervisor: the
// server's assignment gives the node rank, the ranks and the workers' store; a local failure is
// reported at once and a stop order from the server tears the local workers down, so every node
// stops within seconds; restarts and the exit code are the server's decisions, for the whole job.
#pragma once

#include "core/config_loader.hpp"
#include "core/environment.hpp"
#include "core/launch.hpp"
#include "core/launch_plan.hpp"

namespace mgtrain {

// Runs this node's part of the job described by `plan` (plan.multi_node()). `builtin_trainer`: the
// command is the trainer, whose config path is filled in once the run directory is known.
// Returns the launcher's exit code (docs/exit-codes.md).
int run_node_agent(LaunchPlan plan, const LoadedConfig& loaded, bool builtin_trainer, const EnvMap& environment,
                   const LaunchEnvironment& outside, PortProbe& ports);

}  // namespace mgtrain
