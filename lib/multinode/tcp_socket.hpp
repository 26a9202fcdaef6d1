// TCP plumbing for the rendezvous: name resolution, listening and connecting sockets (non-blocking,
// close-on-exec), and MessageConnection, a socket with a message decoder and an output queue that
// never blocks the event loop it lives in.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "multinode/rendezvous_message.hpp"
#include "util/fd.hpp"

namespace mgtrain {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  // "10.77.0.1:29500", "[::1]:29500"
  std::string text() const;
  std::string host_text() const;  // without the port
};

// The addresses of host:port (IPv4 first). Empty with `error` set when the name does not resolve.
std::vector<SocketAddress> resolve_tcp(const std::string& host, int port, std::string& error);

// A listening socket (SO_REUSEADDR, non-blocking) on `address`, or an invalid Fd with errno set.
Fd listen_on(const SocketAddress& address);
// On every interface: IPv6 dual-stack where the kernel has it, else IPv4. Invalid Fd with errno set.
Fd listen_on_any(int port);

// Starts a non-blocking connect; an invalid Fd with errno set when it failed at once (EINPROGRESS is
// not a failure).
Fd start_connect(const SocketAddress& address);
// After POLLOUT on a connecting socket: 0 when connected, else the errno of the failure.
int connect_result(int fd);

// The peer's address of a connected socket, without the port ("10.77.0.2").
std::string peer_host(int fd);

// A connected socket carrying rendezvous messages. Owns the fd.
class MessageConnection {
 public:
  explicit MessageConnection(Fd fd);

  int fd() const { return fd_.get(); }
  bool ended() const { return !fd_; }
  // Why it ended: "closed the connection", "reset the connection (Connection reset by peer)", ...
  const std::string& end_reason() const { return end_reason_; }
  bool has_output() const { return written_ < output_.size(); }
  // POLLIN, plus POLLOUT while output waits.
  short poll_events() const;

  // Queues the message and writes what the socket takes now.
  void send(const rdzv::Message& message);
  // Handles poll's revents: reads into `messages` and writes queued output. Throws rdzv::ProtocolError
  // when the peer sends bytes that are not this protocol (the connection is then closed).
  void on_ready(short revents, std::vector<rdzv::Message>& messages);
  void flush();
  void close(const std::string& reason);

 private:
  Fd fd_;
  std::string output_;
  std::size_t written_ = 0;
  rdzv::MessageDecoder decoder_;
  std::string end_reason_;
};

}  // namespace mgtrain
