// The node agent's side of the rendezvous (docs/multinode.md): which agent hosts the server and with what settings,
// its link to the rendezvous (RendezvousLink: the hosted server and the client in the event loop, heartbeats, the
// server's silence, leaving), the plan a round gives a node, and what it joins with.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "multinode/rendezvous_client.hpp"
#include "multinode/rendezvous_rounds.hpp"
#include "multinode/rendezvous_server.hpp"
#include "supervise/launch_plan.hpp"
#include "util/fd.hpp"
#include "wire/frame_auth.hpp"

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

// This node agent's link to the rendezvous: the server it hosts (node 0 static, the endpoint's host dynamic; else
// none) and its client, both LoopParticipants that it drives in the supervisor's event loop (the agent's on_ready
// calls the client's, which may throw: rendezvous_client.hpp); the heartbeats the agent owes the server and the
// server's silence (SilenceRule); and, once this node's part is over, the wait before the connection closes: until
// what was sent has left, or, after the agent left over the server's silence, until the server has its leave.
class RendezvousLink {
 public:
  using Clock = std::chrono::steady_clock;

  // `server`: null unless this agent hosts the rendezvous; `say` prints a line on the console.
  RendezvousLink(std::unique_ptr<RendezvousServer> server, std::unique_ptr<RendezvousClient> client,
                 rdzv::SilenceRule silence, std::function<void(const std::string&)> say);

  RendezvousClient& client() { return *client_; }
  const RendezvousClient& client() const { return *client_; }
  // The hosted server; null unless this agent hosts the rendezvous.
  const RendezvousServer* server() const { return server_.get(); }
  RendezvousServer* server() { return server_.get(); }

  void add_fds(std::vector<pollfd>& fds);
  // Whether `ready` is the hosted server's descriptor, which the server then serves.
  bool serve(const pollfd& ready, Clock::time_point now);
  // `finished`: this node's supervisor has finished (the agent leaves); `watching`: the job is not decided yet, so
  // the server's silence matters.
  std::optional<Clock::time_point> next_deadline(bool finished, bool watching) const;
  // Time passed: the server's and the client's timers, a heartbeat when one is due and, once finished, the close
  // (nothing left to wait for, or the linger is over). Returns what the server's silence was once it counts as lost
  // (SilenceRule) while `watching`.
  std::optional<std::string> on_time(Clock::time_point now, bool finished, bool watching);
  // The server's heartbeat, answered at once unless this agent spoke recently: the server sends its heartbeats in
  // bursts, so the answers arrive together too and a server with thousands of agents wakes up rarely.
  void answer_heartbeat();
  // This agent lost the silent server: `leave` says so, and the connection stays (linger) until the server has it
  // (an early close would answer the server with a reset).
  void leave_over_silence(const rdzv::Message& leave);
  // The launcher got `signal` and its supervisor finished. Nothing this agent waits for may hold it
  // now: a client still connecting stops retrying; a joined one says goodbye (the server stops the
  // others' workers as for a lost node); a hosting agent whose round has not started tells every agent at
  // once, since the rendezvous goes away with it. `plan`: this node's.
  void leave_on_signal(const LaunchPlan& plan, int signal);
  // A signal while the job's end is passed on: no more lingering, the server's or the client's.
  void close_now();
  // The client is closed, and the hosted server (if any) has passed on the job's end.
  bool done(Clock::time_point now) const;

 private:
  // How long the connection may stay open once this node's part is over.
  Clock::duration linger() const;

  std::unique_ptr<RendezvousServer> server_;
  std::unique_ptr<RendezvousClient> client_;
  rdzv::SilenceRule silence_;
  std::function<void(const std::string&)> say_;
  int server_fd_ = -1;  // the server's descriptor as of the last add_fds
  std::optional<Clock::time_point> finished_at_;
  bool left_after_silence_ = false;  // leave_over_silence sent a leave that the server may still get
  bool said_linger_ = false;
};

}  // namespace mgtrain
