// A node agent's connection to the rendezvous server: connects (retrying until the join deadline,
// since the server's node may start later), then carries messages both ways and notices a silent
// or vanished server. A LoopParticipant like the server, driven by the node agent and its RendezvousLink
// instead of added to the event loop itself (the class says why).
#pragma once

#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "multinode/rendezvous_rounds.hpp"
#include "process/event_loop.hpp"
#include "wire/tcp_socket.hpp"

namespace mgtrain {

// A LoopParticipant in shape, driven by the node agent instead of added to the event loop: its on_ready throws
// (rdzv::ProtocolError for a server that sends garbage, AuthenticationError for one that fails authentication), and
// what that means (the job refused as a usage error, or refused over the token) is the agent's to decide. So the
// agent's on_ready calls this on_ready inside its try/catch, and the agent's RendezvousLink passes on add_fds,
// next_deadline and on_time: no exception reaches the loop. It throws instead of keeping the fault for the agent to
// take because that keeps the agent's handling as it was: the fault is handled where it happens, and the call that
// throws delivers no message and changes nothing after the fault.
class RendezvousClient : public LoopParticipant {
 public:
  enum class State { kConnecting, kConnected, kUnreachable, kLost };

  // While the server's host name does not resolve (a well-formed name whose Kubernetes pod is not up yet, or a
  // typo), the console hears so this often, the first time this long after the first failure.
  static constexpr std::chrono::seconds kUnresolvedNoticeInterval{30};

  // Starts connecting to host:port at once; gives up at `connect_deadline`. With a `token` the connection is
  // authenticated (frame_auth.hpp).
  RendezvousClient(std::string host, int port, rdzv::SteadyTime connect_deadline, rdzv::SteadyTime now,
                   rdzv::RendezvousToken token = {});

  State state() const { return state_; }
  // "10.77.0.1:29500"
  std::string endpoint() const;
  // kUnreachable: the last connect error; kLost: how the connection ended.
  const std::string& problem() const { return problem_; }
  // Set once when the connection is established (the agent then sends its join).
  bool take_connected_event();
  // "still cannot resolve HOST (reason); retrying until the join timeout in N s" once every
  // kUnresolvedNoticeInterval while connecting and the host does not resolve; nullopt otherwise.
  std::optional<std::string> take_unresolved_notice(rdzv::SteadyTime now);

  // ---- LoopParticipant ----
  // At most one descriptor: the socket while connecting (for writing) or while connected.
  void add_fds(std::vector<pollfd>& fds) override;
  // The connect's outcome, or received messages, kept for take_messages. A server that sends garbage throws
  // rdzv::ProtocolError, one that fails authentication AuthenticationError; a call that throws keeps none of
  // the messages it read.
  void on_ready(const pollfd& ready, LoopTime now) override;
  std::optional<LoopTime> next_deadline() const override;
  // Retries the connect when due; gives up at the connect deadline.
  void on_time(LoopTime now) override;

  // The messages received since the last call, in order.
  std::vector<rdzv::Message> take_messages() { return std::exchange(messages_, {}); }

  void send(const rdzv::Message& message);
  // A status report (kNodeStatus): sent like any message, but it does not stand in for a heartbeat (last_sent stays),
  // so reports never change when this agent's heartbeats go out, nor the liveness timing on either side.
  void send_report(const rdzv::Message& message);
  bool has_output() const { return connection_ && connection_->has_output(); }
  // The server's messages passed authentication once on this connection (always, without a token, once its
  // hello arrived).
  bool authenticated() const { return authenticated_; }
  // Whether what was sent has not all reached the server yet (queued here or in the kernel, unacknowledged).
  bool unacknowledged() const;
  void close();
  rdzv::SteadyTime last_heard() const { return last_heard_; }
  rdzv::SteadyTime last_sent() const { return last_sent_; }

 private:
  void try_connect(rdzv::SteadyTime now);
  void connect_failed(int error, rdzv::SteadyTime now);

  std::string host_;
  int port_;
  rdzv::RendezvousToken token_;
  rdzv::SteadyTime connect_deadline_;
  State state_ = State::kConnecting;
  std::string problem_;
  Fd connecting_;  // the socket while connecting
  std::string connecting_to_;
  std::optional<rdzv::SteadyTime> retry_at_;
  std::string unresolved_reason_;               // getaddrinfo's, while the host does not resolve
  std::optional<rdzv::SteadyTime> notice_due_;  // set while the host does not resolve
  std::unique_ptr<MessageConnection> connection_;
  bool connected_event_ = false;
  bool authenticated_ = false;
  rdzv::SteadyTime last_heard_{};
  rdzv::SteadyTime last_sent_{};
  std::vector<rdzv::Message> messages_;  // received, not taken yet
  int polled_ = 0;                       // fds added by the last add_fds
  std::size_t rotation_ = 0;             // which of the host's addresses to try next
};

}  // namespace mgtrain
