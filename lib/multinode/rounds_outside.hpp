// What the rendezvous rounds (rendezvous_rounds.hpp) and the classes they delegate to (node_table.hpp,
// rendezvous_joining.hpp, hang_across_nodes.hpp) share with the world outside them: their settings, the phase of
// the round, and RoundsOutbox, through which they order every side effect (the server carries them out; unit tests
// record them). Declarations only.
#pragma once

#include <string>

#include "config/config_request.hpp"
#include "config/launch_defaults.hpp"
#include "multinode/recency_list.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain::rdzv {

struct RoundsSettings {
  bool dynamic = false;
  int min_nodes = 1;  // static: min == max == nnodes
  int max_nodes = 1;
  double join_timeout_s = launch_defaults::kJoinTimeoutS;
  double last_call_timeout_s = launch_defaults::kLastCallTimeoutS;         // dynamic: more nodes once MIN are there
  double node_timeout_s = launch_defaults::kNodeTimeoutS;                  // silent this long past due: dead
  double heartbeat_interval_s = launch_defaults::kNodeHeartbeatIntervalS;  // the server's heartbeats to each agent
  double diagnose_timeout_s = launch_defaults::kDiagnoseTimeoutS;  // a hang: every node's diagnostics before the stop
  int max_restarts = 0;                                            // new rounds after failures, for the whole job
  Personality personality = Personality::Mgtrain;  // which failures a restart cannot help (restart_can_help)
  std::string master_addr;    // MASTER_ADDR for the workers: the server's host as the others reach it
  std::string host_agent_id;  // dynamic: the agent on the server's host gets node rank 0 (its rank 0
                              // worker hosts the store on a port the server picked there)
};

// Where the rounds are: gathering the nodes of the next round, running one, stopping it (every member's workers
// exit), or finished (the job's exit code is decided).
enum class RoundPhase { kGathering, kRunning, kStopping, kFinished };

// The side effects RendezvousRounds orders.
class RoundsOutbox {
 public:
  virtual ~RoundsOutbox() = default;
  virtual void send(ConnectionId connection, const Message& message) = 0;
  // Read nothing more from the connection. `flush`: close it once what was sent has left (the agent
  // reads to the end); otherwise drop it now (a dead or misbehaving peer).
  virtual void close(ConnectionId connection, bool flush) = 0;
  // A free port on this host for the workers' store (TCPStore of global rank 0).
  virtual int pick_store_port() = 0;
  // A line for the console of the server's host, e.g. "node 1 (hostB) joined (2 of 2)".
  virtual void note(const std::string& line) = 0;
};

}  // namespace mgtrain::rdzv
