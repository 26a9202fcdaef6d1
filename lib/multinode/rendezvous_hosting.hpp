// Which node agent hosts the rendezvous server, with what settings, the plan a round gives a node, and how an
// agent leaves on a signal (docs/multinode.md).
#pragma once

#include <string>

#include "config/config_loader.hpp"
#include "multinode/frame_auth.hpp"
#include "multinode/rendezvous_client.hpp"
#include "multinode/rendezvous_rounds.hpp"
#include "multinode/rendezvous_server.hpp"
#include "supervise/launch_plan.hpp"
#include "util/fd.hpp"

namespace mgtrain {

// Static: node 0 listens on every interface at master_port. Dynamic: the agent that can bind the
// endpoint's address hosts it; the others (EADDRNOTAVAIL: not this host; EADDRINUSE: another agent
// on this host got it first) connect. Returns the listening socket, or an invalid Fd when this agent
// does not host; `connect_host` is where this agent's client connects. Throws UsageError for a port
// that is taken (static) or needs privileges.
Fd host_rendezvous(const LaunchPlan& plan, std::string& connect_host);

// The server's settings from the plan of the agent that hosts it (`host_agent_id`: that agent's join id).
rdzv::RoundsSettings rounds_settings(const LaunchPlan& plan, const std::string& host_agent_id);

// This node's plan for one round: the node rank, ranks, world size, workers' store and restart budget
// that the rendezvous server assigned.
LaunchPlan plan_for_round(LaunchPlan plan, const rdzv::Assignment& assignment);

// What a node says when its round starts: "round 0: node 1 (hostB) of 2 (ranks 2-3 of 4), workers' store
// 10.77.0.1:41234", with its role ranks when the job has several roles ("(rank 2 of 3, role b rank 0 of 1)").
// `plan` is the round's (plan_for_round); `round` its round, `node_name` the node as the server named it.
std::string round_line(const LaunchPlan& plan, int round, const std::string& node_name);

// "2" or "2:4" (launch.nnodes as the plan resolved it).
std::string nnodes_text(const LaunchPlan& plan);

// What this agent joins with: who it is, what it runs, and the fingerprint of its config.
rdzv::JoinRequest join_request_for(const LaunchPlan& plan, const LoadedConfig& loaded, const std::string& agent_id);

// One line: the rendezvous is authenticated with the token from where, or (several nodes meeting at an address
// other than loopback, no token) a warning that anyone who reaches the port can join or end the job.
void announce_authentication(const LaunchPlan& plan, const std::string& connect_host,
                             const rdzv::RendezvousToken& token);

// The launcher got `signal` and its supervisor finished. Nothing this agent waits for may hold it
// now: a client still connecting stops retrying; a joined one says goodbye (the server stops the
// others' workers as for a lost node); a hosting agent (`server`, else null) whose round has not started tells
// every agent at once, since the rendezvous goes away with it.
void leave_on_signal(const LaunchPlan& plan, RendezvousServer* server, RendezvousClient& client, int signal);

}  // namespace mgtrain
