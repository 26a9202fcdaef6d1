// TCP plumbing for the rendezvous: name resolution, listening and connecting sockets (non-blocking,
// close-on-exec), and MessageConnection, a socket with a message decoder, the connection's hello and
// frame authentication (frame_auth.hpp), and an output queue that never blocks the event loop it lives in.
#pragma once

#include <sys/socket.h>

#include <string>
#include <vector>

#include "util/fd.hpp"
#include "wire/frame_auth.hpp"
#include "wire/rendezvous_message.hpp"

namespace mgtrain {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  // "10.77.0.1:29500", "[::1]:29500"
  std::string text() const;
  std::string host_text() const;  // without the port
};

// "localhost", 127.x.y.z, ::1 (bracketed or not), ::ffff:127.x.y.z: a name or address only this host reaches.
bool is_loopback_host(const std::string& host);

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

// The peer's authentication failed: its hello says it has no token while this side has one (or the other
// way round), or the first frame after the hello fails its tag (the tokens differ). The connection is closed.
class AuthenticationError : public rdzv::ProtocolError {
 public:
  using rdzv::ProtocolError::ProtocolError;
};

// A connected socket carrying rendezvous messages. Owns the fd. Sends its hello at once; what is sent before
// the peer's hello arrives waits for it (its tag needs the peer's nonce). With a token, frames whose tag
// fails are dropped and counted; the first frame of a connection failing closes it (AuthenticationError).
class MessageConnection {
 public:
  MessageConnection(Fd fd, const rdzv::RendezvousToken& token, rdzv::ConnectionSide side);

  int fd() const { return fd_.get(); }
  bool ended() const { return !fd_; }
  // Why it ended: "closed the connection", "reset the connection (Connection reset by peer)", ...
  const std::string& end_reason() const { return end_reason_; }
  // Something sent has not left yet: bytes the socket has not taken, or messages waiting for the peer's hello.
  bool has_output() const { return wants_write() || !waiting_.empty(); }
  // Bytes wait for the socket to take them (poll for POLLOUT).
  bool wants_write() const { return written_ < output_.size(); }
  // A frame from the peer passed authentication (with no token: the peer's hello arrived).
  bool peer_authenticated() const { return peer_authenticated_; }
  // The peer's hello arrived (the handshake is done), and how many bytes the peer sent in all.
  bool peer_hello_arrived() const { return auth_.started(); }
  std::size_t received_bytes() const { return received_; }
  // Frames that failed authentication and were dropped since the last call (a refused hello counts as one).
  int take_dropped_frames();
  // POLLIN, plus POLLOUT while output waits.
  short poll_events() const;

  // Queues the message and writes what the socket takes now.
  void send(const rdzv::Message& message);
  // Handles poll's revents: reads into `messages` and writes queued output. Throws rdzv::ProtocolError
  // when the peer sends bytes that are not this protocol, AuthenticationError when it is not authenticated
  // (the connection is then closed).
  void on_ready(short revents, std::vector<rdzv::Message>& messages);
  void flush();
  void close(const std::string& reason);

 private:
  void queue(const rdzv::Message& message);
  void take_frame(rdzv::Frame& frame, std::vector<rdzv::Message>& messages);
  void take_hello(const rdzv::Message& hello);

  Fd fd_;
  rdzv::FrameAuth auth_;
  std::string output_;
  std::size_t written_ = 0;
  std::vector<rdzv::Message> waiting_;  // sent before the peer's hello arrived
  rdzv::MessageDecoder decoder_;
  std::string end_reason_;
  bool peer_authenticated_ = false;
  int dropped_ = 0;
  std::size_t received_ = 0;
};

}  // namespace mgtrain
