// A node agent's connection to the rendezvous server: connects (retrying until the join deadline,
// since the server's node may start later), then carries messages both ways and notices a silent
// or vanished server. Lives in the agent's event loop like the server.
#pragma once

#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "multinode/rendezvous_rounds.hpp"
#include "multinode/tcp_socket.hpp"

namespace mgtrain {

class RendezvousClient {
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

  void add_poll_fds(std::vector<pollfd>& fds);
  // Received messages are appended to `messages`. A server that sends garbage throws rdzv::ProtocolError, one
  // that fails authentication AuthenticationError.
  void on_poll(const pollfd* fds, std::size_t count, rdzv::SteadyTime now, std::vector<rdzv::Message>& messages);
  void on_time(rdzv::SteadyTime now);
  std::optional<rdzv::SteadyTime> next_deadline() const;

  void send(const rdzv::Message& message);
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
  int polled_ = 0;            // fds added by the last add_poll_fds
  std::size_t rotation_ = 0;  // which of the host's addresses to try next
};

}  // namespace mgtrain
