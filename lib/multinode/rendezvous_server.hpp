// The rendezvous server: the listening socket and one MessageConnection per agent around
// RendezvousRounds. A LoopParticipant of the event loop of the node agent that hosts it (node 0 static,
// the endpoint's host dynamic; its RendezvousLink passes the loop's calls on): descriptors in, readiness
// and time out, no threads. Its sockets sit in one level-triggered epoll set, registered once, and the
// loop polls only that set's descriptor, so a wake-up costs the sockets that are ready, not every agent's
// (docs/PERFORMANCE.md: 10,000 agents).
#pragma once

#include <poll.h>

#include <cstdint>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "host/port_probe.hpp"
#include "multinode/rendezvous_rounds.hpp"
#include "process/event_loop.hpp"
#include "wire/tcp_socket.hpp"

namespace mgtrain {

// The rendezvous keeps the loop's time: its participants' deadlines are the loop's.
static_assert(std::is_same_v<rdzv::SteadyTime, LoopTime>, "rdzv::SteadyTime must be the event loop's LoopTime");

class RendezvousServer : public LoopParticipant, private rdzv::RoundsOutbox {
 public:
  // Owns `listener` (listening, non-blocking). `note` prints a line on the console. With a `token`, every
  // frame must be authenticated by it (frame_auth.hpp): frames that fail are dropped, counted and noted, and
  // a connection whose first frame fails is closed; they never reach the rounds.
  RendezvousServer(Fd listener, rdzv::RoundsSettings settings, PortProbe& ports,
                   std::function<void(const std::string&)> note, rdzv::SteadyTime now,
                   rdzv::RendezvousToken token = {});

  // Frames dropped because they failed authentication, in all.
  long long dropped_frames() const { return dropped_frames_.count; }
  // Connections that ended before any message reached the rounds (bytes that are not this protocol, a
  // handshake cut short, a port scan), in all. Noted like dropped frames, at 1, 10, 100, ...: "rendezvous:
  // dropped a connection from 10.0.0.9 (why); 1 dropped so far, the job is not affected".
  long long dropped_connections() const { return dropped_connections_.count; }

  // ---- LoopParticipant ----
  // Adds exactly one descriptor: the epoll set, for reading.
  void add_fds(std::vector<pollfd>& fds) override;
  // The epoll set is ready: accepts, reads and writes the sockets that are (a bounded number of batches, so a
  // flood cannot starve the loop), then drops the connections that ended.
  void on_ready(const pollfd& ready, LoopTime now) override;
  std::optional<LoopTime> next_deadline() const override;
  void on_time(LoopTime now) override;

  // This server's agent goes away (a signal): before a round runs every agent is told at once and the
  // job is over (RendezvousRounds::abandon). Returns whether the job is finished.
  bool abandon(int exit_code, const std::string& text, rdzv::SteadyTime now);

  // The job is decided (finish or reject sent to every agent).
  bool finished() const { return rounds_.finished(); }
  // Each member's latest status report of the current round, by node rank (the job-wide status API).
  const std::map<int, rdzv::NodeStatus>& node_status() const { return rounds_.node_status(); }
  // POST /stacks across the job (RendezvousRounds::start_stacks, take_stacks).
  std::optional<rdzv::StacksRefusal> start_stacks(double timeout_s, rdzv::SteadyTime now);
  std::optional<rdzv::JobStacks> take_stacks(rdzv::SteadyTime now) { return rounds_.take_stacks(now); }
  // Every round so far and the job's run id (run.json's history).
  const std::vector<rdzv::RoundRecord>& history() const { return rounds_.history(); }
  const std::string& run_id() const { return rounds_.run_id(); }
  // Finished and every connection flushed and closed (and, after a refusal or failure, no node rank
  // left that may still be trying to join), or the linger (3 s) passed since finishing: the host
  // agent may exit without cutting off what the others still need to read.
  bool quiescent(rdzv::SteadyTime now) const;
  // Once finished: closes the listener and every connection now instead of lingering (the host agent was signalled).
  void stop_lingering();

 private:
  struct Connection {
    std::unique_ptr<MessageConnection> socket;
    std::string address;           // the peer's, for messages
    bool closing = false;          // send what is queued, then half-close and read until the agent hangs up
    bool shut = false;             // half-closed
    bool watching_output = false;  // EPOLLOUT is registered (output waits for the socket)
    bool delivered = false;        // a message of its reached the rounds (it is an agent, which the rounds name)
  };

  void send(rdzv::ConnectionId connection, const rdzv::Message& message) override;
  void close(rdzv::ConnectionId connection, bool flush) override;
  int pick_store_port() override;
  void note(const std::string& line) override;
  void accept_all(rdzv::SteadyTime now);
  void on_connection_ready(rdzv::ConnectionId id, short revents, rdzv::SteadyTime now);
  void watch(rdzv::ConnectionId id, int operation, std::uint32_t events);
  void reap_closed(rdzv::SteadyTime now);
  void count_dropped(Connection& connection, const std::string& why);
  // A connection that ended before it delivered a message: counted and noted (rate-limited).
  void count_dropped_connection(const Connection& connection, const std::string& why);

  bool linger_cut_ = false;
  rdzv::RendezvousToken token_;
  // A count of drops, noted at 1, 10, 100, ...: a flood cannot flood the log.
  struct DropCount {
    long long count = 0;
    long long next_note = 1;
    // Adds `n`; whether the count reached the next note (which then moves to the next power of ten past it).
    bool add(long long n);
  };
  // Notes "rendezvous: dropped a <what> from <peer> (<why>); N dropped so far, ..." when `drops` reaches a note.
  void note_drop(DropCount& drops, long long n, const char* what, const Connection& connection, const std::string& why);
  DropCount dropped_frames_;
  DropCount dropped_connections_;
  Fd listener_;  // closed once the job is decided (after the linger when latecomers must hear it)
  PortProbe& ports_;
  std::function<void(const std::string&)> note_;
  rdzv::RendezvousRounds rounds_;
  std::map<rdzv::ConnectionId, Connection> connections_;
  rdzv::ConnectionId next_id_ = 1;
  Fd epoll_;
  // Connections whose state changed (output queued or flushed, closing, ended) since the last reap: the
  // only ones reap_closed looks at.
  std::vector<rdzv::ConnectionId> changed_;
  std::vector<rdzv::Message> messages_;  // reused for each ready connection
  std::optional<rdzv::SteadyTime> finished_at_;
};

}  // namespace mgtrain
