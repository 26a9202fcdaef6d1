// A node's snapshot replication (docs/checkpoints.md#replicas-on-a-buddy-node): its launcher sends its workers'
// snapshots in memory to the next node of the ring (its buddy, named in each round's assignment) and keeps the
// snapshots of the node before it, so that losing a whole node loses no state. The two launchers have a connection
// of their own, opened by the sender to the port the buddy joined with, with the rendezvous framing and, with a job
// token, its authentication (wire/tcp_socket.hpp's MessageConnection). Only snapshot parts travel on it, and a part is
// queued only once the socket has taken the last one: the event loop never waits on it, and a slow link delays and
// skips snapshots (replica_sender.hpp), never training. A LoopParticipant of the supervisor's event loop.
#pragma once

#include <poll.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process/event_loop.hpp"
#include "replicate/replica_sender.hpp"
#include "replicate/replica_stores.hpp"
#include "util/fd.hpp"
#include "wire/node_status.hpp"
#include "wire/rendezvous_message.hpp"
#include "wire/tcp_socket.hpp"

namespace mgtrain {

class SnapshotReplication final : public LoopParticipant {
 public:
  using Clock = std::chrono::steady_clock;
  using Say = std::function<void(const std::string& line)>;

  // Listens on every interface (a port the kernel picks). `stores`: this launcher's (the workers' own, read; the
  // replicas, written), outliving this object; `whole_state`: every rank's snapshot holds the whole job's state (the
  // built-in trainer's: one copy per step is sent); `say`: a line on this node's console.
  SnapshotReplication(const rdzv::RendezvousToken& token, SnapshotStores& stores, bool whole_state, Say say);
  // The port its buddy's sender connects to, for the join; 0 when it could not listen (it said why): it takes none.
  int port() const { return port_; }
  // A round starts: this node's name and ranks, and its buddy (port 0: none, one node).
  void start_round(const rdzv::Assignment& assignment);
  // For the node's status report.
  rdzv::ReplicaStatus status() const;
  // One line for the end of this node's part: what it sent and received, and the memory its replicas hold ("":
  // nothing either way).
  std::string summary() const;

  // ---- LoopParticipant ----
  void add_fds(std::vector<pollfd>& fds) override;
  void on_ready(const pollfd& ready, Clock::time_point now) override;
  std::optional<Clock::time_point> next_deadline() const override;
  void on_time(Clock::time_point now) override;

 private:
  struct Peer {
    std::unique_ptr<MessageConnection> connection;
    std::string address;  // "10.77.0.2"
  };
  void accept_peers();
  void read_peer(Peer& peer, const pollfd& ready);
  void connect_buddy(Clock::time_point now);
  void on_buddy_ready(const pollfd& ready, Clock::time_point now);
  void buddy_lost(std::string why, Clock::time_point now);  // by value: it ends the connection `why` may come from
  void pump();

  rdzv::RendezvousToken token_;
  SnapshotStores& stores_;
  Say say_;
  Fd listener_;
  int port_ = 0;
  std::vector<Peer> peers_;  // connections from the node before this one (this round's and earlier ones')
  ReplicaSender sender_;
  ReplicaStores replicas_;

  // The buddy: where it is, the connection (connecting_ until the connect completes), when to try again.
  std::string buddy_host_;
  int buddy_port_ = 0;
  std::string buddy_name_;
  Fd connecting_;
  std::unique_ptr<MessageConnection> buddy_;
  std::optional<Clock::time_point> retry_at_;
  std::string last_problem_;  // said once until the buddy changes or is reached
  Clock::time_point next_poll_{};
};

}  // namespace mgtrain
